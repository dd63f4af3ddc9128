"""PettingZoo bridge (``unityagents/bridges/pettingzoo.py``) over the socket, against the built-in scenes."""
from __future__ import annotations

import warnings
from typing import List

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test

from tests.unityagents.bridges.test_gym import assert_in_space, open_env
from unityagents.bridges.pettingzoo import UnityParallelEnv, unity_aec_env
from unityagents.exception import UnityEnvironmentException

AGENTS = {"3DBall": 12, "Basic": 1, "Tennis": 16}


def complaints(env, api_test_function, cycles: int) -> List[str]:
    """Run one of PettingZoo's API tests on ``env`` for ``cycles`` cycles, then close it; the
    warnings PettingZoo gave (a live agent given no reward, ...)."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            api_test_function(env, num_cycles=cycles)
    finally:
        env.close()
    return [str(w.message) for w in caught if "pettingzoo" in w.filename]


@pytest.mark.parametrize("scene", sorted(AGENTS))
def test_parallel_api_test_passes_over_the_socket(scene):
    """PettingZoo's own test, with its warnings counted as failures."""
    env = UnityParallelEnv(open_env(scene))
    given = complaints(env, parallel_api_test, 1000)
    assert not given, given
    assert len(env.possible_agents) == AGENTS[scene]


@pytest.mark.parametrize("scene", sorted(AGENTS))
def test_reset_and_200_random_steps(scene):
    env = UnityParallelEnv(open_env(scene))
    try:
        obs, infos = env.reset(seed=0)
        assert set(obs) == set(infos) == set(env.agents) == set(env.possible_agents)
        finished = 0
        for _ in range(200):
            if not env.agents:
                obs, _ = env.reset()
            live = list(env.agents)
            for agent in live:
                assert_in_space(obs[agent], env.observation_space(agent))
            actions = {agent: env.action_space(agent).sample() for agent in live}
            obs, rewards, terminations, truncations, infos = env.step(actions)
            assert set(obs) == set(rewards) == set(terminations) == set(truncations) == set(live)
            assert all(type(r) is float for r in rewards.values())
            ended = {a for a in live if terminations[a] or truncations[a]}
            finished += len(ended)
            assert set(env.agents) == set(live) - ended
        assert finished > 0
    finally:
        env.close()


def test_tennis_agents_are_both_rackets_of_every_court():
    env = UnityParallelEnv(open_env("Tennis"))
    try:
        env.reset()
        assert env.possible_agents == [f"TennisBrain_{k}" for k in range(8)] + [
            f"ghost-TennisBrain_{k}" for k in range(8)]
        assert env.action_space("ghost-TennisBrain_3").shape == (2,)
        # an agent that has ended stays out until reset()
        for _ in range(500):
            _, _, terminations, truncations, _ = env.step({a: env.action_space(a).sample() for a in env.agents})
            gone = [a for a in terminations if terminations[a] or truncations[a]]
            if gone:
                break
        assert gone, "some racket should miss the ball within 500 random steps"
        with pytest.raises(UnityEnvironmentException, match="not live"):
            env.step({gone[0]: np.zeros(2, np.float32)})
    finally:
        env.close()


def test_max_cycles_truncates_every_live_agent():
    env = UnityParallelEnv(open_env("3DBall"), max_cycles=3)
    try:
        env.reset()
        for _ in range(2):
            _, _, _, truncations, _ = env.step({a: np.zeros(2, np.float32) for a in env.agents})
            assert not any(truncations.values())
        _, _, terminations, truncations, _ = env.step({a: np.zeros(2, np.float32) for a in env.agents})
        assert all(truncations[a] or terminations[a] for a in truncations) and env.agents == []
    finally:
        env.close()


# PettingZoo's recommendations that these environments do not follow, by design: agent names keep the
# brain's name ("TennisBrain_0", not lower case), vector states are unbounded Boxes, and a discrete
# state (Basic) is an integer scalar, as gymnasium's Discrete space holds it.
AEC_ADVICE = ("We recommend agents to be named", "is -infinity", "is infinity", "Observation is not a NumPy array")


@pytest.mark.parametrize("scene", sorted(AGENTS))
def test_aec_api_test_passes_over_the_socket(scene):
    """PettingZoo's AEC ``api_test``, every other warning of it counted as a failure."""
    env = unity_aec_env(open_env(scene))
    given = complaints(env, api_test, 200)
    assert not [c for c in given if not any(advice in c for advice in AEC_ADVICE)], given
    assert len(env.possible_agents) == AGENTS[scene]


def test_aec_steps_the_scene_once_every_live_agent_has_acted():
    """Tennis' 16 rackets act in turn; the scene advances only after the last of them, and the
    rewards then reach every agent (the AEC cycle is one Unity step)."""
    env = unity_aec_env(open_env("Tennis"))
    try:
        env.reset(seed=0)
        steps = []
        unity = env.unwrapped.env
        original = unity.step_behaviors
        unity.step_behaviors = lambda *a, **k: steps.append(1) or original(*a, **k)
        for k, agent in enumerate(env.agent_iter(max_iter=32)):
            assert len(steps) == k // 16, (agent, k, len(steps))
            _, _, terminated, truncated, _ = env.last()
            env.step(None if terminated or truncated else env.action_space(agent).sample())
        assert len(steps) == 2
    finally:
        env.close()
