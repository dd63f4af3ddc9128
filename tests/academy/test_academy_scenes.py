"""Conformance of every built-in scene, and its scripted heuristic's score stand-alone.

Conformance: declared spaces match what ``states``/``render`` produce, a seed fixes the run, reset
puts agents back, episodes end, reset parameters change the scene. Heuristics: each scene's scripted
policy reaches its benchmark, which proves the reward is wired so that the task is solvable.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from academy import SCENES, load_scene
from academy.academy import Academy
from academy.brain import BrainConfig

REPO = __file__.rsplit("/tests/", 1)[0]


def random_actions(rng: np.random.Generator, academy: Academy) -> dict:
    actions = {}
    for brain in academy.brains:
        spec = brain.spec
        if spec.action_space == "continuous":
            rows = rng.uniform(-1, 1, (spec.n_agents, spec.action_size))
            if spec.discrete_branches:  # hybrid: one index per branch after the continuous values
                picks = [rng.integers(0, b, (spec.n_agents, 1)) for b in spec.discrete_branches]
                rows = np.concatenate([rows] + picks, axis=1)
            actions[brain.name] = rows.ravel().tolist()
        else:
            actions[brain.name] = rng.integers(0, spec.action_size, spec.n_agents).tolist()
    return actions


def run(scene: str, seed: int, steps: int, action_seed: int = 0) -> list[list[dict]]:
    """Step a scene with seeded random actions; return every state message."""
    academy = Academy(load_scene(scene)(seed))
    academy.reset()
    rng = np.random.default_rng(action_seed)
    log = []
    for _ in range(steps):
        academy.set_external_actions({"action": random_actions(rng, academy)})
        academy.decide()
        academy.advance()
        sent = []
        if academy.finish_step(lambda b, sent=sent: sent.append(academy.state_message(b))):
            academy.reset()
        log.append(sent)
    return log


@pytest.mark.parametrize("scene", SCENES)
def test_spaces_match_what_the_scene_produces(scene):
    academy = Academy(load_scene(scene)(0))
    academy.reset()
    assert academy.subscribed, "every scene talks to Python"
    for brain in academy.brains:
        spec = brain.spec
        states = academy.scene.states(brain.name)
        assert states.shape == (spec.n_agents, spec.state_width)
        assert np.all(np.isfinite(states))
        if spec.state_space == "discrete":
            assert np.all((0 <= states) & (states < spec.state_size))
        for i, camera in enumerate(spec.cameras):
            frames = academy.scene.render(brain.name, i)
            assert frames.shape == (spec.n_agents, camera.height, camera.width, 3)
            assert frames.dtype == np.uint8
        heuristic = academy.scene.heuristic(brain.name)
        assert heuristic.shape == (spec.n_agents, spec.action_width)
        if spec.action_space == "discrete":
            assert np.all((0 <= heuristic) & (heuristic < spec.action_size))


@pytest.mark.parametrize("scene", SCENES)
def test_a_seed_fixes_the_run_and_another_seed_changes_it(scene):
    first = run(scene, seed=1, steps=60)
    assert first == run(scene, seed=1, steps=60)
    if scene != "Basic":  # Basic has nothing random in it
        assert first != run(scene, seed=2, steps=60)


@pytest.mark.parametrize("scene", SCENES)
def test_episodes_end_and_rewards_are_finite(scene):
    log = run(scene, seed=0, steps=400)
    dones = [any(m["dones"]) for step in log for m in step]
    rewards = np.array([r for step in log for m in step for r in m["rewards"]])
    assert any(dones), "random play ends some episode within 400 steps"
    assert np.all(np.isfinite(rewards)) and np.any(rewards != 0)


@pytest.mark.parametrize("scene", SCENES)
def test_reset_restores_fresh_agents(scene):
    academy = Academy(load_scene(scene)(0))
    academy.reset()
    rng = np.random.default_rng(0)
    for _ in range(20):
        academy.set_external_actions({"action": random_actions(rng, academy)})
        academy.decide()
        academy.advance()
        academy.finish_step()
    academy.reset()
    for brain in academy.brains:
        assert brain.steps.tolist() == [0] * brain.spec.n_agents
        assert not brain.done.any() and not brain.reward.any() and not brain.memory.any()
    assert academy.current_step == 0 and not academy.done


# --- 3DBall -------------------------------------------------------------------------------------

def test_3dball_spaces_and_reset_distribution():
    academy = Academy(load_scene("3DBall")(0))
    academy.reset()
    (brain,) = academy.brains
    assert (brain.spec.n_agents, brain.spec.state_size, brain.spec.action_size) == (12, 8, 2)
    assert brain.spec.action_space == "continuous" and brain.spec.state_space == "continuous"
    states = academy.scene.states("Ball3DBrain")
    assert np.all(np.abs(np.degrees(2 * np.arcsin(states[:, :2]))) <= 10 + 1e-9), "tilt within ±10°"
    assert np.all(np.abs(states[:, [2, 4]]) <= 1.5) and np.all(states[:, 3] == 4.0)
    assert np.all(states[:, 5:] == 0)


def test_3dball_action_turns_the_platform_two_degrees_at_most():
    scene = load_scene("3DBall")(0)
    scene.reset_agents("Ball3DBrain", np.arange(12))
    before = scene.tilt.copy()
    scene.step({"Ball3DBrain": np.tile([5.0, -0.5], (12, 1))})
    np.testing.assert_allclose(scene.tilt - before, np.tile([2.0, -1.0], (12, 1)))


def test_3dball_rewards_and_fall():
    academy = Academy(load_scene("3DBall")(0))
    academy.reset()
    rewards = []
    for _ in range(200):  # tilt hard one way: every ball must roll off
        academy.set_external_actions({"action": {"Ball3DBrain": [1.0, 0.0] * 12}})
        academy.advance()
        rewards.append(academy.brains[0].reward.copy())
        done = academy.brains[0].done.copy()
        academy.finish_step()
        if done.all():
            break
    rewards = np.array(rewards)
    assert set(np.unique(rewards)) <= {0.1, -1.0}
    assert (rewards == -1.0).sum() >= 12


def test_3dball_random_policy_drops_the_ball_within_a_few_dozen_steps():
    academy = Academy(load_scene("3DBall")(0))
    academy.reset()
    rng = np.random.default_rng(0)
    lengths, alive = [], np.zeros(12)
    for _ in range(500):
        academy.set_external_actions({"action": {"Ball3DBrain": rng.uniform(-1, 1, 24).tolist()}})
        academy.advance()
        alive += 1
        done = academy.brains[0].done.copy()
        lengths += alive[done].tolist()
        alive[done] = 0
        academy.finish_step()
    assert 15 < np.mean(lengths) < 80


def test_3dball_gravity_and_ball_scale_change_the_physics():
    def height_after(params: dict, steps: int) -> np.ndarray:
        academy = Academy(load_scene("3DBall")(0))
        academy.reset(parameters=params)
        for _ in range(steps):
            academy.set_external_actions({"action": {"Ball3DBrain": [0.0] * 24}})
            academy.advance()
        return academy.scene.pos[:, 1]

    assert np.all(height_after({"gravity": 20.0}, 3) < height_after({}, 3))
    # once landed on a level-ish plate, a bigger ball rests higher
    assert np.mean(height_after({"ball_scale": 2.0}, 15)) > np.mean(height_after({}, 15)) + 0.3


# --- Basic --------------------------------------------------------------------------------------

def test_basic_goals_and_step_cost():
    academy = Academy(load_scene("Basic")(0))
    academy.reset()
    spec = academy.brains[0].spec
    assert (spec.state_space, spec.state_size, spec.action_space, spec.action_size) == ("discrete", 20, "discrete", 2)
    trace = []
    for action in (0, 0, 0):
        academy.set_external_actions({"action": {"BasicBrain": [action]}})
        academy.advance()
        trace.append((float(academy.scene.position[0]), float(academy.brains[0].reward[0]),
                      bool(academy.brains[0].done[0])))
        academy.finish_step()
    assert trace == [(9, -0.01, False), (8, -0.01, False), (7, 0.1, True)]
    assert academy.scene.states("BasicBrain").tolist() == [[10.0]]


# --- GridWorld ----------------------------------------------------------------------------------

def test_gridworld_layout_moves_and_rewards():
    scene = load_scene("GridWorld")(3)
    scene.reset_agents("GridWorldBrain", np.arange(1))
    assert scene.cells.shape == (1, 5, 5)
    assert (scene.cells == 1).sum() == 1 and (scene.cells == 2).sum() == 1
    x, z = scene.agent[0]
    assert scene.cells[0, x, z] == 0, "the agent never starts on a goal or pit"
    scene.cells[0] = 0
    scene.agent[0] = (0, 0)
    scene.cells[0, 0, 1] = 1
    scene.cells[0, 1, 0] = 2
    assert scene.step({"GridWorldBrain": np.array([[2.0]])})["GridWorldBrain"][0].tolist() == [-0.01]
    assert scene.agent[0].tolist() == [0, 0], "the wall blocks a move"
    reward, done = scene.step({"GridWorldBrain": np.array([[3.0]])})["GridWorldBrain"]
    assert (reward.tolist(), done.tolist()) == ([-1.0], [True])
    scene.agent[0] = (0, 0)
    reward, done = scene.step({"GridWorldBrain": np.array([[0.0]])})["GridWorldBrain"]
    assert (reward.tolist(), done.tolist()) == ([1.0], [True])


def test_gridworld_render_shows_walls_agent_goal_and_pit_top_down():
    scene = load_scene("GridWorld")(0)
    scene.reset_agents("GridWorldBrain", np.arange(1))
    scene.cells[0] = 0
    scene.cells[0, 4, 4] = 1    # goal at top right
    scene.cells[0, 0, 4] = 2    # pit at top left
    scene.agent[0] = (0, 0)     # agent at bottom left
    image = scene.render("GridWorldBrain", 0)[0]
    cell = 84 // 7

    def colour(row: int, col: int) -> tuple:
        return tuple(image[row * cell + cell // 2, col * cell + cell // 2])

    assert colour(0, 0) == (60, 60, 60)
    assert colour(1, 5) == (40, 200, 60)
    assert colour(1, 1) == (220, 40, 40)
    assert colour(5, 1) == (40, 80, 230)
    assert colour(3, 3) == (235, 235, 235)


def test_gridworld_reset_parameters_resize_the_grid_and_counts():
    academy = Academy(load_scene("GridWorld")(0))
    academy.reset(parameters={"gridSize": 4, "numObstacles": 3, "numGoals": 2})
    cells = academy.scene.cells
    assert cells.shape == (1, 4, 4)
    assert (cells == 1).sum() == 2 and (cells == 2).sum() == 3
    with pytest.raises(ValueError, match="gridSize 2 has 4 cells"):
        academy.reset(parameters={"gridSize": 2, "numObstacles": 3})


def test_gridworld_episode_ends_after_100_steps():
    academy = Academy(load_scene("GridWorld")(0))
    academy.reset()
    academy.scene.cells[0] = 0  # nothing to reach: only the step limit can end it
    for step in range(1, 101):
        academy.set_external_actions({"action": {"GridWorldBrain": [1 if step % 2 else 0]}})
        academy.advance()
        if step < 100:
            assert not academy.brains[0].done[0]
            academy.brains[0].reward[:] = 0
    assert academy.brains[0].done[0]


# --- 3DBallHard, 3DBallIL ------------------------------------------------------------------------

def test_3dball_hard_hides_the_velocity_and_declares_memory():
    academy = Academy(load_scene("3DBallHard")(0))
    academy.reset()
    spec = academy.brains[0].spec
    assert (spec.name, spec.state_size, spec.memory_size) == ("Ball3DHardBrain", 5, 32)
    for _ in range(10):
        academy.set_external_actions({"action": {"Ball3DHardBrain": [0.0] * 24}})
        academy.advance()
        academy.finish_step()
    np.testing.assert_array_equal(academy.scene.states("Ball3DHardBrain"),
                                  load_scene("3DBall").states(academy.scene, "Ball3DHardBrain")[:, :5])


def test_3dball_il_teacher_is_a_broadcasting_heuristic_and_student_external():
    academy = Academy(load_scene("3DBallIL")(0))
    params = academy.academy_parameters()
    assert params["brainNames"] == ["Teacher", "Student"] and params["externalBrainNames"] == ["Student"]
    assert [b.spec.n_agents for b in academy.brains] == [12, 12]
    academy.reset()
    academy.set_external_actions({"action": {"Student": [0.0] * 24}})
    academy.decide()
    np.testing.assert_array_equal(academy.brains[0].action, academy.scene.heuristic("Teacher"))
    assert not academy.brains[1].action.any(), "the student's actions come from Python"


# --- Hallway ------------------------------------------------------------------------------------

def test_hallway_cue_is_visible_only_at_the_start():
    scene = load_scene("Hallway")(0)
    scene.reset_agents("HallwayBrain", np.arange(8))
    seen = []
    for _ in range(6):
        states = scene.states("HallwayBrain")
        seen.append(states[:, 2:4].any(axis=1).all())
        assert np.array_equal(states[:, 3], (scene.cue == 1) & (scene.z < 2))
        scene.step({"HallwayBrain": np.zeros((8, 1))})
    assert seen == [True, True, False, False, False, False]


def test_hallway_needs_memory_a_cue_blind_policy_scores_under_half():
    academy = Academy(load_scene("Hallway")(0))
    academy.record_episodes = True
    academy.reset()
    brain = academy.brains[0]
    while len(brain.finished) < 200:  # the best cue-blind policy: walk to the junction, always turn left
        at_junction = academy.scene.states("HallwayBrain")[:, 1] == 1
        academy.set_external_actions({"action": {"HallwayBrain": np.where(at_junction, 2, 0).tolist()}})
        academy.advance()
        academy.finish_step()
    assert 0.3 < np.mean(brain.finished) < 0.5
    # Each episode ends one of two ways, the right goal or the wrong one, compared within a tolerance
    # rather than after rounding (a value beside a rounding edge would land on either side of it).
    outcomes = np.array([0.94, -0.16])
    nearest = np.abs(np.asarray(brain.finished)[:, None] - outcomes[None, :]).min(axis=1)
    assert nearest.max() < 1e-6
    assert {int(np.argmin(np.abs(outcomes - r))) for r in brain.finished} == {0, 1}


# --- Tennis -------------------------------------------------------------------------------------

def test_tennis_sides_see_themselves_the_same_way():
    scene = load_scene("Tennis")(0)
    scene.reset_agents("TennisBrain", np.arange(8))
    scene.pos[1] = scene.pos[0] * [-1, 1]
    scene.vel[1] = scene.vel[0] * [-1, 1]
    scene.ball[:] = [0.0, 3.0]
    scene.ball_vel[:] = [0.0, 1.0]
    np.testing.assert_array_equal(scene.states("TennisBrain"), scene.states("ghost-TennisBrain"))
    # and a mirrored action moves both towards the net
    before = np.abs(scene.pos[:, :, 0]).copy()
    scene.step({"TennisBrain": np.tile([1.0, 0.0], (8, 1)), "ghost-TennisBrain": np.tile([1.0, 0.0], (8, 1))})
    assert np.all(np.abs(scene.pos[:, :, 0]) < before)


def test_tennis_a_dropped_ball_ends_the_point_for_both_and_blames_its_side():
    academy = Academy(load_scene("Tennis")(0))
    academy.reset()
    scene = academy.scene
    scene.pos[0, :, 0], scene.pos[1, :, 0] = -7.5, 7.5   # both far from the ball
    scene.ball[:] = [-3.0, 0.1]
    scene.ball_vel[:] = [0.0, -1.0]
    academy.set_external_actions({"action": {"TennisBrain": [0.0] * 16, "ghost-TennisBrain": [0.0] * 16}})
    academy.advance()
    left, right = academy.brains
    assert left.done.all() and right.done.all()
    assert np.allclose(left.reward, -0.1) and np.allclose(right.reward, 0.0)


def test_tennis_a_return_over_the_net_pays_the_hitter():
    scene = load_scene("Tennis")(0)
    scene.reset_agents("TennisBrain", np.arange(8))
    scene.pos[0, :, :] = [-4.0, 0.0]
    scene.ball[:] = [-4.0, 1.5]
    scene.ball_vel[:] = [0.0, -2.0]
    total = np.zeros((2, 8))
    for _ in range(15):
        result = scene.step({"TennisBrain": np.zeros((8, 2)), "ghost-TennisBrain": np.zeros((8, 2))})
        total += [result["TennisBrain"][0], result["ghost-TennisBrain"][0]]
    assert np.allclose(total[0], 0.1) and np.all(scene.ball[:, 0] > 0)


# --- Soccer -------------------------------------------------------------------------------------

def _soccer_kickoff(blue, purple, ball=3):
    """A Soccer scene with area 0's members placed (blue's frame) and the other areas far from the ball."""
    scene = load_scene("Soccer")(0)
    for brain in ("SoccerBlue", "SoccerPurple"):
        scene.reset_agents(brain, np.arange(16))
    scene.pos[0, 0], scene.pos[1, 0], scene.ball[0] = blue, purple, ball
    return scene


def _soccer_step(scene, blue, purple):
    return scene.step({"SoccerBlue": np.full((16, 1), float(blue)), "SoccerPurple": np.full((16, 1), float(purple))})


def test_soccer_two_pushers_move_the_ball_past_one_and_one_cannot():
    forward = 1
    scene = _soccer_kickoff(blue=[3, 3], purple=[3, 6])   # blue's two against purple's one at the ball
    _soccer_step(scene, forward, forward)
    assert scene.ball[0] == 4 and scene.pos[0, 0].tolist() == [4, 4]
    scene = _soccer_kickoff(blue=[3, 0], purple=[3, 6])   # one against one holds the ball
    _soccer_step(scene, forward, forward)
    assert scene.ball[0] == 3


def test_soccer_a_goal_pays_the_groups_and_ends_the_game_of_all_four():
    scene = _soccer_kickoff(blue=[6, 6], purple=[0, 0], ball=6)
    scene.timer[0] = 10
    out = _soccer_step(scene, 1, 0)
    (_, blue_done, blue_group), (_, purple_done, purple_group) = out["SoccerBlue"], out["SoccerPurple"]
    assert blue_done[:2].all() and purple_done[:2].all() and not blue_done[2:].any()
    assert np.allclose(blue_group[:2], 1.0 - 11 / 40) and np.allclose(purple_group[:2], -1.0)
    assert not blue_group[2:].any() and not out["SoccerBlue"][0].any()   # no individual reward
    assert scene.group_ids("SoccerBlue")[:2].tolist() == [1, 1]
    assert scene.group_ids("SoccerPurple")[:2].tolist() == [2, 2]


def test_soccer_teams_see_themselves_the_same_way():
    scene = _soccer_kickoff(blue=[1, 2], purple=[5, 4])   # purple mirrored: cells 1 and 2 of its own frame
    blue, purple = scene.states("SoccerBlue"), scene.states("SoccerPurple")
    np.testing.assert_allclose(blue[:2], purple[:2])
    assert blue[0, 4] == purple[0, 4] == 0.5   # the ball in the middle for both


def test_soccer_the_scripted_team_beats_random_play_and_one_player_alone():
    """The task is solvable and needs both members: blue's scripted pair against purple's random or lone player."""
    def blue_wins(purple_policy, games=200):
        scene = load_scene("Soccer")(0)
        rng = np.random.default_rng(1)
        for brain in ("SoccerBlue", "SoccerPurple"):
            scene.reset_agents(brain, np.arange(16))
        won = played = 0
        while played < games:
            out = scene.step({"SoccerBlue": scene.heuristic("SoccerBlue"), "SoccerPurple": purple_policy(scene, rng)})
            _, done, group = out["SoccerBlue"]
            first_rows = np.flatnonzero(done)[::2]   # one row per ended game (both members end together)
            won, played = won + int((group[first_rows] > 0).sum()), played + first_rows.size
            for brain in ("SoccerBlue", "SoccerPurple"):
                scene.reset_agents(brain, np.flatnonzero(done))
        return won / played

    def alone(scene, rng):   # purple's second member never moves
        return np.where(np.arange(16) % 2 == 0, scene.heuristic("SoccerPurple")[:, 0], 0.0)[:, None]

    assert blue_wins(lambda scene, rng: rng.integers(0, 3, (16, 1)).astype(float)) > 0.95
    assert blue_wins(alone) > 0.8


# --- Push ---------------------------------------------------------------------------------------

def test_push_moves_the_block_and_scores_on_the_goal():
    scene = load_scene("Push")(0)
    scene.reset_agents("PushBrain", np.arange(8))
    scene.agent[:] = [0.0, -2.0]
    scene.block[:] = [0.0, -1.0]
    scene.goal[:] = [0.0, 0.5]
    reward, done = scene.step({"PushBrain": np.full((8, 1), 4.0)})["PushBrain"]
    np.testing.assert_allclose(scene.block, [[0.0, -0.5]] * 8)
    assert np.allclose(reward, -0.005) and not done.any()
    for _ in range(2):
        reward, done = scene.step({"PushBrain": np.full((8, 1), 4.0)})["PushBrain"]
    assert done.all() and np.allclose(reward, 1.0)


def test_push_reset_parameters_shape_the_task():
    academy = Academy(load_scene("Push")(0))
    academy.reset(parameters={"x_variation": 0.0, "block_size": 2.0, "goal_size": 3.0})
    assert np.all(academy.scene.block[:, 0] == 0.0)
    assert np.all(academy.scene.states("PushBrain")[:, 10:] == [2.0 / 8, 3.0 / 8])


def test_push_academy_max_steps_gives_a_global_done():
    academy = Academy(load_scene("Push")(0))
    academy.reset()
    assert academy.scene.max_steps == 3000
    done, steps = False, 0
    while not done and steps < 3000:
        academy.set_external_actions({"action": {"PushBrain": [0] * 8}})
        academy.advance()
        done = academy.finish_step()
        steps += 1
    assert done and steps == 3000


# --- heuristics stand-alone ---------------------------------------------------------------------

@pytest.mark.parametrize("scene, brain, episodes, minimum", [
    ("Basic", "BasicBrain", 10, 0.9),
    ("GridWorld", "GridWorldBrain", 200, 0.7),
    ("3DBall", "Ball3DBrain", 12, 90.0),
    ("3DBallHard", "Ball3DHardBrain", 12, 90.0),
    ("3DBallIL", "Teacher", 12, 90.0),
    ("3DBallIL", "Student", 12, 90.0),
    ("Hallway", "HallwayBrain", 40, 0.9),
    ("Tennis", "TennisBrain", 16, 2.5),
    ("Tennis", "ghost-TennisBrain", 16, 2.5),
    ("Push", "PushBrain", 40, 0.8),
])
def test_heuristic_reaches_the_benchmark(scene, brain, episodes, minimum):
    scene_cls = load_scene(scene)
    configs = {spec.name: BrainConfig("heuristic") for spec in scene_cls.brains}
    assert Academy(scene_cls(0), configs).run_episodes(episodes)[brain] >= minimum


def test_standalone_cli_prints_one_parsable_line_per_brain():
    result = subprocess.run([sys.executable, "-m", "academy", "Basic", "--episodes", "3"],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines() == ["mean_reward BasicBrain 0.9400"]


def test_cli_rejects_bad_brain_overrides():
    result = subprocess.run([sys.executable, "-m", "academy", "Basic", "--brain", "Nope=heuristic"],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "NAME one of ['BasicBrain']" in result.stderr
