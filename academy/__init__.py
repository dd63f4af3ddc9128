"""The Unity side of API-2 in Python: a stand-in for a Unity build of the ML-Agents #166 era.

``python -m academy <Scene> --port N`` connects to a trainer exactly as a Unity binary launched with
``--port N`` would, and speaks the same bytes (``communicator.py``). Without ``--port`` it runs the
scene stand-alone with its scripted heuristics (or an exported graph, ``--brain NAME=internal:PATH``)
and prints the mean episode reward per brain.

Modules: ``scene.py`` (the scene contract: spaces, sensors, ``BrainSpec``, ``Scene``), ``brain.py``
(how each brain is run, its agents' arrays), ``checks.py`` (what the trainer sends, checked before
it is stored), ``academy.py`` (the Academy loop), ``communicator.py`` (the API-2 wire),
``grpc_communicator.py`` (the modern protocol), ``demo_recorder.py`` (``.demo`` files),
``internal.py`` (the Internal brain, the only TensorFlow and onnxruntime user), ``envs/`` (the scenes).
Importing this package is cheap: no numpy, Pillow or TensorFlow until a scene is loaded.

Adding a scene (see ``academy.scene.Scene``; ``envs/basic.py`` is the smallest example):

1. subclass ``Scene`` in ``academy/envs/<name>.py``; set ``academy_name``, ``brains`` (a tuple of
   ``BrainSpec``: name, n_agents, spaces, sizes, cameras, ``max_step``, default ``brain_type``),
   ``default_reset_parameters`` (name → float), and optionally ``max_steps`` / ``frame_to_skip``;
2. implement, over numpy arrays indexed by each brain's agent rows: ``reset_agents(brain, index)``,
   ``step(actions) -> {brain: (reward, done)}`` (one frame), ``states(brain)``,
   ``render(brain, camera)`` if it has cameras, and ``heuristic(brain)`` (a scripted policy that
   scores near the benchmark; it may read hidden state); ``academy_reset()`` when reset parameters
   shape the scene; draw every random number from ``self.rng``;
3. register it in ``_REGISTRY`` below, and add its conformance and heuristic tests to
   ``tests/academy/test_academy_scenes.py``.
"""
from __future__ import annotations

import importlib

_REGISTRY = {
    "3DBall": "academy.envs.ball3d:Ball3D",
    "3DBallHard": "academy.envs.ball3d:Ball3DHard",
    "3DBallIL": "academy.envs.ball3d:Ball3DIL",
    "Basic": "academy.envs.basic:Basic",
    "GridWorld": "academy.envs.gridworld:GridWorld",
    "Hallway": "academy.envs.hallway:Hallway",
    "Interact": "academy.envs.interact:Interact",
    "Tennis": "academy.envs.tennis:Tennis",
    "Push": "academy.envs.push:Push",
    "Pyramids": "academy.envs.pyramids:Pyramids",
    "PushCollab": "academy.envs.push_collab:PushCollab",
    "Soccer": "academy.envs.soccer:Soccer",
    "Sorter": "academy.envs.sorter:Sorter",
    "SorterFlat": "academy.envs.sorter:SorterFlat",
}

#: Names of the built-in scenes, for clients that list them without loading any of them.
SCENES: tuple[str, ...] = tuple(_REGISTRY)

#: The behaviour names of Unity's example project, which the scenes' brains carry over the modern
#: protocol (``<name>?team=N``), so that ML-Agents' own run configs name them; API-2 keeps the brain
#: names of the 2018 scenes. A brain not listed keeps its name (Unity has no such example).
UNITY_NAMES: dict[str, str] = {
    "Ball3DBrain": "3DBall",
    "Ball3DHardBrain": "3DBallHard",
    "BasicBrain": "Basic",
    "GridWorldBrain": "GridWorld",
    "HallwayBrain": "Hallway",
    "PushBrain": "PushBlock",
    "PushCollabBrain": "PushBlockCollab",
    "PyramidsBrain": "Pyramids",
    "SorterBrain": "Sorter",
    "Soccer": "SoccerTwos",
}

#: Unity's scene names that differ from ours, accepted wherever a scene is named (``--env=SoccerTwos``).
SCENE_ALIASES: dict[str, str] = {"PushBlock": "Push", "PushBlockCollab": "PushCollab", "SoccerTwos": "Soccer"}


def load_scene(name: str) -> type:
    """The ``Scene`` subclass registered as ``name``; ValueError listing the scenes if unknown."""
    try:
        target = _REGISTRY[SCENE_ALIASES.get(name, name)]
    except KeyError:
        raise ValueError(f"unknown scene {name!r}; the built-in scenes are: {', '.join(SCENES)}") from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


__all__ = ["SCENES", "SCENE_ALIASES", "UNITY_NAMES", "load_scene"]
