"""The code's structure, measured from the sources (``ast``), nothing imported but ``Trainer``.

Printed:

1. imports back up: a module importing a layer above its own (front ends ``learn``, ``learn_hub``,
   ``learn_r22`` and its ``trainers.learn_r22`` door > ``runner`` > ``trainers`` > ``unityagents``;
   ``academy`` beside them, sharing only the protocol messages), and, inside ``trainers``,
   ``trainers.settings`` (which every trainer imports) importing a trainer, a reward signal,
   self-play or imitation;
2. files touched per "add a ...": for each built-in of a kind (trainer types, reward signals,
   protocols, scenes), the files outside its own module or folder whose code names it in a string
   literal (a registry line, a schema, a docs table): what adding one more of that kind touches,
   besides its own files;
3. the largest module (lines) and the largest class (lines);
4. ``Trainer``'s public members (methods, properties and attributes without a leading underscore).

    python bench/structure.py
"""
from __future__ import annotations

import ast
import os
import sys
from collections import defaultdict
from typing import Dict, List, Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tests.test_layers import imports_of  # noqa: E402
from tests.test_layers import modules as package_modules  # noqa: E402

FRONT_ENDS = ("learn", "learn_hub", "learn_r22")
FRONT_END_MODULES = FRONT_ENDS + ("trainers.learn_r22",)


def modules() -> Dict[str, str]:
    """Every module of the packages and the front ends at the top: name -> path."""
    return {**package_modules(), **{name: os.path.join(ROOT, f"{name}.py") for name in FRONT_ENDS}}


def graph() -> Dict[str, Set[str]]:
    return {name: imports_of(name, path) for name, path in modules().items()}

LAYER = {"front end": 4, "runner": 3, "trainers": 2, "unityagents": 1}
SETTINGS_MAY_NOT_USE = ("trainers.ghost", "trainers.imitation", "trainers.reward_signals", "trainers.ppo",
                        "trainers.sac", "trainers.poca", "trainers.trainer")
#: kind -> {built-in name: its own files or folder (relative)}
KINDS: Dict[str, Dict[str, Tuple[str, ...]]] = {
    "trainer": {"ppo": ("trainers/ppo",), "sac": ("trainers/sac",), "poca": ("trainers/poca",),
                "ghost": ("trainers/ghost",), "imitation": ("trainers/imitation",)},
    "reward signal": {"curiosity": ("trainers/reward_signals/curiosity.py",),
                      "rnd": ("trainers/reward_signals/rnd.py",), "gail": ("trainers/reward_signals/gail.py",)},
    "protocol": {"api2": ("unityagents/wire/api2.py", "unityagents/wire/api2_messages.py",
                          "unityagents/wire/api2_stream.py"),
                 "grpc": ("unityagents/wire/grpc.py", "unityagents/wire/grpc_messages.py",
                          "unityagents/wire/grpc_server.py", "unityagents/wire/protos")},
}


def layer(module: str) -> str:
    if module in FRONT_END_MODULES:
        return "front end"
    return module.split(".")[0]


def imports_back_up(g: Dict[str, Set[str]]) -> List[str]:
    found = []
    for m, deps in sorted(g.items()):
        own = layer(m)
        for d in sorted(deps):
            if d not in g:
                continue
            other = layer(d)
            if own in LAYER and other in LAYER and LAYER[other] > LAYER[own]:
                found.append(f"{m} -> {d}")
            elif own == "academy" and other in ("runner", "trainers", "unityagents") and not d.startswith(
                    "unityagents.wire.protos"):
                found.append(f"{m} -> {d}")
            elif m.startswith("trainers.settings") and d.startswith(SETTINGS_MAY_NOT_USE):
                found.append(f"{m} -> {d} (settings, below the trainers)")
    return found


def string_literals(path: str) -> Set[str]:
    tree = ast.parse(open(path).read(), path)
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def touched_per_kind(files: List[str]) -> Dict[str, Dict[str, List[str]]]:
    literals = {f: string_literals(os.path.join(ROOT, f)) for f in files}
    out: Dict[str, Dict[str, List[str]]] = defaultdict(dict)
    for kind, builtins in KINDS.items():
        for name, own in builtins.items():
            out[kind][name] = sorted(f for f, lits in literals.items()
                                     if name in lits and not f.startswith(own))
    return out


def largest(files: List[str]) -> Tuple[Tuple[int, str], Tuple[int, str]]:
    module = max((sum(1 for _ in open(os.path.join(ROOT, f))), f) for f in files)
    classes = []
    for f in files:
        tree = ast.parse(open(os.path.join(ROOT, f)).read(), f)
        classes += [(n.end_lineno - n.lineno + 1, f"{f}:{n.name}") for n in ast.walk(tree)
                    if isinstance(n, ast.ClassDef)]
    return module, max(classes)


def trainer_public_members() -> List[str]:
    from trainers.trainer.base import Trainer

    names = set()
    for cls in Trainer.__mro__:
        if cls is object:
            continue
        names.update(k for k in vars(cls) if not k.startswith("_"))
    return sorted(names)


def main() -> None:
    g = graph()
    back = imports_back_up(g)
    print(f"imports back up: {len(back)}")
    for line in back:
        print(f"  {line}")
    files = sorted(os.path.relpath(p, ROOT) for p in modules().values())
    files += ["setup.py"] if os.path.isfile(os.path.join(ROOT, "setup.py")) else []
    print("\nfiles that name a built-in outside its own files (what adding one more of the kind touches):")
    for kind, names in touched_per_kind(files).items():
        counts = {name: len(fs) for name, fs in names.items()}
        print(f"  a {kind}: {max(counts.values())} at most ({', '.join(f'{k} {v}' for k, v in counts.items())})")
        for name, fs in names.items():
            print(f"    {name}: {', '.join(fs) or '-'}")
    (module_lines, module), (class_lines, cls) = largest([f for f in files if f.endswith(".py")])
    print(f"\nlargest module: {module} ({module_lines} lines); largest class: {cls} ({class_lines} lines)")
    members = trainer_public_members()
    print(f"\nTrainer's public members: {len(members)}\n  {', '.join(members)}")


if __name__ == "__main__":
    main()
