"""Over gRPC the built-in scenes' behaviours carry the names of Unity's example project, and
``num_areas`` in the handshake replicates their training area; API-2 keeps the 2018 brain names.
"""
import numpy as np
import pytest

from academy import SCENE_ALIASES, UNITY_NAMES, load_scene
from academy.envs.replicated import ReplicatedScene
from tests.conftest import free_port
from unityagents import UnityEnvironment
from unityagents.brain import former_names

#: Unity's example behaviour name of each built-in scene that has one (over gRPC, team 0).
UNITY_BEHAVIOURS = {
    "3DBall": ["3DBall?team=0"],
    "3DBallHard": ["3DBallHard?team=0"],
    "Basic": ["Basic?team=0"],
    "GridWorld": ["GridWorld?team=0"],
    "Hallway": ["Hallway?team=0"],
    "Push": ["PushBlock?team=0"],
    "PushCollab": ["PushBlockCollab?team=0"],
    "Pyramids": ["Pyramids?team=0"],
    "Sorter": ["Sorter?team=0"],
    "Soccer": ["SoccerTwos?team=0", "SoccerTwos?team=1"],
    "Tennis": ["Tennis?team=0", "Tennis?team=1"],
}


def open_env(scene, tmp_path, protocol="grpc", **kwargs):
    return UnityEnvironment(scene, base_port=free_port(), protocol=protocol, log_dir=str(tmp_path), **kwargs)


@pytest.mark.parametrize("scene", ["3DBall", "Basic", "Soccer"])
def test_grpc_carries_unitys_names_and_api2_the_brain_names(scene, tmp_path):
    with open_env(scene, tmp_path) as env:
        assert sorted(env.external_brain_names) == UNITY_BEHAVIOURS[scene]
    with open_env(scene, tmp_path, protocol="api2") as env:
        assert sorted(env.external_brain_names) == sorted(b.name for b in load_scene(scene).brains
                                                          if b.brain_type == "external")


def test_every_scene_with_a_unity_example_is_named_after_it():
    for scene, names in UNITY_BEHAVIOURS.items():
        cls = load_scene(scene)
        declared = getattr(cls, "behavior_names", {})
        got = sorted(declared.get(b.name, f"{UNITY_NAMES.get(b.name, b.name)}?team=0") for b in cls.brains
                     if b.brain_type == "external")
        assert got == names, scene
    assert former_names("3DBall") == ["Ball3DBrain"] and former_names("SoccerTwos") == ["Soccer"]
    assert former_names("Tennis") == []


def test_unitys_scene_names_are_accepted_as_aliases(tmp_path):
    assert {load_scene(alias) for alias in SCENE_ALIASES} == {load_scene(s) for s in SCENE_ALIASES.values()}
    with open_env("PushBlock", tmp_path) as env:
        assert env.external_brain_names == ["PushBlock?team=0"]


def test_num_areas_replicates_the_training_area(tmp_path):
    with open_env("3DBall", tmp_path, num_areas=3) as env:
        decisions, _ = env.reset_behaviors()["3DBall?team=0"]
        assert len(decisions) == 36 and len(set(decisions.agent_id.tolist())) == 36
        for _ in range(3):
            steps = env.step_behaviors({"3DBall?team=0": env.behavior_specs["3DBall?team=0"].action_spec
                                        .random_action(len(decisions))})
            decisions, _ = steps["3DBall?team=0"]
        # the copies are seeded apart: their platforms do not move in lock step
        obs = decisions.obs[0]
        assert not np.allclose(obs[:12], obs[12:24])


def test_replicated_groups_stay_apart():
    scene = ReplicatedScene(load_scene("PushCollab"), 0, 2)
    name = scene.brains[0].name
    ids = scene.group_ids(name)
    n = scene.base.brains[0].n_agents
    assert len(ids) == 2 * n and set(ids[:n].tolist()).isdisjoint(ids[n:].tolist())
