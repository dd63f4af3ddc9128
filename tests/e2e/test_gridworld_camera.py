"""GridWorld learned from its camera alone, end to end through ``learn.py`` and the export.

Its own file (the helpers are ``test_recurrent_visual``'s) because it is one of the longest runs
of the suite: under ``pytest --dist loadfile`` a file runs on one worker, and this lets another
worker take the rest of ``test_recurrent_visual``.
"""
import pytest

from tests.e2e.test_recurrent_visual import internal_reward, train


@pytest.mark.slow
def test_gridworld_learns_from_the_camera_alone(tmp_path):
    """84x84 RGB frames are the only input: the CNN has to find the goal and the pit. The test budget
    is a third of the shipped one at a constant learning rate (the shipped linear decay would reach
    0 at this shorter budget); a random walk scores about -0.35, and 0.5 needs the goal found far more
    often than the pit. The export samples its actions too, so it is compared over 100 episodes with a
    margin for that noise."""
    rewards = train(tmp_path, "GridWorld", "GridWorldBrain", "cnn", max_steps=20000,
                    learning_rate_schedule="constant")
    assert rewards[-1] >= 0.5, rewards
    assert internal_reward(tmp_path, "GridWorld", "GridWorldBrain", "cnn", 100) >= rewards[-1] - 0.2
