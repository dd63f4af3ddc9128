"""The docs stay true: every relative link and anchor in README.md and docs/*.md resolves, and every command
line they show for this project's own programs parses (``--help`` level: the program's docopt or argparse
parser, nothing run).

Which programs are checked, and with which parser, is ``PARSERS``. A program that another line of work adds
(``PENDING``) is tolerated only while setup.py declares no console script of that name: once it does, its
commands fail here until ``PARSERS`` has its entry.
"""
from __future__ import annotations

import glob
import os
import re
import shlex
import sys
import unicodedata
from typing import Callable, Dict, List, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted([os.path.join(ROOT, "README.md")] + glob.glob(os.path.join(ROOT, "docs", "*.md")))

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def _learn(argv: List[str]) -> None:
    from docopt import docopt

    import learn

    docopt(learn.__doc__, argv=argv)


def _learn_r22(argv: List[str]) -> None:
    from docopt import docopt

    import learn_r22

    docopt(learn_r22.__doc__, argv=learn_r22.split_env_args(argv)[0])


def _tune(argv: List[str]) -> None:
    from docopt import docopt

    from unityagents_tune import cli

    docopt(cli.__doc__, argv=argv)


def _push(argv: List[str]) -> None:
    import learn_hub

    learn_hub.push_parser().parse_args(argv)


def _load(argv: List[str]) -> None:
    import learn_hub

    learn_hub.load_parser().parse_args(argv)


def _check_model(argv: List[str]) -> None:
    from trainers.export.model_check.cli import parser

    parser().parse_args(argv)


def _academy(argv: List[str]) -> None:
    from academy.__main__ import _parser

    _parser().parse_args(argv)


#: How a command line starts (its words) -> the parser of the program it runs.
PARSERS: Dict[Tuple[str, ...], Callable[[List[str]], None]] = {
    ("python", "learn.py"): _learn,
    ("learn",): _learn,
    ("unityagents-learn",): _learn_r22,
    ("python", "-m", "trainers.learn_r22"): _learn_r22,
    ("unityagents-tune",): _tune,
    ("unityagents-push-to-hf",): _push,
    ("unityagents-load-from-hf",): _load,
    ("unityagents-check-model",): _check_model,
    ("python", "-m", "trainers.export.model_check"): _check_model,
    ("python", "-m", "academy"): _academy,
}
#: A placeholder the pages write for a value (``<env>``, ``N``, ``PATH``): given to a parser as ``1``, which
#: every option's type takes (a count, a port, a name, a path).
PLACEHOLDER = re.compile(r"^(<[^<>]+>|[A-Z][A-Z_]{0,7})$")
#: Programs of other lines of work, and the page that documents them; see the module's docstring.
PENDING: Dict[str, str] = {}


def declared_console_scripts() -> set:
    text = open(os.path.join(ROOT, "setup.py"), encoding="utf-8").read()
    return set(re.findall(r"[\"']([\w.-]+)\s*=\s*[\w.]+:\w+[\"']", text))


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: the rendered text lower-cased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFC", text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: str) -> set:
    text = FENCE.sub("", open(path, encoding="utf-8").read())
    seen: Dict[str, int] = {}
    out = set()
    for _, heading in HEADING.findall(text):
        slug = github_anchor(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path: str) -> List[str]:
    """The link targets of a page, outside code."""
    text = FENCE.sub("", open(path, encoding="utf-8").read())
    text = INLINE_CODE.sub("", text)
    return LINK.findall(text)


def broken_links(path: str) -> List[str]:
    out = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(resolved):
            out.append(f"{target}: {os.path.relpath(resolved, ROOT)} does not exist")
        elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
            out.append(f"{target}: no heading of {os.path.relpath(resolved, ROOT)} has the anchor #{anchor}")
    return out


def command_lines(path: str) -> List[str]:
    """Every command line a page shows: the lines of its code blocks (with ``\\`` continuations joined) and
    its inline code spans (whitespace joined), whatever program they run."""
    text = open(path, encoding="utf-8").read()
    out = []
    for block in FENCE.finditer(text):
        body = block.group(0).split("\n")[1:-1]
        joined = "\n".join(body).replace("\\\n", " ")
        out += [line.strip() for line in joined.split("\n") if line.strip()]
    for span in INLINE_CODE.finditer(FENCE.sub("", text)):
        out.append(" ".join(span.group(2).split()))
    return out


def ours(line: str):
    """``(prefix, argv)`` when the line runs one of this project's programs (PARSERS or PENDING), else None."""
    line = line.split(" && ")[-1] if " && " in line else line
    line = re.sub(r"\[([^\[\]]*)\]", r"\1", line)  # a synopsis' [optional] parts, given
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    for prefix in sorted(list(PARSERS) + [(p,) for p in PENDING], key=len, reverse=True):
        if tuple(words[: len(prefix)]) == prefix:
            argv = ["1" if PLACEHOLDER.match(w) else w for w in words[len(prefix):]]
            return (prefix, argv) if argv and argv[0] not in ("...",) else None
    return None


def commands() -> List[Tuple[str, str, Tuple[str, ...], List[str]]]:
    out = []
    for page in PAGES:
        for line in command_lines(page):
            found = ours(line)
            if found:
                out.append((os.path.relpath(page, ROOT), line, *found))
    return out


def parse_error(prefix: Tuple[str, ...], argv: List[str]) -> str:
    """'' when the program's parser takes ``argv``; else why not."""
    if prefix not in PARSERS:
        name = prefix[0]
        if name in declared_console_scripts():
            return f"{name} is a console script of setup.py but has no parser in tests/test_docs.py PARSERS"
        return ""  # PENDING and not on this branch: see the module's docstring
    try:
        PARSERS[prefix](argv)
    except SystemExit as e:  # docopt's DocoptExit and argparse's exit are SystemExits
        if e.code not in (0, None):
            return f"exit {e.code}: {e}"
    return ""


@pytest.mark.parametrize("page", [os.path.relpath(p, ROOT) for p in PAGES])
def test_every_relative_link_and_anchor_resolves(page):
    assert not broken_links(os.path.join(ROOT, page))


def test_every_command_of_our_programs_parses(capsys):
    found = commands()
    programs = {prefix for _, _, prefix, _ in found}
    assert {("python", "learn.py"), ("unityagents-learn",), ("unityagents-push-to-hf",),
            ("python", "-m", "academy")} <= programs, "the pages show fewer of our commands than they should"
    failures = [f"{page}: {line}\n    {why}" for page, line, prefix, argv in found
                for why in [parse_error(prefix, argv)] if why]
    capsys.readouterr()
    assert not failures, "\n".join(failures)


def test_the_checks_catch_a_broken_link_a_missing_anchor_and_a_bad_option(tmp_path):
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text("# Title\n\n## A `code` heading: with, punctuation\n\n"
                    "[ok](#a-code-heading-with-punctuation) [self](page.md#title) [gone](missing.md) "
                    "[bad anchor](#nowhere) `[not a link](nowhere.md)`\n\n"
                    "```bash\npython learn.py 3DBall --train --no-such-option\nunityagents-learn c.yaml \\\n"
                    "  --env=3DBall --run-id=x\n```\n")
    assert broken_links(str(page)) == [
        f"missing.md: {os.path.relpath(str(tmp_path / 'docs' / 'missing.md'), ROOT)} does not exist",
        "#nowhere: no heading of " + os.path.relpath(str(page), ROOT) + " has the anchor #nowhere"]
    lines = command_lines(str(page))
    assert "unityagents-learn c.yaml    --env=3DBall --run-id=x" in lines
    bad, good = ours(lines[0]), ours(lines[1])
    assert parse_error(*bad).startswith("exit") and parse_error(*good) == ""


def test_a_program_of_setup_py_without_a_parser_is_an_error_not_skipped(monkeypatch):
    assert "unityagents-tune" in declared_console_scripts() and ("unityagents-tune",) in PARSERS
    name = "unityagents-later"  # a program of another line of work
    monkeypatch.setattr(sys.modules[__name__], "PENDING", {name: "docs/later.md"})
    assert parse_error((name,), ["--help"]) == ""
    monkeypatch.setattr(sys.modules[__name__], "declared_console_scripts", lambda: {name})
    assert "has no parser" in parse_error((name,), ["--help"])


def test_ci_runs_exactly_the_readmes_test_command():
    shown = [line for line in command_lines(os.path.join(ROOT, "README.md")) if "pytest" in line and "&&" in line]
    assert shown == ["pip install -r requirements.txt -e . && python -m pytest -n auto --dist loadfile"]
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read().strip().split("\n")
    assert ci[-1] == shown[0]
