"""Pyramids: the scene's rules and rays, its heuristic, and PPO with RND learning it end to end.

The generic conformance tests (spaces, seeds, reset, episodes end) run on Pyramids too, through
``academy.SCENES`` in ``tests/academy/test_academy_scenes.py``.
"""
import os
import re

import numpy as np
import pytest
import yaml

from academy import load_scene
from academy.academy import Academy
from academy.brain import BrainConfig
from academy.envs import pyramids as P
from tests.conftest import learn, run_academy

ROOT = __file__.rsplit("/tests/", 1)[0]
BRAIN = "PyramidsBrain"


def scene(seed=0):
    s = load_scene("Pyramids")(seed)
    s.reset_agents(BRAIN, np.arange(P.N_AGENTS))
    return s


def act(s, actions):
    return s.step({BRAIN: np.asarray(actions, dtype=float).reshape(-1, 1)})[BRAIN]


def test_declared_spaces_are_api2_discrete_one_branch_of_four():
    spec = load_scene("Pyramids").brains[0]
    assert (spec.name, spec.action_space, spec.action_size, spec.state_space) == (BRAIN, "discrete", 4, "continuous")
    assert spec.state_size == 7 * 5 + 2 and spec.n_agents == P.N_AGENTS
    assert spec.parameters_json()["actionSpaceType"] == 0 and spec.max_step == P.MAX_STEP


def test_reset_places_the_switch_far_from_the_agent_and_no_pyramid():
    s = scene(3)
    assert np.all(np.abs(s.switch - s.position).sum(axis=1) >= P.MIN_DISTANCE)
    assert not s.switch_on.any() and not np.isin(s.cells, [P.BRICK, P.GOLD]).any()
    state = s.states(BRAIN)
    assert state.shape == (P.N_AGENTS, P.STATE_SIZE)
    assert np.all(state[:, -2] == 0) and np.all(state[:, -1] == 0)  # switch off, not moving
    one_hot = state[:, :35].reshape(P.N_AGENTS, 7, 5)[..., :4]
    np.testing.assert_array_equal(one_hot.sum(axis=-1), 1.0)        # each ray hits exactly one thing
    assert np.all((0 < state[:, 4:35:5]) & (state[:, 4:35:5] <= 1))  # distances over the range


def test_rays_report_the_wall_ahead_at_its_distance_and_see_the_switch():
    s = scene()
    s.position[0], s.heading[0], s.switch[0] = (3, 5), 1, (9, 5)   # facing +x, the switch 6 cells ahead
    s.cells[0] = P.EMPTY
    s.cells[0, 9, 5] = P.SWITCH
    kind, distance = s.rays()
    centre = len(P.RAY_ANGLES) // 2
    assert kind[0, centre] == P.SWITCH and distance[0, centre] * P.RAY_RANGE == pytest.approx(5.5)
    s.heading[0] = 3                                                  # facing -x: the wall, 3.5 cells away
    kind, distance = s.rays()
    assert kind[0, centre] == P.WALL and distance[0, centre] * P.RAY_RANGE == pytest.approx(3.5)
    assert kind[0, 0] == P.WALL                                       # -90 degrees is +y; the switch is behind


def test_moves_turns_walls_and_speed():
    s = scene()
    s.position[0], s.heading[0] = (0, 0), 3                           # facing the wall at x = -1
    act(s, [0] + [2] * (P.N_AGENTS - 1))
    assert tuple(s.position[0]) == (0, 0) and s.speed[0] == 0         # blocked
    act(s, [1] + [2] * (P.N_AGENTS - 1))                              # backward: +x
    assert tuple(s.position[0]) == (1, 0) and s.speed[0] == -1
    act(s, [3] + [2] * (P.N_AGENTS - 1))                              # turn right: facing +y
    assert s.heading[0] == 0 and s.speed[0] == 0
    act(s, [0] + [2] * (P.N_AGENTS - 1))
    assert tuple(s.position[0]) == (1, 1) and s.speed[0] == 1


def test_the_switch_spawns_a_pyramid_and_touching_it_pays_two_and_ends():
    s = scene(5)
    s.position[0], s.heading[0] = s.switch[0] - (1, 0), 1             # facing +x, next to the switch
    others = [2] * (P.N_AGENTS - 1)
    reward, done = act(s, [0] + others)
    assert s.switch_on[0] and not done[0] and reward[0] == pytest.approx(-1 / (P.MAX_STEP + 1))
    assert np.abs(s.pyramid[0] - s.switch[0]).sum() >= P.MIN_DISTANCE
    assert (s.cells[0] == P.BRICK).sum() == 4 and (s.cells[0] == P.GOLD).sum() == 1
    assert s.states(BRAIN)[0, -2] == 1.0
    # Walk into the pyramid's left brick from the left.
    s.position[0], s.heading[0] = s.pyramid[0] - (2, 0), 1
    reward, done = act(s, [0] + others)
    assert done[0] and reward[0] == 2.0 and not done[1:].any()
    assert tuple(s.position[0]) == tuple(s.pyramid[0] - (2, 0))       # the pyramid is not walked into


def test_an_episode_that_never_finds_the_gold_scores_minus_one():
    academy = Academy(load_scene("Pyramids")(0))
    academy.record_episodes = True
    academy.reset()
    for _ in range(P.MAX_STEP + 1):
        academy.set_external_actions({"action": {BRAIN: [2] * P.N_AGENTS}})   # turning on the spot forever
        academy.decide()
        academy.advance()
        academy.finish_step()
    assert academy.brains[0].finished[:P.N_AGENTS] == pytest.approx([-1.0] * P.N_AGENTS)


def test_heuristic_scores_near_the_optimum_and_random_play_rarely_finds_the_gold():
    configs = {BRAIN: BrainConfig("heuristic")}
    assert Academy(load_scene("Pyramids")(0), configs).run_episodes(32)[BRAIN] >= 1.7
    s, rng = scene(1), np.random.default_rng(0)
    steps, successes, episodes = np.zeros(P.N_AGENTS), 0, 0
    for _ in range(6000):
        reward, done = act(s, rng.integers(0, 4, P.N_AGENTS))
        steps += 1
        ended = done | (steps > P.MAX_STEP)
        successes += int(done.sum())
        episodes += int(ended.sum())
        if ended.any():
            s.reset_agents(BRAIN, np.flatnonzero(ended))
            steps[ended] = 0
    assert episodes >= 200 and successes / episodes < 0.01


# ---------------------------------------------------------------- learning, end to end
def mean_rewards(output: str):
    return [float(m) for m in re.findall(rf"{BRAIN}: Step: \d+\. Mean Reward: (-?\d+\.\d+)", output)]


#: The test budget: the shipped block at a constant learning rate (the shipped linear decay would
#: reach 0 at this shorter budget), cut to 12 summaries. Seed 0 then passes a mean of 1.5 at 86k
#: steps and ends at 1.70 (1.72 at 125k): learning is done by the end, with a margin of 0.2.
PYRAMIDS_TEST_BUDGET = {"max_steps": 115200, "learning_rate_schedule": "constant"}


@pytest.mark.slow
def test_ppo_with_rnd_learns_pyramids_and_the_export_plays(tmp_path):
    """The shipped PyramidsBrain block (PPO + RND), on PYRAMIDS_TEST_BUDGET, reaches a mean of 1.5
    (a random walk scores -1, the heuristic 1.75), and its export, run by the academy's Internal
    brain, finds the gold (the comparison with extrinsic-only PPO is measured by bench/train.py
    --pyramids-seeds, not asserted here)."""
    with open(os.path.join(ROOT, "trainer_configurations.yaml")) as f:
        config = yaml.safe_load(f)
    config[BRAIN].update(PYRAMIDS_TEST_BUDGET)
    (tmp_path / "pyramids.yaml").write_text(yaml.safe_dump(config))
    code, output = learn(tmp_path, "Pyramids", "--train", "--trainer-config", str(tmp_path / "pyramids.yaml"),
                         timeout=900)
    assert code == 0, output[-3000:]
    rewards = mean_rewards(output)
    assert rewards and rewards[-1] >= 1.5, rewards
    model = tmp_path / "models" / "ppo" / "Pyramids.bytes"
    assert run_academy("Pyramids", "--brain", f"{BRAIN}=internal:{model}", "--episodes", "32") >= 1.0
