"""Share a trained run on the Hugging Face Hub, and fetch one: ``unityagents-push-to-hf`` and
``unityagents-load-from-hf``, with the options and the behaviour of ML-Agents Release 22's
``mlagents-push-to-hf`` / ``mlagents-load-from-hf``.

Push: read the run's ``configuration.yaml`` (``--configfile-name``), write it as ``config.json`` and a
``README.md`` model card into the run folder (``--local-dir``), then ``HfApi.create_repo(exist_ok=True)``
and ``HfApi.upload_folder`` of the whole folder. The card's metadata is what the Hub indexes:
``library_name: ml-agents`` and the tags ``<env>``, ``deep-reinforcement-learning``,
``reinforcement-learning``, ``ML-Agents-<env>`` as a YAML list; its text says which trainer made the
model and how to resume training from it. ``--dry-run`` prints the files that would be uploaded and the
card, and writes and sends nothing.

Load: ``snapshot_download`` of the repository into ``<local-dir>/<repository name>``.

Both need the optional ``huggingface_hub`` (``pip install 'unity-tf-trainer[hub]'``); a missing library, a missing
token or an unreachable Hub is one line on stderr and exit status 1.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

import yaml

from unityagents.distribution import DISTRIBUTION, install_command, install_hint

#: The metadata tags every card carries beside ``<env>`` and ``ML-Agents-<env>`` (Release 22's).
TAGS = ("deep-reinforcement-learning", "reinforcement-learning")
LIBRARY_NAME = "ml-agents"
CONFIG_JSON = "config.json"
CARD = "README.md"
NEEDS_HUB = f"needs huggingface_hub: {install_hint('hub')}, or pip install huggingface_hub"


class HubError(Exception):
    """A refusal of the command, printed as one line (exit status 1)."""


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "(from a clone)"


def card_install_line() -> str:
    """The install command a reader of the card can run: the distribution by name, or, when this copy was
    installed from a public repository (pip records it in ``direct_url.json``), that repository at the
    installed commit, so the reader gets the very version that trained the model."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        source = json.loads(distribution(DISTRIBUTION).read_text("direct_url.json") or "{}")
    except (PackageNotFoundError, ValueError, OSError):
        source = {}
    vcs, url = source.get("vcs_info") or {}, str(source.get("url") or "")
    if vcs.get("vcs") == "git" and url.startswith(("https://", "ssh://")):
        commit = vcs.get("commit_id") or vcs.get("requested_revision")
        return f"pip install '{DISTRIBUTION}[hub] @ git+{url}" + (f"@{commit}'" if commit else "'")
    return install_command("hub")


def read_run(local_dir: str, configfile_name: str) -> Dict[str, Any]:
    """The run's configuration file as a mapping; a missing or unreadable file names the fix."""
    path = os.path.join(local_dir, configfile_name)
    if not os.path.isfile(path):
        raise HubError(f"{path} does not exist: --local-dir must be a run's folder (results/<run-id> of "
                       f"unityagents-learn, models/<run-path> of learn) holding {configfile_name}.")
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise HubError(f"{path} cannot be read as YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(config, dict) or not config:
        raise HubError(f"{path} holds no settings (expected a mapping of behaviours or brains).")
    return config


def describe(local_dir: str, config: Dict[str, Any]) -> Dict[str, str]:
    """What the card says: the environment, the first behaviour (brain) and its trainer, and which front end
    wrote the run (a ``behaviors:`` section: ``unityagents-learn``; flat blocks per brain: ``learn``)."""
    r22 = isinstance(config.get("behaviors"), dict)
    blocks = config["behaviors"] if r22 else {k: v for k, v in config.items() if isinstance(v, dict)}
    if not blocks:
        raise HubError("the configuration names no behaviour: expected a behaviors: section (unityagents-learn) or "
                       "one block per brain (learn).")
    behavior, block = next(iter(blocks.items()))
    if r22:
        trainer = str(block.get("trainer_type") or "ppo")
    elif block.get("is_ghost"):
        trainer = "ghost"
    elif block.get("is_imitation"):
        trainer = "imitation"
    else:
        trainer = str(block.get("trainer") or "ppo")
    # The environment: the frozen graph's name (<env>.bytes, written by both front ends), else the build the
    # run config names, else the first behaviour's name (as Release 22 names it).
    env = next((f[: -len(".bytes")] for f in sorted(os.listdir(local_dir)) if f.endswith(".bytes")), None)
    env_path = ((config.get("env_settings") or {}).get("env_path") if r22 else None)
    if env is None and env_path:
        env = os.path.splitext(os.path.basename(str(env_path).rstrip("/\\")))[0]
    return {"env": env or behavior.split("?")[0], "behavior": behavior, "trainer": trainer,
            "front_end": "unityagents-learn" if r22 else "learn"}


def model_card(info: Dict[str, str], repo_id: str, run_id: Optional[str]) -> str:
    """The README.md model card: Hub metadata, then what made the model and how to use and resume it."""
    env, name = info["env"], repo_id.split("/")[-1]
    meta = yaml.safe_dump({"library_name": LIBRARY_NAME, "tags": [env, *TAGS, f"ML-Agents-{env}"]},
                          sort_keys=False)
    if info["front_end"] == "unityagents-learn":
        resume = (f"unityagents-load-from-hf --repo-id={repo_id} --local-dir=./downloads\n"
                  f"unityagents-learn ./downloads/{name}/configuration.yaml --env={env} "
                  f"--results-dir=./downloads --run-id={name} --resume")
        where = ("`unityagents-learn` (ML-Agents Release 22's run config and command line)")
    else:
        resume = (f"unityagents-load-from-hf --repo-id={repo_id} --local-dir=./models\n"
                  f"learn {env} --train --load --run-path={name}")
        where = "`learn` (the flat `trainer_configurations.yaml`)"
    run = f" (run `{run_id}`)" if run_id else ""
    return f"""---
{meta}---

# {info['trainer']} agent for {env}

A **{info['trainer']}** policy for the behaviour `{info['behavior']}` of **{env}**{run}, trained by
[{DISTRIBUTION}](https://pypi.org/project/{DISTRIBUTION}/) {_version()} through {where}: a TensorFlow trainer
that reads ML-Agents' configuration and writes ML-Agents' run layout, not Unity's own `mlagents-learn`.

## Files

- `<Behavior>.onnx`: the policy for today's Unity (ML-Agents model format 3; Barracuda, Sentis or the
  Inference Engine). Put it in the Agent's *Behavior Parameters > Model*.
- `<env>.bytes`: the same policy as a frozen TensorFlow graph, for 2018 (API-2) Unity builds.
- `configuration.yaml` (and `config.json`, the same settings as JSON): the settings the run used.
- the checkpoints: what resuming starts from.

## Resume training

```bash
{card_install_line()}
{resume}
```

`--resume` (or `--load`) continues where the run stopped: weights, optimiser, step counters, schedules,
normaliser statistics.
"""


def files_to_upload(local_dir: str) -> List[Tuple[str, int]]:
    """Every file under the folder (relative path, size), as ``upload_folder`` sends it."""
    out = []
    for folder, dirs, files in os.walk(local_dir):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for f in sorted(files):
            path = os.path.join(folder, f)
            out.append((os.path.relpath(path, local_dir).replace(os.sep, "/"), os.path.getsize(path)))
    return out


def check_repo_id(repo_id: str) -> str:
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise argparse.ArgumentTypeError(f"{repo_id!r}: expected <user or organisation>/<repository name>, "
                                         "with exactly one '/'")
    return repo_id


def _hub():
    try:
        import huggingface_hub
    except ImportError:
        raise HubError(f"this command {NEEDS_HUB}.") from None
    return huggingface_hub


def push(args: argparse.Namespace) -> int:
    local_dir = args.local_dir
    config = read_run(local_dir, args.configfile_name)
    info = describe(local_dir, config)
    card = model_card(info, args.repo_id, args.run_id)
    if args.dry_run:
        listed = {name for name, _ in files_to_upload(local_dir)}
        print(f"Would create {args.repo_id} (if missing) and upload {os.path.abspath(local_dir)}:")
        for name, size in files_to_upload(local_dir):
            if name not in (CONFIG_JSON, CARD):
                print(f"  {name}  ({size:,} bytes)")
        for name in (CONFIG_JSON, CARD):
            print(f"  {name}  ({'rewritten' if name in listed else 'written'} by this command)")
        print(f"\n{CARD}:\n{card}", end="")
        return 0
    hub = _hub()
    if not hub.get_token():
        raise HubError("no Hugging Face token: log in with `hf auth login` (or set HF_TOKEN), then run this again.")
    with open(os.path.join(local_dir, CONFIG_JSON), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=4, default=str)
    with open(os.path.join(local_dir, CARD), "w", encoding="utf-8") as f:
        f.write(card)
    api = hub.HfApi()
    try:
        url = api.create_repo(repo_id=args.repo_id, exist_ok=True)
        api.upload_folder(repo_id=args.repo_id, folder_path=local_dir, commit_message=args.commit_message)
    except Exception as e:  # the library's network, auth and validation errors share no base class
        raise HubError(f"the Hub refused or could not be reached ({type(e).__name__}: "
                       f"{str(e).splitlines()[0] if str(e) else 'no detail'}). Check the connection, the token "
                       f"and that {args.repo_id} is yours.") from None
    print(f"Your model is pushed to the hub. You can view your model here: {url}")
    return 0


def load(args: argparse.Namespace) -> int:
    hub = _hub()
    target = os.path.join(args.local_dir, args.repo_id.split("/")[-1])
    try:
        hub.snapshot_download(repo_id=args.repo_id, local_dir=target)
    except Exception as e:  # as in push
        raise HubError(f"could not download {args.repo_id} ({type(e).__name__}: "
                       f"{str(e).splitlines()[0] if str(e) else 'no detail'}). Check the connection and the "
                       "repository's name.") from None
    print(f"The repository {args.repo_id} has been downloaded to {target}")
    return 0


def push_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unityagents-push-to-hf",
                                description="Upload a trained run's folder to the Hugging Face Hub with a model card.")
    p.add_argument("--run-id", default=None, help="The run's name, for the card and the messages.")
    p.add_argument("--local-dir", default="./", help="The run's folder (results/<run-id> or models/<run-path>).")
    p.add_argument("--repo-id", required=True, type=check_repo_id, help="<user or organisation>/<repository name>.")
    p.add_argument("--commit-message", default="Push to Hub", help="The upload's commit message.")
    p.add_argument("--configfile-name", default="configuration.yaml",
                   help="The run's settings in the folder, written to the Hub also as config.json.")
    p.add_argument("--dry-run", action="store_true",
                   help="Print the files that would be uploaded and the model card; write and send nothing.")
    return p


def load_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unityagents-load-from-hf",
                                description="Download a model repository from the Hugging Face Hub.")
    p.add_argument("--repo-id", required=True, type=check_repo_id, help="<user or organisation>/<repository name>.")
    p.add_argument("--local-dir", default="./", help="Downloads go to <local-dir>/<repository name>.")
    return p


def _run(action, parser: argparse.ArgumentParser, argv: Optional[List[str]]) -> int:
    args = parser.parse_args(argv)
    try:
        return action(args)
    except HubError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1


def push_main(argv: Optional[List[str]] = None) -> int:
    return _run(push, push_parser(), argv)


def load_main(argv: Optional[List[str]] = None) -> int:
    return _run(load, load_parser(), argv)


def push_cli() -> None:
    """Console-script entry point (``unityagents-push-to-hf``)."""
    sys.exit(push_main())


def load_cli() -> None:
    """Console-script entry point (``unityagents-load-from-hf``)."""
    sys.exit(load_main())
