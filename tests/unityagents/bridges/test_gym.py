"""Gymnasium bridges (``unityagents/bridges/gym.py``) over the socket, against the built-in scenes."""
from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from tests.conftest import free_port
from unityagents import UnityEnvironment
from unityagents.base_env import ActionTuple
from unityagents.bridges.gym import UnityToGymWrapper, UnityVectorEnv
from unityagents.exception import UnityEnvironmentException


def open_env(scene: str, seed: int = 0) -> UnityEnvironment:
    return UnityEnvironment(scene, base_port=free_port(), seed=seed)


def assert_in_space(value, space: gymnasium.Space) -> None:
    """``value`` belongs to ``space`` with the exact dtype and shape the space declares."""
    assert space.contains(value), (value, space)
    parts = [(value, space)] if not isinstance(space, gymnasium.spaces.Dict) else [
        (value[k], s) for k, s in space.spaces.items()]
    for v, s in parts:
        assert np.asarray(v).dtype == s.dtype and np.shape(v) == s.shape, (np.asarray(v).dtype, np.shape(v), s)


@pytest.mark.parametrize("scene", ["Basic", "GridWorld"])
def test_check_env_passes_over_the_socket(scene):
    """gymnasium's own checker, with its soft complaints (warnings) counted as failures. The close check
    re-makes the env from the registry, which a wrapper of an open environment cannot be (see
    unityagents/bridges/gym.py)."""
    with UnityToGymWrapper(open_env(scene)) as env, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True, skip_close_check=True)
    assert not [str(w.message) for w in caught if "gymnasium" in w.filename or "Gym" in str(w.message)]


@pytest.mark.parametrize("scene, spaces", [
    ("Basic", (gymnasium.spaces.Discrete(20), gymnasium.spaces.Discrete(2))),
    ("GridWorld", (gymnasium.spaces.Box(0, 255, (84, 84, 3), np.uint8), gymnasium.spaces.Discrete(4))),
])
def test_single_agent_reset_and_200_random_steps(scene, spaces):
    with UnityToGymWrapper(open_env(scene)) as env:
        assert (env.observation_space, env.action_space) == spaces
        env.action_space.seed(0)
        obs, info = env.reset(seed=0)
        assert_in_space(obs, env.observation_space)
        assert info == {}
        episodes = 0
        for _ in range(200):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert_in_space(obs, env.observation_space)
            assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
            if terminated or truncated:
                episodes += 1
                with pytest.raises(UnityEnvironmentException, match="call reset"):
                    env.step(env.action_space.sample())
                first, _ = env.reset()
                # API-2: the done message already holds the next episode's first observation
                assert np.array_equal(first, obs)
        if scene == "Basic":
            assert episodes >= 1  # random moves reach a goal or the 100-step limit within 200 steps


def test_single_agent_wrapper_refuses_a_brain_of_many_agents():
    with UnityToGymWrapper(open_env("3DBall")) as env:
        with pytest.raises(UnityEnvironmentException, match="has 12.*UnityVectorEnv"):
            env.reset()


def test_brain_is_the_only_external_one_or_named():
    env = open_env("Tennis")
    try:
        with pytest.raises(UnityEnvironmentException, match=r"2 External brains.*brain_name"):
            UnityVectorEnv(env, close_env=False)
        with pytest.raises(UnityEnvironmentException, match="not an External brain.*TennisBrain"):
            UnityVectorEnv(env, "NoSuchBrain", close_env=False)
        vec = UnityVectorEnv(env, "ghost-TennisBrain", close_env=False)
        assert vec.num_envs == 8 and vec.brain_name == "ghost-TennisBrain"
        vec.reset()
        with pytest.raises(UnityEnvironmentException, match=r"expected actions for 8 agent\(s\)"):
            vec.step(np.zeros((7, 2)))
    finally:
        env.close()


@pytest.mark.parametrize("scene, brain, n", [("3DBall", None, 12), ("Tennis", "TennisBrain", 8), ("Basic", None, 1)])
def test_vector_env_reset_and_200_random_steps(scene, brain, n):
    with UnityVectorEnv(open_env(scene), brain) as vec:
        assert vec.num_envs == n
        assert vec.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.SAME_STEP
        obs, _ = vec.reset(seed=0)
        assert_in_space(obs, vec.observation_space)
        dones = 0
        for _ in range(200):
            obs, rewards, terminations, truncations, infos = vec.step(vec.action_space.sample())
            assert_in_space(obs, vec.observation_space)
            assert rewards.shape == (n,) and rewards.dtype == np.float64
            assert terminations.dtype == truncations.dtype == np.bool_ and terminations.shape == (n,)
            assert not truncations.any()  # API-2 reports every done as the task's end
            done = terminations | truncations
            dones += int(done.sum())
            if done.any():
                np.testing.assert_array_equal(infos["_final_info"], done)
                assert "final_obs" not in infos  # API-2 sends no terminal observation
            else:
                assert infos == {}
        if scene == "3DBall":
            assert dones > 0


def test_vector_env_is_a_faithful_view_of_the_environment():
    """Side by side with a raw UnityEnvironment of the same seed and the same actions: the same
    states, rewards and dones, row for row (so a done row's observation is what Unity sent)."""
    raw = open_env("3DBall", seed=3)
    rng = np.random.default_rng(0)
    try:
        with UnityVectorEnv(open_env("3DBall", seed=3)) as vec:
            obs, _ = vec.reset()
            decisions, _ = raw.reset_behaviors()["Ball3DBrain"]
            np.testing.assert_array_equal(obs, decisions.obs[0])
            saw_done = False
            for _ in range(60):
                action = rng.uniform(-1, 1, (12, 2)).astype(np.float32)
                obs, rewards, terminations, _, _ = vec.step(action)
                decisions, terminals = raw.step_behaviors(ActionTuple(action))["Ball3DBrain"]
                np.testing.assert_array_equal(obs, decisions.obs[0])
                done = np.isin(decisions.agent_id, terminals.agent_id)
                rewards_sent = decisions.reward.copy()
                rewards_sent[done] += terminals.reward  # API-2: a done agent's reward is its terminal step's
                np.testing.assert_array_equal(rewards, rewards_sent)
                np.testing.assert_array_equal(terminations, done)
                saw_done |= bool(terminations.any())
            assert saw_done
    finally:
        raw.close()


def test_vector_env_passes_terminal_observations_over_the_modern_protocol():
    """gRPC sends each ended episode's last observation: it arrives as gymnasium's ``final_obs``
    (SAME_STEP autoreset) for exactly the done sub-environments, while ``obs`` starts the next episode."""
    env = UnityEnvironment("3DBall", base_port=free_port(), seed=0, protocol="grpc")
    with UnityVectorEnv(env) as vec:
        vec.reset(seed=0)
        vec.action_space.seed(0)
        finals = 0
        for _ in range(200):
            obs, _, terminations, truncations, infos = vec.step(vec.action_space.sample())
            done = terminations | truncations
            if not done.any():
                continue
            np.testing.assert_array_equal(infos["_final_obs"], done)
            for i in np.flatnonzero(done):
                assert_in_space(infos["final_obs"][i], vec.single_observation_space)
                assert not np.array_equal(infos["final_obs"][i], obs[i])  # the old episode's end, not the new start
                finals += 1
        assert finals > 0


def test_registered_env_passes_check_env_with_its_default_arguments():
    """``gymnasium.make`` through the registry: the spec re-makes the scene (a second one on a free
    port), so gymnasium's checker runs its close check too; its warnings count as failures."""
    env = gymnasium.make("unityagents.bridges.gym:unityagents/Unity-v0", env_path="Basic", seed=0)
    try:
        assert env.spec.id == "unityagents/Unity-v0" and env.spec.kwargs["env_path"] == "Basic"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
        assert not [str(w.message) for w in caught if "gymnasium" in w.filename or "Gym" in str(w.message)]
        assert env.unwrapped.brain_name == "BasicBrain" and env.action_space == gymnasium.spaces.Discrete(2)
        check_env(env)  # as made (its only complaint: it is wrapped, by gymnasium.make's own checkers)
    finally:
        env.close()
