"""``UnityEnvironment(..., protocol="grpc")`` against ``python -m academy <Scene> --mlagents-port``.

Shapes and types of the built-in scenes over the modern protocol, the camera layouts of C# 2.x and
3.x decoding to the same pixels, determinism per seed, decision periods, action masks, and the
side channels (engine configuration, environment parameters, stats).
"""

import numpy as np
import pytest

from tests.conftest import free_port
from tests.step_view import InfoView
from unityagents import UnityEnvironment
from unityagents.wire.side_channels import EngineConfig


def open_env(scene, tmp_path, seed=0, **kwargs):
    return InfoView(UnityEnvironment(scene, base_port=free_port(), protocol="grpc", seed=seed, log_dir=str(tmp_path),
                                     **kwargs))


def random_actions(env, info, rng):
    out = {}
    for name, i in info.items():
        p = env.brains[name]
        n = len(i.agents)
        out[name] = (rng.uniform(-1, 1, (n, p.action_width)) if p.action_space_type == "continuous"
                     else rng.integers(0, p.action_branches[0], (n, 1)))
    return out


def test_3dball_basic_gridworld_shapes(tmp_path):
    expected = {
        "3DBall": ("3DBall?team=0", 12, (12, 8), [], "continuous", []),
        "Basic": ("Basic?team=0", 1, (1, 20), [], "discrete", [2]),
        "GridWorld": ("GridWorld?team=0", 1, (1, 2), [(1, 84, 84, 3)], "discrete", [4]),  # goal + camera
    }
    for scene, (name, n, state, cameras, kind, branches) in expected.items():
        env = open_env(scene, tmp_path)
        try:
            assert env.external_brain_names == [name]
            p = env.brains[name]
            assert (p.action_space_type, p.action_branches) == (kind, branches)
            info = env.reset()[name]
            assert len(info.agents) == n and info.states.shape == state and info.states.dtype == np.float32
            assert [o.shape for o in info.observations] == cameras
            for o in info.observations:
                assert o.dtype == np.float32 and 0.0 <= o.min() and o.max() <= 1.0 and o.max() > 0.0
            if branches:
                assert info.action_masks.shape == (n, sum(branches))
            else:
                assert info.action_masks is None
            if scene == "Basic":  # the API-2 discrete state arrives as a one-hot vector
                assert info.states.tolist() == [[1.0 if k == 10 else 0.0 for k in range(20)]]
            if scene == "GridWorld":  # its goal signal (a constant GreenPlus) sorts before its camera
                assert info.states.tolist() == [[1.0, 0.0]]
                assert [(s.name, s.shape, s.camera, s.observation_type) for s in p.sensors] == [
                    ("GoalSensor", (2,), -1, 1), ("RenderTextureSensor", (3, 84, 84), 0, 0)]
            info = env.step(random_actions(env, {name: info}, np.random.default_rng(0)))[name]
            assert len(info.agents) == n
        finally:
            env.close()


def test_camera_layouts_of_2x_and_3x_builds_decode_to_the_same_pixels(tmp_path):
    new, old = open_env("GridWorld", tmp_path / "a", seed=5), \
        open_env("GridWorld", tmp_path / "b", seed=5, env_args=["--package-version", "2.3.0"])
    try:
        a, b = new.reset()["GridWorld?team=0"], old.reset()["GridWorld?team=0"]
        assert a.observations[0].shape == b.observations[0].shape == (1, 84, 84, 3)
        np.testing.assert_array_equal(a.observations[0], b.observations[0])
        assert new._communicator.channels_last and not old._communicator.channels_last
    finally:
        new.close()
        old.close()


def run(env, steps, seed):
    rng = np.random.default_rng(seed)
    info = env.reset()
    trace = []
    for _ in range(steps):
        info = env.step(random_actions(env, info, rng))
        i = info["3DBall?team=0"]
        trace.append((list(i.agents), i.states.copy(), list(i.rewards), list(i.local_done)))
    return trace


def test_determinism_per_seed(tmp_path):
    traces = []
    for seed in (3, 3, 4):
        env = open_env("3DBall", tmp_path, seed=seed)
        try:
            traces.append(run(env, 40, seed=1))
        finally:
            env.close()
    same = all(x[0] == y[0] and np.array_equal(x[1], y[1]) and x[2] == y[2] for x, y in zip(traces[0], traces[1]))
    assert same, "the same seed must give the same trajectory"
    assert not np.array_equal(traces[0][0][1], traces[2][0][1]), "another seed must give another start"


def test_decision_period_accumulates_rewards_between_decisions(tmp_path):
    env = open_env("3DBall", tmp_path, env_args=["--decision-period", "5"])
    try:
        env.reset()
        info = env.step(np.zeros((12, 2)))["3DBall?team=0"]
        assert info.rewards == pytest.approx([0.5] * 12), "five steps of +0.1 between two decisions"
    finally:
        env.close()


def test_side_channels_engine_parameters_stats(tmp_path):
    env = open_env("GridWorld", tmp_path, seed=2, engine_config=EngineConfig(width=84, height=84, time_scale=5.0))
    try:
        default = env.reset()["GridWorld?team=0"].observations[0]
        small = env.reset(config={"gridSize": 3})["GridWorld?team=0"].observations[0]
        assert not np.array_equal(default, small), "a 3x3 grid must look different from the 5x5 default"
        seen = {}
        rng = np.random.default_rng(0)
        info = env.reset(config={"gridSize": 3})
        for _ in range(400):
            info = env.step(random_actions(env, info, rng))
            for key, values in env.stats.items():
                seen.setdefault(key, []).extend(values)
            masks = info["GridWorld?team=0"].action_masks
            assert set(np.unique(masks)) <= {0.0, 1.0}
            if seen:
                break
        assert list(seen) == ["Academy/GridWorldBrain Episode Reward"]
        assert seen["Academy/GridWorldBrain Episode Reward"][0][1] == "average"
        log = open(env.logfile_path).read()
    finally:
        env.close()
    assert "resolution (84, 84) accepted" in log and "time scale (5.0,) accepted" in log
    assert "reset with environment parameters {'gridSize': 3.0}" in log


def test_gridworld_masks_the_walls(tmp_path):
    env = open_env("GridWorld", tmp_path, seed=1)
    try:
        info = env.reset()["GridWorld?team=0"]
        masked_up = False
        for _ in range(6):  # walk up: once at the top wall, "up" (action 0) is masked
            info = env.step([[0]])["GridWorld?team=0"]
            if info.local_done[0]:
                break
            masked_up = masked_up or info.action_masks[0, 0] == 0.0
        assert masked_up or info.local_done[0]
        assert info.action_masks.shape == (1, 4)
    finally:
        env.close()


@pytest.mark.parametrize("user_setting, expected", [(None, "-event_engine_client None"), ("x", "x x")])
def test_the_scene_imports_grpc_with_calling_thread_io_and_leaves_the_environment_as_it_was(user_setting, expected):
    from tests.conftest import grpc_experiments_at_import

    assert grpc_experiments_at_import("academy.grpc_communicator", user_setting) == expected
