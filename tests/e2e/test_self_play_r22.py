"""Team self-play with Release 22's ``self_play:`` keys (trainers/ghost/self_play.py, trainers/ghost/team_trainer.py).

Fast: the schedule (snapshots, swaps, team changes, strictly-greater comparisons), the ELO
arithmetic, both config formats and their refusals, and the seats of one team behaviour driven
with hand-made infos (no socket). Slow: ``unityagents-learn`` trains the built-in Tennis over
gRPC (``Tennis?team=0`` / ``Tennis?team=1``) with self-play, and a resume continues its schedule.
"""
import glob
import json
import os

import numpy as np
import pytest

import learn_r22
from runner.settings.trainer_config import trainer_config_from_dict
from tests.conftest import free_port, in_process, write
from tests.fake_env import learn_from_step
from trainers.ghost.self_play import LATEST, SelfPlaySchedule, elo_change, expected_score, game_result
from trainers.settings.self_play import SelfPlaySettings, validate_self_play
from trainers.trainer.base import TrainerConfigError
from trainers.trainer.registry import load_registry

ROOT = __file__.rsplit("/tests/", 1)[0]

R22_TENNIS = """
behaviors:
  Tennis:
    trainer_type: ppo
    hyperparameters: {batch_size: 256, buffer_size: 1024, learning_rate: 1.0e-3, beta: 1.0e-3, num_epoch: 3,
                      learning_rate_schedule: constant}
    network_settings: {normalize: true, hidden_units: 32, num_layers: 2}
    max_steps: 5000
    time_horizon: 64
    summary_freq: 1000
    checkpoint_interval: 2000
    self_play: {save_steps: 1000, team_change: 2000, swap_steps: 500, window: 3,
                play_against_latest_model_ratio: 0.5, initial_elo: 1000}
"""
FLAT_TENNIS = """
Tennis:
    trainer: ppo
    max_steps: 6000
    self_play:
        save_steps: 1000
        team_change: 2000
        swap_steps: 500
        window: 3
        initial_elo: 1000
"""


def key(k):
    return "brain 'Tennis', key 'self_play" + (f".{k}" if k else "") + "'"


# ------------------------------------------------------------------ schedule and ELO


def test_the_schedule_snapshots_swaps_and_changes_teams_past_each_interval():
    s = SelfPlaySchedule(SelfPlaySettings(save_steps=100, team_change=300, swap_steps=50, window=2), seed=0)
    assert s.snapshot_due(0)  # the first snapshot: before the first action
    assert s.record_snapshot(0) == 0
    assert not s.snapshot_due(100) and s.snapshot_due(101)  # strictly more than save_steps
    assert s.record_snapshot(101) == 1
    assert s.record_snapshot(202) == 0 and s.filled == 2  # a ring of `window` slots: the oldest goes first
    assert not s.add_opponent_steps(50) and s.add_opponent_steps(1)  # swaps count the opponent's steps
    s.choose_opponent()
    assert not s.add_opponent_steps(50)  # counted again from the swap
    assert not s.team_change_due(300) and s.team_change_due(301)
    assert s.change_team(301) == 1 and s.change_team(700) == 0  # two teams take turns
    assert not s.team_change_due(1000) and s.team_change_due(1001) and s.team_changes == [301, 700]


def test_swaps_play_the_latest_with_the_ratio_else_a_snapshot_of_the_window_drawn_uniformly():
    def draws(ratio, n=4000):
        s = SelfPlaySchedule(SelfPlaySettings(window=4, play_against_latest_model_ratio=ratio), seed=3)
        for step in range(3):
            s.record_snapshot(step)  # three of the four slots filled
        return [s.choose_opponent() for _ in range(n)]

    assert set(draws(1.0, 200)) == {LATEST}
    counts = np.bincount(draws(0.0), minlength=4)
    assert counts[3] == 0 and all(abs(c / 4000 - 1 / 3) < 0.03 for c in counts[:3]), counts
    assert abs(draws(0.3).count(LATEST) / 4000 - 0.3) < 0.03


def test_elo_follows_release_22_result_minus_expectation_without_a_k_factor():
    assert (game_result(0.7), game_result(0.0), game_result(-1.0)) == (1.0, 0.5, 0.0)
    assert expected_score(1200, 1200) == pytest.approx(0.5)
    assert expected_score(1600, 1200) == pytest.approx(1 / (1 + 10 ** -1))
    assert elo_change(1200, 1200, 1.0) == pytest.approx(0.5)
    s = SelfPlaySchedule(SelfPlaySettings(window=2, initial_elo=1000.0))
    s.record_snapshot(0)
    s.current_opponent = 0
    s.record_game(1.0)  # a won game against snapshot 0: the learner gains what the snapshot loses
    assert (s.elo, s.elos[0]) == (pytest.approx(1000.5), pytest.approx(999.5))
    s.record_game(-0.1)
    assert s.elo == pytest.approx(1000.5 - expected_score(1000.5, 999.5))
    s.record_snapshot(10)
    assert s.elos[1] == s.elo  # a snapshot starts from the learner's rating
    s.current_opponent = LATEST
    before = s.elo
    s.record_game(1.0)  # against the latest weights the opponent slot is the learner's own
    assert s.elo == pytest.approx(before)


def test_the_schedule_state_round_trips_with_its_random_stream():
    s = SelfPlaySchedule(SelfPlaySettings(window=3), seed=5)
    s.record_snapshot(0)
    s.record_snapshot(30000)
    s.change_team(120000)
    s.record_game(1.0)
    state = json.loads(json.dumps(s.get_state()))
    t = SelfPlaySchedule(SelfPlaySettings(window=3), seed=99)
    t.set_state(state)
    assert t.get_state() == s.get_state()
    assert [t.choose_opponent() for _ in range(20)] == [s.choose_opponent() for _ in range(20)]


# ------------------------------------------------------------------ configuration


def test_both_config_formats_give_the_same_self_play_block_with_release_22_defaults(tmp_path):
    registry = load_registry()
    options = {flag: None for flag in learn_r22.FLAGS}
    _, r22, _, _, _ = learn_r22.load(write(tmp_path / "r22.yaml", R22_TENNIS.replace(
        "swap_steps: 500, window: 3,\n                play_against_latest_model_ratio: 0.5, initial_elo: 1000",
        "window: 3, initial_elo: 1000")), options, None, registry)
    import yaml

    flat = trainer_config_from_dict("flat.yaml", yaml.safe_load(FLAT_TENNIS.replace("        swap_steps: 500\n", "")),
                                    registry)
    expected = {"save_steps": 1000, "team_change": 2000, "swap_steps": 2000, "window": 3,
                "play_against_latest_model_ratio": 0.5, "initial_elo": 1000.0}
    for config in (r22, flat):
        settings = config.settings_for("Tennis?team=1")  # one entry serves every team
        assert settings.trainer_type == "ppo" and settings.parameters["self_play"] == expected
    assert validate_self_play({"save_steps": 1000}, key)["team_change"] == 5000  # Release 22: 5 x save_steps


@pytest.mark.parametrize("block, where, fix", [
    ({"team_change": 100, "swap_steps": 200}, "self_play.team_change': 100 is smaller than swap_steps 200",
     "Raise team_change"),
    ({"window": 0}, "self_play.window': must be >= 1", "window: 1"),
    ({"play_against_latest_model_ratio": -0.5}, "play_against_latest_model_ratio': must be a probability in [0, 1]",
     "Use 0"),
    ({"swap_step": 10}, "self_play.swap_step': unknown key", "Did you mean 'swap_steps'?"),
    ({"save_steps": "often"}, "self_play.save_steps': expected an integer", "'often'"),
    ("yes", "key 'self_play': expected a block", "'yes'"),
])
def test_a_bad_flat_self_play_block_names_the_file_the_brain_the_key_and_the_fix(block, where, fix):
    with pytest.raises(TrainerConfigError) as e:
        trainer_config_from_dict("t.yaml", {"Tennis": {"self_play": block}}, load_registry())
    assert str(e.value).startswith("t.yaml: brain 'Tennis'") and where in str(e.value) and fix in str(e.value)


def test_self_play_is_refused_for_a_behavior_without_team_variants_before_any_trainer_is_built():
    from unityagents.brain import BrainParameters

    def brain(name, size=8):
        return BrainParameters(name, {"stateSize": size, "actionSize": 2, "actionSpaceType": 1,
                                      "stateSpaceType": 1, "cameraResolutions": [], "actionDescriptions": []})

    config = trainer_config_from_dict("t.yaml", {"Tennis": {"self_play": {}}, "Ball3DBrain": {"self_play": {}}},
                                      load_registry())
    one_team = {"Ball3DBrain?team=0": brain("Ball3DBrain?team=0")}
    with pytest.raises(TrainerConfigError, match=r"t\.yaml: brain 'Ball3DBrain', key 'self_play': team self-play "
                                                 r"needs .* but the build has 'Ball3DBrain\?team=0' .*Remove the "
                                                 r"self_play block; for an API-2 scene, .*brain_to_copy"):
        config.settings_for_environment(one_team, list(one_team))
    api2 = {"Tennis": brain("Tennis")}
    with pytest.raises(TrainerConfigError, match="brain 'Tennis', key 'self_play': .* has 'Tennis'"):
        config.settings_for_environment(api2, list(api2))
    unequal = {"Tennis?team=0": brain("Tennis?team=0"), "Tennis?team=1": brain("Tennis?team=1", 9)}
    with pytest.raises(TrainerConfigError, match="need the same spaces.*state size: 8 vs 9"):
        config.settings_for_environment(unequal, list(unequal))


# ------------------------------------------------------------------ the seats, without a socket


def test_the_seats_route_the_learning_team_to_one_learner_and_change_teams_through_a_reset():
    from tests.unityagents.wire.test_action_contract import brain, info_of, ppo_params
    from trainers.ghost.team_trainer import build_team_trainers
    from trainers.ppo.trainer import PPOTrainer
    from trainers.tf_utils import tf
    from trainers.trainer.brain_info import BrainInfo

    names = ["Tennis?team=1", "Tennis?team=0"]
    brains = {n: brain(n, "unit") for n in names}
    sp = validate_self_play({"save_steps": 40, "team_change": 100, "swap_steps": 30, "window": 2,
                             "play_against_latest_model_ratio": 0.0}, key)
    with tf.Graph().as_default() as graph:
        sess = tf.Session(graph=graph)
        seats = build_team_trainers(sess, brains, names, ppo_params("Tennis", self_play=sp, buffer_size=10000,
                                                                    batch_size=64), PPOTrainer, True, seed=0)
        sess.run(tf.global_variables_initializer())
    graph.finalize()
    t0, t1 = seats["Tennis?team=0"], seats["Tennis?team=1"]
    group, learner = t0.group, t0.group.learner
    assert t1.group is group and (t0.graph_scope, t1.graph_scope) == ("Tennis", None)
    pool = {v.op.name.split("snapshot_pool/", 1)[1]: v for v in group.pool.variables}
    acting = {name: next(v for v in graph.get_collection("variables") if v.op.name == f"Tennis-opponent/{name}")
              for name in pool}

    def opponent_plays(slot):
        """Whether the opponent's network holds pool slot ``slot``."""
        return all(np.array_equal(sess.run(acting[n]), sess.run(pool[n])[slot]) for n in pool)

    def step(agents=8):
        info = {n: info_of(agents, seed=k) for k, n in enumerate(names)}
        out = {n: s.take_action(info) for n, s in seats.items()}
        for n, s in seats.items():
            learn_from_step(s, info, info, out[n][3])
            s.increment_step(agents)
        return out

    out = step()
    assert out["Tennis?team=0"][3] is not None and out["Tennis?team=1"][3] is None  # team 0 learns first
    assert learner.step == 8 and group.schedule.snapshots_taken == 1 and group.schedule.ghost_step == 8
    assert opponent_plays(0)  # the initial weights: snapshot 0 and the first opponent
    for _ in range(12):
        step()
    assert learner.step == 104 and group.schedule.snapshots_taken == 3  # at 0, 48 and 96
    assert group.schedule.last_swap > 0  # the opponent was swapped every 30 of its steps
    reason = t1.reset_request()
    assert reason and "learning team of Tennis changes at learner step 104" in reason
    assert t0.reset_request() is None and t1.learning is False  # asked once; nothing changes until the reset
    t1.end_episode(list(range(8)))
    assert t1.learning and not t0.learning and group.schedule.team_changes == [104]
    slot = group.schedule.current_opponent
    assert slot in (0, 1) and opponent_plays(slot)  # the change swapped in a snapshot (ratio 0)
    out = step()
    assert out["Tennis?team=1"][3] is not None and out["Tennis?team=0"][3] is None and learner.step == 112

    # ELO: a finished point of the learning team, won by its last reward; an interrupted one is not scored.
    before, opponent = group.schedule.elo, group.schedule.opponent_elo
    done = BrainInfo([], info_of(2).states, agents=[0, 1], reward=[1.0, 1.0], local_done=[True, True],
                     max_reached=[False, True], action=np.zeros((2, 2), np.float32))
    group.score_games(done)
    assert group.schedule.elo == pytest.approx(before + elo_change(before, opponent, 1.0))
    assert learner.stats["Self-play/ELO"][-1] == group.schedule.elo
    state = json.loads(json.dumps(t0.get_state()))
    assert state["self_play"]["team_changes"] == [104] and state["learner"]["step"] == 112
    group.schedule.set_state({**state["self_play"], "team_changes": []})
    t1.set_state(state)
    assert group.schedule.team_changes == [104] and t0.get_step == t1.get_step == 112


def test_a_recurrent_opponent_over_the_modern_protocol_keeps_each_agents_memory():
    """A modern environment keeps no memory (memorySize 0): the opponent carries each agent's
    memory from one decision to the next, and starts a new episode's agent from zeros."""
    from tests.unityagents.wire.test_action_contract import brain, info_of, ppo_params
    from trainers.ghost.team_trainer import build_team_trainers
    from trainers.ppo.trainer import PPOTrainer
    from trainers.tf_utils import tf

    names = ["Tennis?team=1", "Tennis?team=0"]
    brains = {n: brain(n, "unit") for n in names}
    sp = validate_self_play({"save_steps": 40, "team_change": 1000, "swap_steps": 1000}, key)
    with tf.Graph().as_default() as graph:
        sess = tf.Session(graph=graph)
        seats = build_team_trainers(sess, brains, names, ppo_params(
            "Tennis", self_play=sp, use_recurrent=True, memory_size=16, sequence_length=4), PPOTrainer, True, seed=0)
        sess.run(tf.global_variables_initializer())
    graph.finalize()
    opponent, group = seats["Tennis?team=1"], seats["Tennis?team=1"].group
    info = {n: info_of(3, seed=k) for k, n in enumerate(names)}
    first = opponent.take_action(info)[1]
    assert first.shape == (3, 16) and np.abs(first).sum() > 0
    np.testing.assert_array_equal(group.actor.policy.memories(info_of(3, seed=1)), first)  # the next decision's start
    ended = info_of(3, seed=1)
    ended.local_done[0] = True  # agent 0 ends its episode and asks for its next decision: zeros
    kept = group.actor.policy.memories(ended)
    assert not kept[0].any() and np.array_equal(kept[1:], first[1:])


# ------------------------------------------------------------------ Tennis over gRPC


def run_learn(cwd, config, *args):
    """``unityagents-learn`` (``learn_r22.main``, in this process: ``conftest.in_process``)."""
    return in_process(learn_r22.main, cwd, [config, "--env=Tennis", "--run-id=t", "--seed=1",
                                            f"--base-port={free_port()}", *args], timeout=300)


def latest_state(run):
    files = glob.glob(os.path.join(run, "checkpoints", "model-*.cptk*.json"))
    newest = max(files, key=lambda p: int(p.split("model-")[1].split(".cptk")[0]))
    return json.load(open(newest))["trainers"]


@pytest.mark.slow
def test_tennis_over_grpc_trains_its_two_teams_in_turn_with_elo_and_resumes_its_schedule(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = write(tmp_path / "tennis.yaml", R22_TENNIS)
    code, out = run_learn(tmp_path, config)
    assert code == 0, out[-3000:]
    assert "Self-play: the learning team changes from Tennis?team=0 to Tennis?team=1" in out, out[-3000:]
    assert "Self-play: the learning team changes from Tennis?team=1 to Tennis?team=0" in out, out[-3000:]
    run = tmp_path / "results" / "t"
    assert (run / "Tennis.onnx").is_file()
    events = EventAccumulator(str(run / "Tennis")).Reload()
    elo = [e.value for e in events.Scalars("Self-play/ELO")]
    teams = {e.value for e in events.Scalars("Self-play/Learning Team")}
    assert len(elo) >= 5 and len(set(elo)) > 1 and teams == {0.0, 1.0}
    state = latest_state(str(run))
    assert state["Tennis?team=0"] == {**state["Tennis?team=1"], "team": 0}  # one schedule for both teams
    first = state["Tennis?team=0"]["self_play"]
    assert len(first["team_changes"]) == 2 and first["snapshots_taken"] >= 4 and first["elos"][-1] != 1000.0

    # The resume keeps the saved pool, schedule and rating (Release 22: the saved ELO beats initial_elo).
    more = R22_TENNIS.replace("max_steps: 5000", "max_steps: 6500").replace("initial_elo: 1000", "initial_elo: 2000")
    code, out = run_learn(tmp_path, write(tmp_path / "more.yaml", more), "--resume")
    assert code == 0, out[-3000:]
    again = latest_state(str(run))["Tennis?team=0"]["self_play"]
    assert again["team_changes"][:2] == first["team_changes"] and len(again["team_changes"]) == 3
    assert again["snapshots_taken"] > first["snapshots_taken"]
    resumed = [e.value for e in EventAccumulator(str(run / "Tennis")).Reload().Scalars("Self-play/ELO")][len(elo):]
    assert resumed and max(abs(e - first["elos"][-1]) for e in resumed) < 50, (resumed, first["elos"][-1])
