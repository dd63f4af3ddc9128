"""Training over the modern protocol: the trainers, YAML, ghost and curriculum as for API-2.

The runs build ``UnityEnvironment(..., protocol="grpc")`` and a ``TrainerController`` directly in the
test's process (what ``learn.py --protocol grpc`` does), against ``python -m academy --mlagents-port``.
Brain names are behaviour names, ``?team=N`` included.
"""
import os
import re
import textwrap

import pytest

from tests.conftest import free_port, in_process, run_academy

ROOT = __file__.rsplit("/tests/", 1)[0]


def train(tmp_path, scene, config, curriculum=None, timeout=900):
    """Train ``config`` (YAML text) on ``scene`` over gRPC, in this process (``conftest.in_process``)."""
    from runner.controller import TrainerController
    from runner.settings.trainer_config import load_trainer_config
    from trainers.trainer.registry import load_registry
    from unityagents import UnityEnvironment

    (tmp_path / "config.yaml").write_text(textwrap.dedent(config))

    def main(argv):
        settings = load_trainer_config("config.yaml", load_registry())
        env = UnityEnvironment(scene, base_port=free_port(), protocol="grpc", seed=0, log_dir="logs",
                               curriculum=curriculum)
        TrainerController(env, settings, env_name=scene, run_path="grpc", seed=0).start_learning()
        return 0

    return in_process(main, tmp_path, [], timeout=timeout)


def mean_rewards(output, brain):
    return [float(m) for m in re.findall(rf"{re.escape(brain)}: Step: \d+\. Mean Reward: (-?\d+\.\d+)", output)]


@pytest.mark.slow
def test_3dball_learns_over_grpc(tmp_path):
    code, out = train(tmp_path, "3DBall", """
        "3DBall?team=0":
            normalize: true
            buffer_size: 1536
            batch_size: 256
            num_epoch: 10
            time_horizon: 128
            clip_value: false
            max_steps: 4.8e4
            summary_freq: 2400
        """)
    assert code == 0, out[-3000:]
    rewards = mean_rewards(out, "3DBall?team=0")
    assert rewards and rewards[-1] >= 90, rewards
    assert (tmp_path / "models" / "grpc" / "3DBall.bytes").is_file()
    # Deployed as modern Unity runs it: the .onnx's sampled continuous_actions copied into the
    # agents unchanged (the scene clamps to [-1, 1]), 24 episodes of up to 100 each.
    onnx_path = tmp_path / "models" / "grpc" / "3DBall.onnx"
    deployed = run_academy("3DBall", "--brain", f"Ball3DBrain=internal:{onnx_path}", "--episodes", "24")
    assert deployed >= min(rewards[-1], 100.0) - 10.0, (deployed, rewards)


@pytest.mark.slow
def test_tennis_with_its_ghost_over_grpc(tmp_path):
    """The seed's ghost still serves a modern build: one team learns, the other is its ghost."""
    code, out = train(tmp_path, "Tennis", """
        "Tennis?team=0":
            normalize: true
            batch_size: 256
            buffer_size: 1024
            hidden_units: 32
            time_horizon: 64
            max_steps: 6000
            summary_freq: 2000
        "Tennis?team=1":
            is_ghost: true
            brain_to_copy: "Tennis?team=0"
            new_model_freq: 1000
            max_num_models: 3
            summary_freq: 2000
        """)
    assert code == 0, out[-3000:]
    assert len(mean_rewards(out, "Tennis?team=0")) >= 2, out[-3000:]
    assert (tmp_path / "models" / "grpc" / "Tennis.bytes").is_file()
    assert "Traceback" not in (tmp_path / "logs" / "Tennis-worker0.log").read_text()


def test_curriculum_lessons_reach_the_scene_through_environment_parameters(tmp_path):
    from unityagents import UnityEnvironment

    env = UnityEnvironment("Push", base_port=free_port(), protocol="grpc", seed=0, log_dir=str(tmp_path),
                           curriculum=os.path.join(ROOT, "curricula", "push.json"))
    try:
        env.curriculum.set_lesson_number(2)
        env.reset()
        env.reset(lesson=4)
        log = open(env.logfile_path).read()
    finally:
        env.close()
    assert "reset with environment parameters {'goal_size': 2.0, 'block_size': 1.25, 'x_variation': 2.0}" in log
    assert "reset with environment parameters {'goal_size': 1.0, 'block_size': 1.0, 'x_variation': 2.5}" in log


@pytest.mark.slow
def test_gridworld_trains_with_its_wall_masks_over_grpc(tmp_path):
    """A short run: PPO acts with the masks the scene sends and updates with them (two updates).

    The scene logs the first mask that disables a move, and every action that a mask disabled.
    """
    code, out = train(tmp_path, "GridWorld", """
        "GridWorld?team=0":
            batch_size: 32
            buffer_size: 128
            hidden_units: 16
            num_layers: 1
            time_horizon: 16
            max_steps: 300
            summary_freq: 100
        """, timeout=600)
    assert code == 0, out[-3000:]
    assert len(mean_rewards(out, "GridWorld?team=0")) >= 1, out[-3000:]
    assert (tmp_path / "models" / "grpc" / "GridWorld.bytes").is_file()
    log = (tmp_path / "logs" / "GridWorld-worker0.log").read_text()
    assert "GridWorld: the first wall mask went out" in log, log[-3000:]  # masks did disable moves
    assert "took the masked action" not in log, log[-3000:]  # and PPO never sent one of those moves
