"""``bench/zoo_sb3.py``'s in-process scene is the scene ``UnityToGymWrapper`` shows over the socket.

The zoo sets SB3 in-process beside SB3 through the wrapper to price the socket and the second process;
that comparison means something only if both environments give the same episodes for the same actions.
"""
import os
import socket
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from zoo_sb3 import InProcessScene, ppo_arguments  # noqa: E402

from unityagents.envs.unity_gym_env import UnityToGymWrapper  # noqa: E402
from unityagents.registry import default_registry  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("scene", ["Basic", "GridWorld"])
def test_the_in_process_scene_gives_the_wrappers_episodes(scene):
    inproc = InProcessScene(scene, seed=3)
    wrapped = UnityToGymWrapper(default_registry[scene].make(base_port=free_port(), seed=3), uint8_visual=True)
    try:
        assert inproc.action_space == wrapped.action_space
        a, _ = inproc.reset()
        b, _ = wrapped.reset()
        rng = np.random.default_rng(0)
        ends = 0
        for step in range(120):
            action = int(rng.integers(inproc.action_space.n))
            a, ra, ta, ua, _ = inproc.step(action)
            b, rb, tb, ub, _ = wrapped.step(action)
            # The camera arrives channels first over the low-level API; the in-process scene keeps Unity's HWC.
            assert np.array_equal(a, np.moveaxis(b, 0, -1) if a.ndim == 3 and a.shape != b.shape else b), step
            assert ra == pytest.approx(rb, abs=1e-6) and (ta, ua) == (tb, ub), step
            if ta or ua:
                ends += 1
                a, _ = inproc.reset()
                b, _ = wrapped.reset()
        assert ends >= 1  # the comparison crossed an episode's end
    finally:
        wrapped.close()


def test_sb3_gets_the_scenes_release_22_settings():
    from zoo import ZOO

    block = ZOO["ppo/GridWorld"][3]
    hyper, network = block["hyperparameters"], block["network_settings"]
    kwargs = ppo_arguments(block, camera=True)
    assert kwargs["policy"] == "CnnPolicy"
    assert (kwargs["n_steps"], kwargs["batch_size"], kwargs["n_epochs"], kwargs["ent_coef"], kwargs["gae_lambda"]) == (
        hyper["buffer_size"], hyper["batch_size"], hyper["num_epoch"], hyper["beta"], hyper["lambd"])
    assert kwargs["gamma"] == block["reward_signals"]["extrinsic"]["gamma"]
    assert kwargs["policy_kwargs"]["net_arch"] == [network["hidden_units"]] * network["num_layers"]
    assert hyper["learning_rate_schedule"] == "linear"
    assert kwargs["learning_rate"](0.5) == pytest.approx(hyper["learning_rate"] / 2)  # SB3 passes what is left
