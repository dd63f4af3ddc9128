"""Self-play wraps any learner that acts from a snapshot (``trainers.trainer.snapshot_actor``): SAC learns
Tennis by team self-play over gRPC, the teams take turns, and ``training_status.json`` keeps the
learner's ELO as Release 22 writes it (``<Behaviour>.elo``, before the checkpoints)."""
from __future__ import annotations

import json

import learn_r22
from tests.conftest import free_port, in_process, write

SAC_TENNIS = """
behaviors:
  Tennis:
    trainer_type: sac
    hyperparameters: {batch_size: 64, buffer_size: 5000, steps_per_update: 10.0}
    network_settings: {hidden_units: 32, num_layers: 2}
    max_steps: 4000
    summary_freq: 500
    checkpoint_interval: 2000
    self_play: {save_steps: 500, team_change: 1500, swap_steps: 300, window: 3, initial_elo: 1000}
"""


def test_sac_learns_tennis_by_team_self_play_and_the_status_file_keeps_its_elo(tmp_path):
    config = write(tmp_path / "tennis.yaml", SAC_TENNIS)
    code, out = in_process(learn_r22.main, tmp_path, [config, "--env=Tennis", "--run-id=t", "--seed=1",
                                                      f"--base-port={free_port()}"], timeout=120)
    assert code == 0, out[-3000:]
    assert "Self-play: the learning team changes from Tennis?team=0 to Tennis?team=1" in out, out[-3000:]
    assert "Self-play: the learning team changes from Tennis?team=1 to Tennis?team=0" in out, out[-3000:]
    run = tmp_path / "results" / "t"
    status = json.loads((run / "run_logs" / "training_status.json").read_text())
    record = status["Tennis"]
    assert list(record)[:2] == ["elo", "checkpoints"] and "final_checkpoint" in record
    assert isinstance(record["elo"], float) and record["elo"] != 1000.0  # games were scored
    assert (run / "Tennis.onnx").is_file()
