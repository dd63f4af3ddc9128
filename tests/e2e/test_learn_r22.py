"""unityagents-learn: a Release 22 run config and command line build the same run as learn.py.

Config translation, precedence and refusals run in-process through ``--dry-run`` (nothing is
launched); one slow test trains built-in 3DBall, lays out the results folder and resumes it.
"""
from __future__ import annotations

import json
import os

import pytest
import yaml

import learn_r22
from runner.settings.environment_parameters import EnvironmentParameters, parse_environment_parameters
from runner.settings.run_config import RunConfigError
from runner.settings.trainer_config import load_trainer_config
from tests.conftest import free_port, in_process, write
from trainers.trainer.registry import load_registry

R22_3DBALL = """
behaviors:
  Ball3DBrain:
    trainer_type: ppo
    hyperparameters: {batch_size: 256, buffer_size: 1536, learning_rate: 2.0e-4, beta: 1.0e-3, epsilon: 0.25,
                      lambd: 0.9, num_epoch: 10, learning_rate_schedule: constant}
    network_settings: {normalize: true, hidden_units: 128, num_layers: 2}
    reward_signals: {extrinsic: {gamma: 0.98, strength: 1.0}}
    max_steps: 1.5e5
    time_horizon: 128
    summary_freq: 2400
"""
#: What learn.py's trainer_configurations.yaml says for the same training.
FLAT_3DBALL = """
Ball3DBrain:
    trainer: ppo
    batch_size: 256
    buffer_size: 1536
    learning_rate: 2.0e-4
    beta: 1.0e-3
    epsilon: 0.25
    lambd: 0.9
    num_epoch: 10
    learning_rate_schedule: constant
    normalize: true
    hidden_units: 128
    num_layers: 2
    gamma: 0.98
    max_steps: 1.5e5
    time_horizon: 128
    summary_freq: 2400
"""


def dry_run(tmp_path, monkeypatch, capsys, config_text, *args):
    """``unityagents-learn <file> --env 3DBall --dry-run ...`` in ``tmp_path``: (exit code, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "run.yaml", config_text) if config_text is not None else None
    code = learn_r22.main(([path] if path else []) + ["--env=3DBall", "--dry-run", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_release_22_config_translates_into_learn_pys_validated_settings(tmp_path):
    registry = load_registry()
    options = {flag: None for flag in learn_r22.FLAGS}
    _, r22, _, _, _ = learn_r22.load(write(tmp_path / "r22.yaml", R22_3DBALL), options, None, registry)
    flat = load_trainer_config(write(tmp_path / "flat.yaml", FLAT_3DBALL), registry)
    assert r22.blocks["Ball3DBrain"].parameters == flat.blocks["Ball3DBrain"].parameters
    assert r22.blocks["Ball3DBrain"].trainer_class is flat.blocks["Ball3DBrain"].trainer_class


def test_omitted_beta_and_epsilon_schedules_follow_the_learning_rates_as_in_release_22(tmp_path):
    registry = load_registry()
    options = {flag: None for flag in learn_r22.FLAGS}
    linear = R22_3DBALL.replace("learning_rate_schedule: constant", "learning_rate_schedule: linear")
    _, r22, _, _, _ = learn_r22.load(write(tmp_path / "r22.yaml", linear), options, None, registry)
    params = r22.blocks["Ball3DBrain"].parameters
    assert (params["beta_schedule"], params["epsilon_schedule"]) == ("linear", "linear")
    _, r22, _, _, _ = learn_r22.load(write(tmp_path / "r22.yaml", R22_3DBALL), options, None, registry)
    params = r22.blocks["Ball3DBrain"].parameters
    assert (params["beta_schedule"], params["epsilon_schedule"]) == ("constant", "constant")


def test_a_signals_network_depth_reaches_the_signal(tmp_path):
    """PyramidsRND's ``rnd.network_settings: {hidden_units: 64, num_layers: 3}``."""
    text = R22_3DBALL.replace("reward_signals: {extrinsic: {gamma: 0.98, strength: 1.0}}",
                              "reward_signals: {extrinsic: {gamma: 0.98}, rnd: {strength: 0.01, "
                              "network_settings: {hidden_units: 64, num_layers: 3}}}")
    _, config, _, _, _ = learn_r22.load(write(tmp_path / "r22.yaml", text), {flag: None for flag in learn_r22.FLAGS},
                                        None, load_registry())
    rnd = config.blocks["Ball3DBrain"].parameters["reward_signals"]["rnd"]
    assert (rnd["encoding_size"], rnd["num_layers"]) == (64, 3)


def test_gail_and_behavioral_cloning_reach_the_trainers_keys(tmp_path):
    """Release 22's ``gail`` signal and ``behavioral_cloning`` block become the PPO trainer's own, checked there."""
    text = R22_3DBALL.replace(
        "reward_signals: {extrinsic: {gamma: 0.98, strength: 1.0}}",
        "reward_signals: {extrinsic: {gamma: 0.98, strength: 1.0},\n"
        "                     gail: {strength: 0.01, demo_path: x.demo, use_actions: true, encoding_size: 32}}\n"
        "    behavioral_cloning: {demo_path: x.demo, strength: 0.5, steps: 10000}")
    options = {flag: None for flag in learn_r22.FLAGS}
    _, config, _, _, _ = learn_r22.load(write(tmp_path / "r22.yaml", text), options, None, load_registry())
    params = config.blocks["Ball3DBrain"].parameters
    gail = params["reward_signals"]["gail"]
    assert (gail["demo_path"], gail["strength"], gail["use_actions"], gail["encoding_size"]) == (
        "x.demo", 0.01, True, 32)
    assert params["behavioral_cloning"]["strength"] == 0.5 and params["behavioral_cloning"]["steps"] == 10000
    with pytest.raises(RunConfigError, match="behavioral_cloning.strenght.*Did you mean 'strength'"):
        learn_r22.load(write(tmp_path / "bad.yaml", text.replace("strength: 0.5", "strenght: 0.5")), options, None,
                       load_registry())


def test_dry_run_prints_the_resolved_run_with_release_22_defaults_and_launches_nothing(tmp_path, monkeypatch, capsys):
    code, out, err = dry_run(tmp_path, monkeypatch, capsys, R22_3DBALL.replace("    time_horizon: 128\n", ""),
                             "--run-id=r", "--base-port=6100")
    assert code == 0, err
    resolved = yaml.safe_load(out)
    ball = resolved["behaviors"]["Ball3DBrain"]
    assert ball["time_horizon"] == 64 and ball["checkpoint_interval"] == 500000  # Release 22's defaults
    assert ball["hyperparameters"]["num_epoch"] == 10 and ball["max_steps"] == 150000
    assert resolved["env_settings"]["base_port"] == 6100 and resolved["env_settings"]["env_path"] == "3DBall"
    assert resolved["checkpoint_settings"]["run_id"] == "r"
    assert not (tmp_path / "results").exists()


def test_the_command_line_beats_the_file_which_beats_the_defaults(tmp_path, monkeypatch, capsys):
    text = R22_3DBALL + "env_settings: {base_port: 6000, num_envs: 3}\ncheckpoint_settings: {run_id: fromfile}\n"
    code, out, err = dry_run(tmp_path, monkeypatch, capsys, text, "--base-port=7000")
    assert code == 0, err
    resolved = yaml.safe_load(out)
    assert resolved["env_settings"]["base_port"] == 7000  # command line over file
    assert resolved["env_settings"]["num_envs"] == 3  # file over default
    assert resolved["env_settings"]["timeout_wait"] == 60  # default
    assert resolved["checkpoint_settings"]["run_id"] == "fromfile"


BAD = {
    "typo": (R22_3DBALL.replace("batch_size: 256", "batch_sise: 256"),
             "behaviors.Ball3DBrain.hyperparameters.batch_sise: unknown key", "Did you mean 'batch_size'?"),
    "wrong type": (R22_3DBALL.replace("max_steps: 1.5e5", "max_steps: lots"),
                   "behaviors.Ball3DBrain.max_steps: expected an integer", "'lots'"),
    "unknown top key": (R22_3DBALL + "behaviours: {}\n", "behaviours: unknown key", "Did you mean 'behaviors'?"),
    "inverted bounds": (R22_3DBALL + "environment_parameters:\n  ball_scale: {sampler_type: uniform, "
                        "sampler_parameters: {min_value: 2, max_value: 1}}\n",
                        "environment_parameters.ball_scale.sampler_parameters: min_value 2.0 is greater", "Swap"),
    "missing bound": (R22_3DBALL + "environment_parameters:\n  ball_scale: {sampler_type: gaussian, "
                      "sampler_parameters: {mean: 1}}\n",
                      "environment_parameters.ball_scale.sampler_parameters.st_dev: missing", "gaussian"),
    "lesson without value": (R22_3DBALL + "environment_parameters:\n  ball_scale:\n    curriculum:\n"
                             "      - {name: a, completion_criteria: {behavior: Ball3DBrain, threshold: 0.5}}\n"
                             "      - {name: b, value: 2}\n",
                             "environment_parameters.ball_scale.curriculum[0].value: missing", "a number or"),
    "criteria on the last lesson": (R22_3DBALL + "environment_parameters:\n  ball_scale:\n    curriculum:\n"
                                    "      - {name: a, value: 1, completion_criteria: {behavior: Ball3DBrain}}\n"
                                    "      - {name: b, value: 2, completion_criteria: {behavior: Ball3DBrain}}\n",
                                    "curriculum[1].completion_criteria: the last lesson never ends", "Remove"),
    "a feature not built": (R22_3DBALL.replace("num_epoch: 10,", "num_epoch: 10, shared_critic: true,"),
                            "behaviors.Ball3DBrain.hyperparameters.shared_critic:", "Remove the key"),
    "init_path without a checkpoint": (
        R22_3DBALL.replace("trainer_type: ppo", "trainer_type: ppo\n    init_path: a.pt"),
        "behaviors.Ball3DBrain.init_path:", "PyTorch checkpoint"),
    "self_play team_change below swap_steps": (
        R22_3DBALL.replace("trainer_type: ppo", "trainer_type: ppo\n    self_play: {team_change: 5, swap_steps: 10}"),
        "behaviors.Ball3DBrain.self_play.team_change: 5 is smaller than swap_steps 10", "Raise team_change"),
    "self_play window below 1": (
        R22_3DBALL.replace("trainer_type: ppo", "trainer_type: ppo\n    self_play: {window: 0}"),
        "behaviors.Ball3DBrain.self_play.window: must be >= 1", "window: 1"),
    "self_play ratio outside [0, 1]": (
        R22_3DBALL.replace("trainer_type: ppo",
                           "trainer_type: ppo\n    self_play: {play_against_latest_model_ratio: 2}"),
        "behaviors.Ball3DBrain.self_play.play_against_latest_model_ratio: must be a probability", "Use 0"),
    "memory on a trainer without one": (
        R22_3DBALL.replace("num_layers: 2}", "num_layers: 2, memory: {sequence_length: 16}}").replace(
            "trainer_type: ppo", "trainer_type: poca").replace(
            "{batch_size: 256, buffer_size: 1536, learning_rate: 2.0e-4, beta: 1.0e-3, epsilon: 0.25,\n"
            "                      lambd: 0.9, num_epoch: 10, learning_rate_schedule: constant}", "{batch_size: 64}"),
        "behaviors.Ball3DBrain.network_settings.memory: the poca trainer has no recurrent policy", "trainer_type: ppo"),
    "an unknown trainer type": (R22_3DBALL.replace("trainer_type: ppo", "trainer_type: pocaa"),
                                "behaviors.Ball3DBrain.trainer_type: 'pocaa' is not a Release 22 trainer type",
                                "Did you mean 'poca'?"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_config_exits_2_with_one_line_naming_the_file_the_key_and_the_fix(tmp_path, monkeypatch, capsys, case):
    text, where, fix = BAD[case]
    code, out, err = dry_run(tmp_path, monkeypatch, capsys, text)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "run.yaml" in lines[0] and where in lines[0] and fix in lines[0], lines[0]


def test_sac_goes_through_the_trainer_registry(tmp_path):
    text = R22_3DBALL.replace("trainer_type: ppo", "trainer_type: sac").replace(
        "{batch_size: 256, buffer_size: 1536, learning_rate: 2.0e-4, beta: 1.0e-3, epsilon: 0.25,\n"
        "                      lambd: 0.9, num_epoch: 10, learning_rate_schedule: constant}", "{batch_size: 64}")
    options = {flag: None for flag in learn_r22.FLAGS}
    registry = load_registry()
    registry.trainers.pop("sac", None)
    with pytest.raises(RunConfigError, match="'sac' is a Release 22 trainer type that this project has not built"):
        learn_r22.load(write(tmp_path / "sac.yaml", text), options, None, registry)
    registry.register("sac", registry.get("ppo"))  # a stand-in: the name reaches the registered class
    run = learn_r22.load(write(tmp_path / "sac.yaml", text), options, None, registry)[0]
    assert [b.brain.parameters["trainer"] for b in run.behaviors.values()] == ["sac"]
    # hyperparameters: holds that class's own declared keys, checked as its flat block would be
    with pytest.raises(RunConfigError) as error:
        learn_r22.load(write(tmp_path / "sac.yaml", text.replace("{batch_size: 64}", "{batch_size: 64, tau: 0.1}")),
                       options, None, registry)
    assert "hyperparameters.tau" in str(error.value) and "not built" not in str(error.value)


def test_run_folder_rules_resume_force_and_unwritable(tmp_path, monkeypatch, capsys):
    code, _, err = dry_run(tmp_path, monkeypatch, capsys, R22_3DBALL, "--run-id=nope", "--resume")
    assert code == 2 and "--resume: there is no run results/nope to resume" in err
    (tmp_path / "results" / "old").mkdir(parents=True)
    code, _, err = dry_run(tmp_path, monkeypatch, capsys, R22_3DBALL, "--run-id=old", "--resume", "--force")
    assert code == 2 and "--resume and --force contradict" in err
    code, _, err = dry_run(tmp_path, monkeypatch, capsys, R22_3DBALL, "--run-id=old")
    assert code == 2 and "already has data" in err and "--resume" in err and "--force" in err
    (tmp_path / "afile").write_text("")
    code, _, err = dry_run(tmp_path, monkeypatch, capsys, R22_3DBALL, "--results-dir=afile/results")
    assert code == 2 and "checkpoint_settings.results_dir: cannot write in afile" in err


def test_samplers_are_seeded_redrawn_per_reset_and_curricula_advance_per_parameter():
    raw = {"scale": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 1, "max_value": 2}},
           "size": {"curriculum": [
               {"name": "small", "value": 1.0,
                "completion_criteria": {"behavior": "A", "measure": "progress", "threshold": 0.5}},
               {"name": "big", "value": {"sampler_type": "constant", "sampler_parameters": {"value": 3.0}}}]},
           "other": {"curriculum": [
               {"name": "x", "value": 5, "completion_criteria": {"behavior": "B", "measure": "progress",
                                                                 "threshold": 0.5}},
               {"name": "y", "value": 6}]}}
    first, again = (EnvironmentParameters(parse_environment_parameters("f", raw), seed=7) for _ in range(2))
    draws = [first.get_config()["scale"] for _ in range(3)]
    assert draws == [again.get_config()["scale"] for _ in range(3)]  # seeded: run seed + lesson index
    assert len(set(draws)) == 3 and all(1 <= d <= 2 for d in draws)  # a new value at every reset

    class Trainer:
        def __init__(self, step):
            self.get_step, self.get_max_steps, self.get_last_reward = step, 100.0, 0.0

    trainers = {"A?team=0": Trainer(60), "B": Trainer(10)}
    first.bind(lambda: trainers)
    assert first.lesson_numbers() == {"scale": 0, "size": 0, "other": 0}
    assert first.increment_lesson() is True
    assert first.lesson_numbers() == {"scale": 0, "size": 1, "other": 0}  # each parameter on its own track
    assert first.get_config()["size"] == 3.0 and first.get_config()["other"] == 5.0


def test_scene_behaviors_missing_from_the_config_train_with_defaults_and_extra_ones_warn(tmp_path, caplog):
    from unityagents.brain import BrainParameters

    brain = BrainParameters("Other?team=0", {
        "stateSize": 8, "actionSize": 2, "memorySize": 0, "cameraResolutions": [], "actionDescriptions": ["", ""],
        "actionSpaceType": 1, "stateSpaceType": 1})
    options = {flag: None for flag in learn_r22.FLAGS}
    _, config, _, _, _ = learn_r22.load(write(tmp_path / "r22.yaml", R22_3DBALL), options, None, load_registry())
    settings = config.settings_for_environment({brain.brain_name: brain}, [brain.brain_name])
    assert "behaviors.Other: the environment has this behaviour but the config lists no settings for it; it " \
        "trains with Release 22's defaults" in caplog.text
    defaults = settings[brain.brain_name].parameters
    assert defaults["trainer"] == "ppo" and defaults["batch_size"] == 1024 and defaults["max_steps"] == 500000
    with_default = R22_3DBALL.replace("behaviors:", "default_settings: {max_steps: 1000}\nbehaviors:")
    _, config, _, _, _ = learn_r22.load(write(tmp_path / "d.yaml", with_default), options, None, load_registry())
    settings = config.settings_for_environment({brain.brain_name: brain}, [brain.brain_name])
    assert settings[brain.brain_name].parameters["max_steps"] == 1000  # default_settings, translated
    assert "behaviors.Ball3DBrain: the environment has no behaviour of that name" in caplog.text


@pytest.mark.slow
def test_unityagents_learn_trains_3dball_lays_out_the_results_folder_and_resumes(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = """
behaviors:
  3DBall:
    hyperparameters: {batch_size: 64, buffer_size: 480, num_epoch: 2, beta_schedule: constant,
                      epsilon_schedule: constant}
    network_settings: {normalize: true, hidden_units: 16, num_layers: 1}
    checkpoint_interval: 1200
    max_steps: {max_steps}
    time_horizon: 32
    summary_freq: 600
environment_parameters:
  ball_scale: {sampler_type: gaussian, sampler_parameters: {mean: 1.0, st_dev: 0.1}}
"""

    def run(*args, max_steps):
        path = write(tmp_path / "3DBall.yaml", config.replace("{max_steps}", str(max_steps)))
        argv = [path, "--env=3DBall", "--run-id=ball", f"--base-port={free_port()}", *args]
        return in_process(learn_r22.main, tmp_path, argv, timeout=300)

    code, out = run(max_steps=2400)
    assert code == 0, out
    run_dir = tmp_path / "results" / "ball"
    for name in ("configuration.yaml", "run_logs/timers.json", "run_logs/training_status.json", "3DBall.onnx"):
        assert (run_dir / name).is_file(), name
    # Release 22's names: the behaviour's own agent steps, the number the status file and TensorBoard show.
    assert sorted(p.name for p in (run_dir / "3DBall").glob("*.onnx")) == ["3DBall-1200.onnx", "3DBall-2400.onnx"]
    resolved = yaml.safe_load((run_dir / "configuration.yaml").read_text())
    assert resolved["behaviors"]["3DBall"]["max_steps"] == 2400
    status = json.loads((run_dir / "run_logs" / "training_status.json").read_text())
    assert status["ball_scale"] == {"lesson_num": 0}
    assert [c["steps"] for c in status["3DBall"]["checkpoints"]] == [1200, 2400]
    assert [os.path.basename(c["file_path"]) for c in status["3DBall"]["checkpoints"]] == [
        "3DBall-1200.onnx", "3DBall-2400.onnx"]
    assert status["3DBall"]["final_checkpoint"]["file_path"].endswith("results/ball/3DBall.onnx")
    events = EventAccumulator(str(run_dir / "3DBall"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"Environment/Cumulative Reward", "Environment/Episode Length", "Environment/Lesson Number/ball_scale",
            "Policy/Entropy", "Policy/Learning Rate", "Policy/Extrinsic Reward", "Policy/Extrinsic Value Estimate",
            "Losses/Policy Loss", "Losses/Value Loss"} <= tags, sorted(tags)
    assert [e.step for e in events.Scalars("Environment/Cumulative Reward")] == [600, 1200, 1800, 2400]

    # A run written before the names carried the behaviour's steps (environment steps: 100, 200) resumes too.
    for agent_steps, env_steps in ((1200, 100), (2400, 200)):
        (run_dir / "3DBall" / f"3DBall-{agent_steps}.onnx").rename(run_dir / "3DBall" / f"3DBall-{env_steps}.onnx")
    code, out = run("--resume", max_steps=3600)
    assert code == 0, out
    assert "Loading the model from results/ball/checkpoints/model-200.cptk" in out
    assert "3DBall?team=0: Step: 3000." in out and "Step: 600." not in out  # continues, not from 0
    assert (run_dir / "3DBall" / "3DBall-3600.onnx").is_file() and (run_dir / "3DBall" / "3DBall-200.onnx").is_file()
    status = json.loads((run_dir / "run_logs" / "training_status.json").read_text())
    assert [c["steps"] for c in status["3DBall"]["checkpoints"]][-1] == 3600


@pytest.mark.slow
def test_a_run_shorter_than_summary_freq_ends_with_its_summary(tmp_path):
    """The statistics gathered since the last summary are written when the run ends, at the step reached:
    a run of 720 agent-steps with a summary period of 12,000 still has its reward in TensorBoard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    path = write(tmp_path / "3DBall.yaml", """
behaviors:
  3DBall:
    hyperparameters: {batch_size: 64, buffer_size: 240, num_epoch: 1}
    network_settings: {hidden_units: 16, num_layers: 1}
    max_steps: 720
    time_horizon: 32
    summary_freq: 12000
""")
    code, out = in_process(learn_r22.main, tmp_path, [path, "--env=3DBall", "--run-id=short",
                                                       f"--base-port={free_port()}"], timeout=300)
    assert code == 0, out
    events = EventAccumulator(str(tmp_path / "results" / "short" / "3DBall")).Reload()
    assert [e.step for e in events.Scalars("Environment/Cumulative Reward")] == [720]
    assert "Losses/Policy Loss" in events.Tags()["scalars"]
    assert "3DBall?team=0: Step: 720." in out
