"""``unityagents-learn --num-areas N``: the handshake asks for N training areas, the built-in scene
replicates its area, and the run trains over N times the agents of one process."""
import json

import pytest

import learn_r22
from tests.conftest import free_port, in_process, write

pytestmark = pytest.mark.slow

CONFIG = """
behaviors:
  3DBall:
    trainer_type: ppo
    hyperparameters: {batch_size: 64, buffer_size: 480, num_epoch: 1}
    network_settings: {hidden_units: 16, num_layers: 1}
    max_steps: 2400
    summary_freq: 1200
"""


def test_num_areas_trains_over_the_replicated_areas(tmp_path):
    config = write(tmp_path / "c.yaml", CONFIG)
    code, out = in_process(learn_r22.main, tmp_path, [config, "--env=3DBall", "--run-id=a", "--num-areas=3",
                                                       f"--base-port={free_port()}", "--no-graphics-monitor"])
    assert code == 0, out[-3000:]
    assert "Asked for 3 training areas (num_areas); the environment has 36 agents of 3DBall?team=0." in out
    assert "3DBall?team=0: Step: 2400." in out or "3DBall?team=0: Step: 24" in out, out[-3000:]
    resolved = (tmp_path / "results" / "a" / "configuration.yaml").read_text()
    assert "num_areas: 3" in resolved and "no_graphics_monitor: true" in resolved
    status = json.loads((tmp_path / "results" / "a" / "run_logs" / "training_status.json").read_text())
    assert "3DBall" in status


def test_num_areas_below_one_is_refused(tmp_path):
    config = write(tmp_path / "c.yaml", CONFIG)
    code, out = in_process(learn_r22.main, tmp_path, [config, "--env=3DBall", "--run-id=b", "--num-areas=0"])
    assert code != 0 and "num_areas must be set to a positive number >= 1" in out, out[-2000:]


def test_num_areas_needs_the_modern_protocol(tmp_path):
    config = write(tmp_path / "c.yaml", CONFIG)
    code, out = in_process(learn_r22.main, tmp_path, [config, "--env=3DBall", "--run-id=c", "--num-areas=2",
                                                       "--protocol=api2"])
    assert code == 1 and "--num-areas 2 travels in the modern protocol's handshake" in out, out[-2000:]
