"""``init_path`` (Release 22's per-behaviour initialisation): a behaviour starts from another run's
weights with its step counters at 0; a path that names no checkpoint is refused before anything
starts. The behaviour's block is ``default_settings``, so the test holds whatever the scene calls it."""
from __future__ import annotations

import json

import numpy as np
import pytest

import learn_r22
from runner.checkpoints import latest_checkpoint
from runner.settings.run_config import RunConfigError
from tests.conftest import free_port, in_process, write
from trainers.tf_utils import tf
from trainers.trainer.registry import load_registry

CONFIG = """
default_settings:
  trainer_type: ppo
  hyperparameters: {{batch_size: 64, buffer_size: {buffer}}}
  network_settings: {{hidden_units: 16, normalize: false}}
  max_steps: {steps}
  summary_freq: 300
  {init}
"""


def train(tmp_path, run_id, steps, buffer, init=""):
    config = write(tmp_path / f"{run_id}.yaml", CONFIG.format(steps=steps, buffer=buffer, init=init))
    code, out = in_process(learn_r22.main, tmp_path, [config, "--env=3DBall", f"--run-id={run_id}", "--seed=1",
                                                      f"--base-port={free_port()}"], timeout=120)
    assert code == 0, out[-3000:]
    return tmp_path / "results" / run_id, out


def policy_weights(run_dir):
    reader = tf.train.load_checkpoint(latest_checkpoint(str(run_dir / "checkpoints")))
    names = sorted(n for n in reader.get_variable_to_shape_map() if "policy" in n and "Adam" not in n)
    assert names
    return {n: reader.get_tensor(n) for n in names}


def test_a_behavior_starts_from_another_runs_weights_with_its_steps_at_0(tmp_path):
    first, _ = train(tmp_path, "first", steps=1200, buffer=256)  # a few updates: weights far from a fresh start
    # No update in the second run (its buffer never fills): its weights are exactly what it started from.
    second, out = train(tmp_path, "second", steps=300, buffer=100000, init="init_path: results/first")
    newest = latest_checkpoint(str(first / "checkpoints")).rsplit("/", 1)[1]
    assert f"from results/first/checkpoints/{newest}:" in out and "step counters start from 0" in out, out[-2000:]
    before, after = policy_weights(first), policy_weights(second)
    assert before.keys() == after.keys()
    for name in before:
        np.testing.assert_array_equal(after[name], before[name])
    fresh, _ = train(tmp_path, "fresh", steps=300, buffer=100000)
    assert any(not np.array_equal(policy_weights(fresh)[n], before[n]) for n in before)
    status = json.loads((second / "run_logs" / "training_status.json").read_text())
    (behavior,) = [k for k in status if k != "metadata"]
    assert status[behavior]["final_checkpoint"]["steps"] < 1200  # counted from 0, not from the first run's


@pytest.mark.parametrize("path, words", [("results/none", "not a checkpoint, nor a folder holding one"),
                                         ("results/x/Walker/checkpoint.pt", "PyTorch checkpoint")])
def test_a_path_without_a_checkpoint_is_refused_before_anything_starts(tmp_path, path, words):
    options = {flag: None for flag in learn_r22.FLAGS}
    config = write(tmp_path / "run.yaml", f"behaviors:\n  Walker:\n    init_path: {path}\n")
    with pytest.raises(RunConfigError, match=f"behaviors.Walker.init_path: .*{words}"):
        learn_r22.load(config, options, None, load_registry())
