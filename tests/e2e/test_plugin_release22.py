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
#: The hyperparameter names of the seed's examples.
SEED_A2C = {"batch_size", "buffer_size", "learning_rate", "beta", "lambd", "num_epoch", "learning_rate_schedule"}
SEED_DQN = {"learning_rate", "learning_rate_schedule", "batch_size", "buffer_size", "tau", "steps_per_update",
            "save_replay_buffer", "exploration_schedule", "exploration_initial_eps", "exploration_final_eps"}


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
    for path, behaviour, trainer, names in [(A2C, "3DBall", "a2c", SEED_A2C), (DQN, "Basic", "dqn", SEED_DQN)]:
        raw = yaml.safe_load(open(path))
        assert list(raw["behaviors"]) == [behaviour]
        assert names <= set(raw["behaviors"][behaviour]["hyperparameters"])
        run = learn_r22.load(path, options(), None, registry)[0]
        block = run.behaviors[behaviour].brain.parameters
        assert block["trainer"] == trainer
        assert {k: block[k] for k in names} == {k: raw["behaviors"][behaviour]["hyperparameters"][k] for k in names}
        assert block["max_steps"] == raw["behaviors"][behaviour]["max_steps"]
        assert block["hidden_units"] == raw["behaviors"][behaviour]["network_settings"]["hidden_units"]
        assert block["gamma"] == raw["behaviors"][behaviour]["reward_signals"]["extrinsic"]["gamma"]


def test_the_release_22_block_trains_as_the_learn_py_block(plugin_site):
    """The shipped learn.py files say the same training: every key the trainer reads is equal."""
    registry = load_registry()
    for r22, flat, behaviour, brain in [(A2C, "learn_3DBall.yaml", "3DBall", "Ball3DBrain"),
                                        (DQN, "learn_Basic.yaml", "Basic", "BasicBrain")]:
        run = learn_r22.load(r22, options(), None, registry)[0]
        folder = os.path.dirname(r22)
        old = load_trainer_config(os.path.join(folder, flat), registry).settings_for(brain).parameters
        new = run.behaviors[behaviour].brain.parameters
        differ = {k: (old[k], new.get(k)) for k in old if old[k] != new.get(k)}
        # DQN: steps_per_update 1 takes the place of train_every 1 and gradient_steps 1; A2C: a batch_size
        # of buffer_size is the whole buffer in one step, as none.
        assert set(differ) <= {"steps_per_update", "train_every", "batch_size"}, differ
        if "batch_size" in differ:
            assert differ["batch_size"] == (None, new["buffer_size"]), differ


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
    (behaviour, settings), = raw["behaviors"].items()
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
