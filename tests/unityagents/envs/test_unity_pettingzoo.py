"""mlagents_envs' PettingZoo wrappers here: PettingZoo's own API tests on built-in multi-agent scenes,
and the episode rules on a user's own ``BaseEnv``."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test

from tests.unityagents.envs.test_unity_gym_env import Scripted, free_port
from unityagents.base_env import ActionSpec
from unityagents.envs.unity_aec_env import UnityAECEnv
from unityagents.envs.unity_parallel_env import UnityParallelEnv
from unityagents.registry import default_registry


@pytest.fixture(scope="module")
def scenes():
    """One running built-in scene per name, shared by this module's tests (starting one costs seconds)."""
    started = {}

    def get(name):
        if name not in started:
            started[name] = default_registry[name].make(base_port=free_port(), seed=0)
        return started[name]

    yield get
    for env in started.values():
        env.close()


@pytest.mark.parametrize("scene", ["Tennis", "SoccerTwos"])  # continuous, two teams; discrete with masks and groups
def test_pettingzoo_s_own_api_tests_pass(scene, scenes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PettingZoo's advice on agent names and infinite bounds
        parallel_api_test(UnityParallelEnv(scenes(scene), seed=0), num_cycles=40)
        api_test(UnityAECEnv(scenes(scene), seed=0), num_cycles=60)


def test_agents_spaces_and_masks_are_named_as_mlagents_envs_names_them(scenes):
    env = UnityParallelEnv(scenes("SoccerTwos"), seed=3)
    obs, infos = env.reset()
    agent = "SoccerTwos?team=1?agent_id=" + env.agents[-1].rpartition("=")[2]
    assert agent in env.agents and set(env.agents) == set(obs) == set(infos)
    assert {a.split("?agent_id=")[0] for a in env.agents} == {"SoccerTwos?team=0", "SoccerTwos?team=1"}
    team1 = [a for a in env.agents if a.startswith("SoccerTwos?team=1?")]
    assert env.action_space(team1[0]) is env.action_space(team1[1])  # one object per behaviour
    assert str(env.action_space(agent)) == "Discrete(3)"
    assert env.observation_space(agent).shape == (6,) and env.observation_space(agent).contains(obs[agent])
    info = infos[agent]
    assert info["behavior_name"] == "SoccerTwos?team=1" and info["group_id"] != 0
    assert info["action_mask"].dtype == np.int8 and info["action_mask"].tolist() == [1, 1, 1]
    with pytest.raises(KeyError, match="agent_id"):
        env.action_space("nobody")


def test_an_agent_that_ends_stays_out_until_reset():
    mock = Scripted([(4,)], ActionSpec.create_continuous(2), behaviors=("A", "B"), agents=2, length=2,
                    interrupted=True)
    env = UnityParallelEnv(mock, seed=0)
    env.reset()
    assert env.agents == ["A?agent_id=0", "A?agent_id=1", "B?agent_id=0", "B?agent_id=1"]
    _, rewards, terminations, truncations, _ = env.step({"A?agent_id=1": np.array([0.5, -0.5], np.float32)})
    assert mock.sent[0][0] == "A" and mock.sent[0][1].tolist() == [[0.0, 0.0], [0.5, -0.5]]  # zeros for the silent
    assert set(rewards.values()) == {np.float32(0.1)}
    assert not any(terminations.values()) and not any(truncations.values())
    _, rewards, terminations, truncations, infos = env.step({})
    assert all(truncations.values()) and not any(terminations.values())  # interrupted: truncated
    assert infos["B?agent_id=0"]["interrupted"] is True and set(rewards.values()) == {1.0}
    assert env.agents == []
    from gymnasium import error

    with pytest.raises(error.Error, match="reset"):
        env.step({})
    env.reset()
    assert len(env.agents) == 4
    with pytest.raises(error.Error, match="Invalid action"):
        env.step({"A?agent_id=0": np.array([3.0, 0.0], np.float32)})
    env.close()
    assert mock.closed


def test_the_bridges_door_hands_out_mlagents_envs_wrappers():
    from unityagents.bridges.pettingzoo import UnityAECEnv as BridgeAEC
    from unityagents.bridges.pettingzoo import UnityParallelEnv as BridgeParallel

    mock = Scripted([(4,)], ActionSpec.create_continuous(2))
    assert isinstance(BridgeParallel(mock, seed=0), UnityParallelEnv)  # any BaseEnv: mlagents_envs' wrapper
    assert BridgeAEC is UnityAECEnv
