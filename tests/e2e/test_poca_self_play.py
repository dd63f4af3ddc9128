"""MA-POCA as the learner of Release 22 team self-play, as Release 22 trains SoccerTwos.

``unityagents-learn`` trains the built-in Soccer (two teams of two, ``SoccerTwos?team=0`` /
``SoccerTwos?team=1``, goals paid as group rewards) over gRPC with ``trainer_type: poca`` and a
``self_play`` block; the teams take turns, ELO moves, and the exported policy, sampled as Unity
samples it, beats a random team. A random team against a random team wins about a quarter of its
games (the rest are mostly draws), so the bar below is one that only learning clears.
"""
import numpy as np
import pytest

import learn_r22
from tests.conftest import free_port, in_process, write

R22_SOCCER = """
behaviors:
  Soccer:
    trainer_type: poca
    hyperparameters: {batch_size: 512, buffer_size: 4096, learning_rate: 1.0e-3, beta: 1.0e-2, num_epoch: 4,
                      learning_rate_schedule: constant}
    network_settings: {normalize: false, hidden_units: 64, num_layers: 2}
    max_steps: 40000
    time_horizon: 64
    summary_freq: 5000
    checkpoint_interval: 4000
    self_play: {save_steps: 2500, team_change: 10000, swap_steps: 1000, window: 5,
                play_against_latest_model_ratio: 0.5, initial_elo: 1200}
"""


def win_rate_against_random(onnx_path: str, games: int = 200) -> float:
    """The blue team played by the export (sampled actions), purple by uniform random actions."""
    from academy.envs.soccer import BLUE, PURPLE, Soccer
    from academy.internal import OnnxInternalBrain

    scene = Soccer(seed=3)
    scene.modern_protocol = True
    brain = OnnxInternalBrain(onnx_path, Soccer.brains[0], deterministic=False)
    rng = np.random.default_rng(3)
    for name in (BLUE, PURPLE):
        scene.reset_agents(name, np.arange(16))
    won = played = 0
    while played < games:
        blue = brain.decide(scene.states(BLUE), [], np.zeros((16, 0)))[0]
        out = scene.step({BLUE: blue, PURPLE: rng.integers(0, 3, (16, 1)).astype(float)})
        _, done, group = out[BLUE]
        first_rows = np.flatnonzero(done)[::2]  # one row per ended game: both members end together
        won, played = won + int((group[first_rows] > 0).sum()), played + first_rows.size
        for name in (BLUE, PURPLE):
            scene.reset_agents(name, np.flatnonzero(done))
    return won / played


@pytest.mark.slow
def test_poca_learns_soccer_by_team_self_play_over_grpc(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = write(tmp_path / "soccer.yaml", R22_SOCCER)
    code, out = in_process(learn_r22.main, tmp_path, [config, "--env=Soccer", "--run-id=s", "--seed=1",
                                                      f"--base-port={free_port()}"])
    assert code == 0, out[-3000:]
    assert "Self-play: the learning team changes from SoccerTwos?team=0 to SoccerTwos?team=1" in out, out[-3000:]
    assert "Self-play: the learning team changes from SoccerTwos?team=1 to SoccerTwos?team=0" in out, out[-3000:]
    run = tmp_path / "results" / "s"
    elo = [e.value for e in EventAccumulator(str(run / "SoccerTwos")).Reload().Scalars("Self-play/ELO")]
    assert elo[-1] > 1200.0 + 50, elo  # it keeps beating its past selves
    assert win_rate_against_random(str(run / "SoccerTwos.onnx")) > 0.75
