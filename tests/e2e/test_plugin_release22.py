"""Plugin trainers configured in Release 22 run configs, as the seed's plugin document shows.

The example plugin's ``a2c/a2c_3DBall.yaml`` and ``dqn/dqn_basic.yaml`` are Release 22 files whose
``hyperparameters:`` hold the trainer's own declared keys; both config formats are read through
the same declarations, so a plugin's mistake gets the same error as a built-in's.
"""
import os
import textwrap

import pytest
import yaml

import learn_r22
from runner.settings.run_config import RunConfigError
from runner.settings.trainer_config import TrainerConfigError, load_trainer_config
from tests.conftest import free_port, in_process, learn_in_process, write
from tests.e2e.test_plugins import EXAMPLE, PACKAGE, PLUGIN_ENTRY_POINTS, write_dist_info
from trainers.trainer.registry import load_registry

A2C = os.path.join(PACKAGE, "a2c", "a2c_3DBall.yaml")
DQN = os.path.join(PACKAGE, "dqn", "dqn_basic.yaml")
#: The hyperparameters of the seed plugin's A2C and DQN (ML-Agents' A2CSettings and DQNSettings over
#: Release 22's on- and off-policy settings) and their defaults.
SEED_A2C = {"batch_size": 1024, "buffer_size": 10240, "learning_rate": 3.0e-4, "learning_rate_schedule": "linear",
            "beta": 5.0e-3, "beta_schedule": "linear", "lambd": 0.95, "num_epoch": 1, "shared_critic": False}
SEED_DQN = {"batch_size": 128, "buffer_size": 50000, "learning_rate": 3.0e-4, "learning_rate_schedule": "constant",
            "tau": 0.005, "save_replay_buffer": False, "exploration_schedule": "linear",
            "exploration_initial_eps": 0.1, "exploration_final_eps": 0.05}
#: Release 22's keys of every trainer (TrainerSettings) set away from their defaults, as a behaviour's block.
COMMON_KEYS = """
    network_settings: {normalize: true, hidden_units: 32, num_layers: 1, vis_encode_type: simple}
    reward_signals: {extrinsic: {gamma: 0.9, strength: 1.0}}
    keep_checkpoints: 3
    even_checkpoints: false
    checkpoint_interval: 2000
    max_steps: 4000
    time_horizon: 10
    summary_freq: 500
    threaded: true
"""


@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    """The example plugin, installed into a temporary site directory on ``sys.path``."""
    site = tmp_path / "site"
    write_dist_info(site, "unityagents_trainer_plugin", PLUGIN_ENTRY_POINTS)
    monkeypatch.syspath_prepend(EXAMPLE)
    monkeypatch.syspath_prepend(str(site))
    return site


def options():
    return {flag: None for flag in learn_r22.FLAGS}


def test_the_shipped_files_are_release_22_with_the_seeds_names(plugin_site):
    registry = load_registry()
    for path, behavior, trainer, names in [(A2C, "3DBall", "a2c", SEED_A2C), (DQN, "Basic", "dqn", SEED_DQN)]:
        raw = yaml.safe_load(open(path))
        assert list(raw["behaviors"]) == [behavior]
        given = raw["behaviors"][behavior]["hyperparameters"]
        run = learn_r22.load(path, options(), None, registry)[0]
        block = run.behaviors[behavior].brain.parameters
        assert block["trainer"] == trainer
        assert {k: block[k] for k in given if k in names} == {k: v for k, v in given.items() if k in names}
        assert block["max_steps"] == raw["behaviors"][behavior]["max_steps"]
        assert block["time_horizon"] == raw["behaviors"][behavior]["time_horizon"]
        assert block["hidden_units"] == raw["behaviors"][behavior]["network_settings"]["hidden_units"]
        assert block["gamma"] == raw["behaviors"][behavior]["reward_signals"]["extrinsic"]["gamma"]


@pytest.mark.parametrize("trainer, defaults", [("a2c", SEED_A2C), ("dqn", SEED_DQN)])
def test_the_seeds_hyperparameters_and_defaults(plugin_site, tmp_path, trainer, defaults):
    """A behaviour that names only its trainer type trains with the seed plugin's settings."""
    r22 = write(tmp_path / "r22.yaml", f"behaviors:\n  B:\n    trainer_type: {trainer}\n")
    run, config = learn_r22.load(r22, options(), None, load_registry())[:2]
    assert {k: v for k, v in run.behaviors["B"].settings["hyperparameters"].items() if k in defaults} == defaults
    parameters = config.settings_for("B").parameters
    assert {k: parameters[k] for k in defaults} == defaults
    if trainer == "dqn":  # one gradient step per agent step, after the first minibatch, then a soft target update
        from unityagents_trainer_plugin.dqn import DQNTrainer

        assert (parameters["train_every"], parameters["gradient_steps"], parameters["learning_starts"]) == (1, 1, 0)
        assert parameters["target_update_interval"] == 1
        assert DQNTrainer.hyperparameters["target_update_interval"].default == 1


@pytest.mark.parametrize("trainer, brain", [("a2c", "BALL_LIKE"), ("dqn", "BASIC_LIKE"), ("ppo", None),
                                            ("sac", None)])
def test_every_trainer_takes_release_22s_common_keys(plugin_site, tmp_path, trainer, brain):
    """Release 22's keys of every trainer, a plugin's too, reach it with Release 22's meaning."""
    r22 = write(tmp_path / "r22.yaml", f"behaviors:\n  B:\n    trainer_type: {trainer}\n"
                                       + textwrap.indent(textwrap.dedent(COMMON_KEYS), "    "))
    run, config = learn_r22.load(r22, options(), None, load_registry())[:2]
    settings = run.behaviors["B"].settings
    assert (settings["keep_checkpoints"], settings["checkpoint_interval"]) == (3, 2000)
    parameters = config.settings_for("B").parameters
    assert {k: parameters[k] for k in ("max_steps", "time_horizon", "summary_freq", "threaded", "hidden_units",
                                       "num_layers", "normalize", "gamma")} == {
        "max_steps": 4000, "time_horizon": 10, "summary_freq": 500, "threaded": True, "hidden_units": 32,
        "num_layers": 1, "normalize": True, "gamma": 0.9}
    if brain is not None:  # the trainer itself reads them
        from tests.e2e import test_plugins

        cls = config.settings_for("B").trainer_class
        built = test_plugins.make_trainer(cls, getattr(test_plugins, brain), **parameters)
        assert (built.settings.time_horizon, built.settings.hidden_units, built.settings.gamma) == (10, 32, 0.9)


def test_every_registered_trainer_declares_time_horizon(plugin_site):
    registry = load_registry()
    for name in registry.names():
        assert "time_horizon" in registry.get(name).hyperparameters, name


def test_the_flat_format_takes_time_horizon_for_every_trainer(plugin_site, tmp_path):
    flat = write(tmp_path / "flat.yaml", "default:\n    time_horizon: 16\nA:\n    trainer: dqn\n"
                                         "B:\n    trainer: a2c\n    time_horizon: 8\n")
    config = load_trainer_config(flat, load_registry())
    assert config.settings_for("A").parameters["time_horizon"] == 16
    assert config.settings_for("B").parameters["time_horizon"] == 8


def test_a2c_refuses_more_than_one_epoch_in_both_formats(plugin_site, tmp_path):
    registry = load_registry()
    expected = "brain 'B', key 'num_epoch': A2C uses each sample once, so it makes one pass over the steps of an " \
               "update, got 3. Set num_epoch: 1"
    r22 = write(tmp_path / "r22.yaml", "behaviors:\n  B:\n    trainer_type: a2c\n    hyperparameters: {num_epoch: 3}\n")
    with pytest.raises(TrainerConfigError) as error:
        learn_r22.load(r22, options(), None, registry)
    assert expected in str(error.value)
    flat = write(tmp_path / "flat.yaml", "B:\n    trainer: a2c\n    num_epoch: 3\n")
    with pytest.raises(TrainerConfigError) as error:
        load_trainer_config(flat, registry)
    assert expected in str(error.value)


def test_the_release_22_block_trains_as_the_learn_py_block(plugin_site):
    """The shipped learn.py files say the same training: every key the trainer reads is equal."""
    registry = load_registry()
    for r22, flat, behavior, brain in [(A2C, "learn_3DBall.yaml", "3DBall", "Ball3DBrain"),
                                        (DQN, "learn_Basic.yaml", "Basic", "BasicBrain")]:
        run = learn_r22.load(r22, options(), None, registry)[0]
        folder = os.path.dirname(r22)
        old = load_trainer_config(os.path.join(folder, flat), registry).settings_for(brain).parameters
        new = run.behaviors[behavior].brain.parameters
        differ = {k: (old[k], new.get(k)) for k in old if old[k] != new.get(k)}
        # DQN: steps_per_update 1 (and Release 22's reward_signal_steps_per_update, which follows it) takes
        # the place of train_every 1 and gradient_steps 1.
        assert set(differ) <= {"steps_per_update", "reward_signal_steps_per_update", "train_every"}, differ


@pytest.mark.parametrize("trainer", ["a2c", "dqn", "ppo"])
def test_a_mistyped_key_gets_the_same_did_you_mean_in_both_formats(plugin_site, tmp_path, trainer):
    registry = load_registry()
    r22 = write(tmp_path / "r22.yaml", f"behaviors:\n  B:\n    trainer_type: {trainer}\n"
                                       "    hyperparameters: {learning_rat: 0.1}\n")
    with pytest.raises(RunConfigError) as error:
        learn_r22.load(r22, options(), None, registry)
    assert (f"behaviors.B.hyperparameters.learning_rat: unknown key of {trainer} hyperparameters. "
            "Did you mean 'learning_rate'? Its keys are: ") in str(error.value)
    flat = write(tmp_path / "flat.yaml", f"B:\n    trainer: {trainer}\n    learning_rat: 0.1\n")
    with pytest.raises(TrainerConfigError) as error:
        load_trainer_config(flat, registry)
    assert (f"brain 'B', key 'learning_rat': unknown hyperparameter for the {trainer} trainer. "
            "Did you mean 'learning_rate'? Its keys are: ") in str(error.value)
    wrong = write(tmp_path / "wrong.yaml", f"behaviors:\n  B:\n    trainer_type: {trainer}\n"
                                           "    hyperparameters: {learning_rate: fast}\n")
    with pytest.raises(RunConfigError, match=r"hyperparameters\.learning_rate: expected a number, got 'fast'"):
        learn_r22.load(wrong, options(), None, registry)


def test_learn_py_given_a_release_22_file_names_what_reads_it(plugin_site, tmp_path):
    code, out = learn_in_process(tmp_path, "3DBall", "--train", "--trainer-config", A2C)
    assert code == 1, out
    lines = [line for line in out.splitlines() if "Release 22 run config" in line]
    assert len(lines) == 1 and f"unityagents-learn {A2C} --env=<scene>" in lines[0], out
    assert "Traceback" not in out


def broken_site(tmp_path, monkeypatch, entry_points):
    site = tmp_path / "site"
    site.mkdir()
    (site / "untyped_plugin_for_test.py").write_text(textwrap.dedent("""
        from trainers.trainer.on_policy import ON_POLICY_HYPERPARAMETERS, OnPolicyTrainer

        class UntypedTrainer(OnPolicyTrainer):
            trainer_type = "untyped"
            hyperparameters = {**ON_POLICY_HYPERPARAMETERS, "learning_rate": 3.0e-4}
    """))
    write_dist_info(site, "broken_plugins_for_test", entry_points)
    monkeypatch.syspath_prepend(str(site))


@pytest.mark.parametrize("target, why", [
    ("no_such_module_for_test:Trainer", "ModuleNotFoundError: No module named 'no_such_module_for_test'"),
    ("untyped_plugin_for_test:UntypedTrainer", "declares the setting 'learning_rate' without a type (0.0003)"),
])
def test_a_broken_plugin_stops_the_run_in_one_line_naming_its_entry_point(tmp_path, monkeypatch, target, why):
    broken_site(tmp_path, monkeypatch, {"mine": target})
    entry_point = f"entry point mine = {target} in the group 'unityagents.trainers'"
    r22 = write(tmp_path / "r22.yaml", "behaviors:\n  3DBall:\n    trainer_type: mine\n")
    code, out = in_process(learn_r22.main, tmp_path, [r22, "--env=NoSuchBuild", "--run-id=x"])
    assert code == 1, out
    line = next(line for line in out.splitlines() if "behaviors.3DBall.trainer_type" in line)
    assert why in line and entry_point in line, out
    assert "NoSuchBuild" not in out and "Traceback" not in out  # before the environment starts

    flat = write(tmp_path / "flat.yaml", "Ball3DBrain:\n    trainer: mine\n")
    code, out = learn_in_process(tmp_path, "NoSuchBuild", "--train", "--trainer-config", flat)
    assert code == 1, out
    line = next(line for line in out.splitlines() if "key 'trainer'" in line)
    assert why in line and entry_point in line, out
    assert "Traceback" not in out


def with_scene_names(path, tmp_path, scene_name, **overrides):
    """The shipped file, with its behaviour under the scene's own name too and smaller budgets."""
    raw = yaml.safe_load(open(path))
    (behavior, settings), = raw["behaviors"].items()
    settings.update(overrides)
    raw["behaviors"][scene_name] = settings
    return write(tmp_path / os.path.basename(path), yaml.safe_dump(raw))


@pytest.mark.slow
@pytest.mark.parametrize("path, scene, brain, budget", [(A2C, "3DBall", "Ball3DBrain", 960),
                                                         (DQN, "Basic", "BasicBrain", 800)])
def test_unityagents_learn_trains_the_plugin_from_its_release_22_file(plugin_site, tmp_path, path, scene, brain,
                                                                      budget):
    config = with_scene_names(path, tmp_path, brain, max_steps=budget, summary_freq=budget // 2)
    argv = [config, f"--env={scene}", f"--run-id={scene.lower()}", f"--base-port={free_port()}"]
    code, out = in_process(learn_r22.main, tmp_path, argv, timeout=300)
    assert code == 0, out
    trainer = os.path.basename(os.path.dirname(path))
    run_dir = tmp_path / "results" / scene.lower()
    onnx = [p.name for p in run_dir.glob("*.onnx")]
    assert onnx, sorted(p.name for p in run_dir.iterdir())
    resolved = yaml.safe_load((run_dir / "configuration.yaml").read_text())
    assert {b["trainer_type"] for b in resolved["behaviors"].values()} == {trainer}


def test_dqn_reads_the_seeds_steps_per_update_and_refuses_what_it_does_not_build(plugin_site, tmp_path):
    from types import SimpleNamespace

    from unityagents_trainer_plugin.dqn import DQNTrainer

    def ratio(steps_per_update):
        return DQNTrainer.update_ratio(SimpleNamespace(settings=SimpleNamespace(steps_per_update=steps_per_update)))

    assert ratio(4.0) == (4, 1) and ratio(1.0) == (1, 1) and ratio(0.25) == (1, 4)
    text = open(DQN).read().replace("save_replay_buffer: false", "save_replay_buffer: true")
    with pytest.raises(RunConfigError, match=r"hyperparameters\.save_replay_buffer: must be false \(the replay "
                                             r"buffer is not saved with checkpoints"):
        learn_r22.load(write(tmp_path / "dqn.yaml", text), options(), None, load_registry())
