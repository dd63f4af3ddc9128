"""The layers stay apart: read from the sources' imports (``ast``), without importing anything.

- no import cycle among the project's modules;
- the Unity side (``academy``) imports nothing of the run or the trainers, and of ``unityagents`` only the
  generated protocol messages (``unityagents.wire.protos``) that both ends of the wire share;
- the wire (``unityagents``) imports nothing of the run or the trainers and never TensorFlow;
- the tuner (``unityagents_tune``) sits on top: nothing else imports it;
- the protocols (``unityagents.wire``) import nothing of the environment or the set above them:
  a communicator sees the environment only through its ``Peer``;
- the algorithms (``trainers``) know of ``unityagents`` only its data types, exceptions and
  demonstration files: no sockets, processes or protocols;
- the layers run one way: front ends -> the run (``runner``) -> the algorithms (``trainers``) ->
  ``unityagents``; the algorithms never import the run, and the run never imports a front end;
  the settings' ground floor (``trainers.settings``) imports no trainer; the two front ends share
  one ``RunOptions`` and neither imports the other;
- nothing imports a front end (``learn.py``, ``learn_hub.py``, ``learn_r22.py``) but another front
  end or the tuner, and the front ends know nothing of the Unity side (``academy``): they launch
  scenes through ``unityagents``.
"""
from __future__ import annotations

import ast
import os
from typing import Dict, List, Set

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("unityagents", "runner", "trainers", "academy", "unityagents_tune")
#: What an algorithm may import of ``unityagents``.
TRAINER_MAY_USE = ("unityagents.brain", "unityagents.base_env", "unityagents.exception", "unityagents.demo")


#: The command-line front ends at the top of the tree (``learn_r22``: ``unityagents-learn``), and those
#: that live in packages (``trainers.learn_r22``, the door that ``python -m trainers.learn_r22`` opens
#: onto ``learn_r22``; ``unityagents-tune``, which runs trials through the other two's settings).
FRONT_ENDS = ("learn", "learn_hub", "learn_r22")
FRONT_END_MODULES = FRONT_ENDS + ("trainers.learn_r22", "unityagents_tune.cli")


def modules() -> Dict[str, str]:
    found = {name: os.path.join(ROOT, f"{name}.py") for name in FRONT_ENDS}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for f in files:
                if f.endswith(".py") and not f.endswith("_pb2.py"):
                    path = os.path.join(folder, f)
                    name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    found[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return found


def imports_of(name: str, path: str) -> Set[str]:
    """Every module name ``path`` imports (absolute; ``from x import y`` gives ``x`` and ``x.y``)."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    out: Set[str] = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def graph() -> Dict[str, Set[str]]:
    mods = modules()
    return {name: imports_of(name, path) for name, path in mods.items()}


def cycles(g: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    own = {m: sorted(d for d in deps if d in g and d != m) for m, deps in g.items()}
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in own[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in own:
        if v not in index:
            visit(v)
    return found


def test_the_reader_sees_a_cycle_and_relative_imports():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    g = graph()
    assert "unityagents.wire.base" in g["unityagents.environment"]  # a relative import, resolved
    assert "trainers.returns" in g["trainers.reward_signals"]


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_unity_side_imports_only_the_shared_messages():
    bad = {m: sorted(d for d in deps if d.split(".")[0] in ("runner", "trainers", "unityagents")
                     and not d.startswith("unityagents.wire.protos"))
           for m, deps in graph().items() if m.startswith("academy")}
    assert {m: d for m, d in bad.items() if d} == {}


def test_the_wire_knows_nothing_of_learning():
    bad = {m: sorted(d for d in deps if d.split(".")[0] in ("runner", "trainers", "tensorflow"))
           for m, deps in graph().items() if m.split(".")[0] == "unityagents"}
    assert {m: d for m, d in bad.items() if d} == {}


def test_only_the_command_line_knows_the_tuner():
    """The tuner drives whole runs from outside (subprocesses, Ray Tune); nothing it drives imports it."""
    bad = {m: sorted(d for d in deps if d.split(".")[0] == "unityagents_tune")
           for m, deps in graph().items() if m.split(".")[0] != "unityagents_tune"}
    assert {m: d for m, d in bad.items() if d} == {}


def test_the_protocols_know_nothing_of_the_environment_above_them():
    above = ("unityagents.environment", "unityagents.vector", "unityagents.bridges", "unityagents.launcher")
    bad = {m: sorted(d for d in deps if d.startswith(above))
           for m, deps in graph().items() if m.startswith("unityagents.wire")}
    assert {m: d for m, d in bad.items() if d} == {}


def test_the_algorithms_know_no_sockets_or_processes():
    bad = {}
    for m, deps in graph().items():
        if m.startswith("trainers") and m not in FRONT_END_MODULES:
            wire = sorted(d for d in deps if d.startswith("unityagents.") and d.count(".") == 1
                          and not d.startswith(TRAINER_MAY_USE) and not d.startswith("unityagents.wire.protos"))
            wire += sorted(d for d in deps if d.split(".")[0] in ("socket", "subprocess", "grpc"))
            if wire:
                bad[m] = wire
    assert bad == {}


def back_up(g: Dict[str, Set[str]], below: str, above: str) -> Dict[str, List[str]]:
    """The modules of the package ``below`` (front-end modules aside) that import the package ``above``."""
    bad = {m: sorted(d for d in deps if d.split(".")[0] == above)
           for m, deps in g.items() if m.split(".")[0] == below and m not in FRONT_END_MODULES}
    return {m: d for m, d in bad.items() if d}


def test_the_reader_sees_an_import_back_up():
    planted = {"trainers.ppo.trainer": {"runner.controller", "numpy"}, "trainers.learn_r22": {"runner.devices"}}
    assert back_up(planted, "trainers", "runner") == {"trainers.ppo.trainer": ["runner.controller"]}


def test_the_algorithms_never_import_the_run():
    """``trainers`` learns; ``runner`` drives it. A plugin trainer needs nothing of the run."""
    g = graph()
    assert "runner.controller" in g and "runner.build" in g  # the reader finds the package
    assert back_up(g, "trainers", "runner") == {}


def test_the_settings_ground_floor_imports_no_trainer():
    """Every trainer and reward signal declares its keys with ``trainers.settings``; the tree that gathers
    those declarations (``runner.settings``) sits above the trainers, so the floor imports none of them."""
    g = graph()
    assert "runner.settings.run_config" in g and "trainers.settings.schema" in g
    bad = {m: sorted(d for d in deps if d.split(".")[0] in ("trainers", "runner")
                     and not d.startswith("trainers.settings"))
           for m, deps in g.items() if m.startswith("trainers.settings")}
    assert {m: d for m, d in bad.items() if d} == {}


def front_ends_imported(g: Dict[str, Set[str]], package: str) -> Dict[str, List[str]]:
    """The front ends that the modules of ``package`` import."""
    bad = {m: sorted(d for d in deps if d.split(".")[0] in FRONT_ENDS or d in FRONT_END_MODULES)
           for m, deps in g.items() if m.split(".")[0] == package}
    return {m: d for m, d in bad.items() if d}


def test_the_run_never_imports_a_front_end():
    assert front_ends_imported({"runner.saver": {"trainers.learn_r22", "learn", "trainers.buffer"}}, "runner") == {
        "runner.saver": ["learn", "trainers.learn_r22"]}
    assert front_ends_imported(graph(), "runner") == {}


def test_the_front_ends_reach_the_run_through_runner():
    g = graph()
    assert "runner.run" in g["learn"] and "runner.run_paths" in g["learn_r22"]
    assert g["trainers.learn_r22"] == {"sys", "learn_r22"}  # the old path, a door onto the front end only


def test_the_front_ends_stand_side_by_side_over_one_run():
    """learn.py and unityagents-learn each build the run's options and hand them to ``runner.run``;
    neither imports the other (the tuner reads run configs through ``learn_r22``; the old module path
    ``trainers.learn_r22`` is a door onto it)."""
    g = graph()
    for front in ("learn", "learn_r22"):
        assert {"runner.options.RunOptions", "runner.run"} & g[front], front
    others = {m: sorted(d for d in g[m] if d.split(".")[0] in FRONT_ENDS and d.split(".")[0] != m)
              for m in FRONT_ENDS}
    assert {m: d for m, d in others.items() if d} == {}


def test_nothing_imports_a_front_end_but_a_front_end():
    bad = {m: sorted(d for d in deps if d.split(".")[0] in FRONT_ENDS)
           for m, deps in graph().items() if m not in FRONT_END_MODULES and m.split(".")[0] != "unityagents_tune"}
    assert {m: d for m, d in bad.items() if d} == {}


def test_the_front_ends_know_nothing_of_the_unity_side():
    g = graph()
    assert "runner.run" in g["learn"] and "unityagents.vector.restart" in g["learn"]
    bad = {m: sorted(d for d in g[m] if d.split(".")[0] == "academy") for m in FRONT_END_MODULES}
    assert {m: d for m, d in bad.items() if d} == {}


def files_naming(name: str, own: str) -> Set[str]:
    """The modules outside ``own`` (a folder or file, relative) whose string literals include ``name``."""
    found = set()
    for path in modules().values():
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(own):
            continue
        tree = ast.parse(open(path).read(), path)
        if any(isinstance(n, ast.Constant) and n.value == name for n in ast.walk(tree)):
            found.add(rel.replace(os.sep, "/"))
    return found


def test_adding_a_trainer_or_a_reward_signal_touches_what_the_architecture_table_says():
    """docs/architecture.md's "add a ..." rows: a built-in trainer is named in the registry (and, for
    Release 22's own types, in its list of them); a reward signal in the signals' table only."""
    for trainer in ("sac", "poca"):
        assert files_naming(trainer, f"trainers/{trainer}") == {
            "trainers/trainer/registry.py", "runner/settings/run_config.py"}, trainer
    assert files_naming("rnd", "trainers/reward_signals/rnd.py") == {"trainers/reward_signals/__init__.py"}
