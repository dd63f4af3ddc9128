"""The one settings checker: each front end names a mistake alike, blocks become frozen dataclasses."""
import dataclasses

import pytest
from docopt import docopt

import learn
from runner.settings.run_config import RunConfigError, resolve
from runner.settings.trainer_config import trainer_config_from_dict
from trainers.imitation.bc import BEHAVIORAL_CLONING_PARAM
from trainers.reward_signals import REWARD_SIGNALS_PARAM
from trainers.settings.schema import CheckedSettings, Param, brain_key, check_block, key_path, positive
from trainers.settings.self_play import SELF_PLAY_PARAM
from trainers.trainer.base import COMMON_HYPERPARAMETERS, Trainer, TrainerConfigError
from trainers.trainer.registry import load_registry
from unityagents import UnityEnvironmentException
from unityagents.brain import BrainParameters

REGISTRY = load_registry()


def _flat_error(block):
    with pytest.raises(TrainerConfigError) as e:
        trainer_config_from_dict("t.yaml", {"Tennis": block}, REGISTRY)
    return str(e.value)


def _r22_error(block):
    with pytest.raises(RunConfigError) as e:
        resolve("run.yaml", {"behaviors": {"Tennis": {"trainer_type": "ppo", **block}}}, tuple(REGISTRY.names()))
    return str(e.value)


@pytest.mark.parametrize("block, key", [
    ({"self_play": {"swap_step": 10}}, "self_play.swap_step"),
    ({"self_play": {"window": 0}}, "self_play.window"),
    ({"behavioral_cloning": {"demo_path": "x.demo", "strenght": 1}}, "behavioral_cloning.strenght"),
    ({"behavioral_cloning": {"demo_path": "x.demo", "steps": "many"}}, "behavioral_cloning.steps"),
])
def test_a_nested_mistake_reads_the_same_in_both_config_formats_but_for_where_it_sits(block, key):
    flat, r22 = _flat_error(block), _r22_error(block)
    assert flat.startswith(f"t.yaml: brain 'Tennis', key '{key}': ")
    assert r22.startswith(f"run.yaml: behaviors.Tennis.{key}: ")
    assert flat.split(f"{key}': ", 1)[1] == r22.split(f"{key}: ", 1)[1]


@pytest.mark.parametrize("key", ["hidden_units", "num_layers"])
def test_a_release_22_signal_network_is_checked_as_the_signal_declares_it(key):
    error = _r22_error({"reward_signals": {"rnd": {"network_settings": {key: 0}}}})
    assert error == f"run.yaml: behaviors.Tennis.reward_signals.rnd.network_settings.{key}: must be > 0, got 0."


def test_a_command_line_option_and_a_yaml_key_are_coerced_alike():
    with pytest.raises(UnityEnvironmentException) as cli:
        learn.checked_options(docopt(learn.__doc__, argv=["Basic", "--num-envs", "two"]))
    yaml_error = _r22_error({"time_horizon": "two"})
    assert str(cli.value) == "--num-envs: expected an integer, got 'two' (str)."
    assert yaml_error.endswith(": expected an integer, got 'two' (str).")


SCHEMA = {"size": Param(int, 4, check=(positive, "> 0"), fix="Use 4."), "name": Param(str, required=True),
          "mode": Param(str, "fast", choices=("fast", "slow")), "items": Param(list, [1])}


@pytest.mark.parametrize("value, message", [
    ({"name": "a", "sise": 2}, "f.yaml: brain 'B', key 'block.sise': unknown key of block. Did you mean 'size'? "
                               "Its keys are: items, mode, name, size."),
    ({"size": 2}, "f.yaml: brain 'B', key 'block.name': required by block but missing. Add it."),
    ({"name": "a", "size": 0}, "f.yaml: brain 'B', key 'block.size': must be > 0, got 0. Use 4."),
    ({"name": "a", "size": "1.0e400"}, "key 'block.size': expected a finite number"),
    ({"name": "a", "mode": "slwo"}, "key 'block.mode': expected one of fast, slow, got 'slwo'. Did you mean 'slow'?"),
    ("fast", "f.yaml: brain 'B', key 'block': expected a block of key: value (size, name, mode, items), got 'fast'"),
])
def test_check_block_names_the_key_what_was_expected_what_arrived_and_the_fix(value, message):
    with pytest.raises(TrainerConfigError) as e:
        check_block(brain_key("f.yaml: brain 'B'", "block"), value, SCHEMA, "block")
    assert message in str(e.value)


def test_check_block_types_fills_copies_of_defaults_and_partial_blocks_ask_for_nothing():
    first = check_block(key_path("run.yaml", "a"), {"name": "x", "size": "1.0e1"}, SCHEMA, "a")
    assert first == {"size": 10, "name": "x", "mode": "fast", "items": [1]}
    first["items"].append(2)
    assert SCHEMA["items"].default == [1]  # each block gets its own copy
    assert check_block(key_path("run.yaml", "a"), {"size": 3}, SCHEMA, "a", partial=True) == {"size": 3}
    with pytest.raises(RunConfigError, match=r"^run\.yaml: a\.size: must be > 0"):
        check_block(key_path("run.yaml", "a"), {"name": "x", "size": -1}, SCHEMA, "a", error=RunConfigError)


class _Blocks(Trainer):
    """A trainer that declares the three nested blocks and builds nothing."""

    hyperparameters = {**COMMON_HYPERPARAMETERS, "reward_signals": REWARD_SIGNALS_PARAM,
                       "self_play": SELF_PLAY_PARAM, "behavioral_cloning": BEHAVIORAL_CLONING_PARAM}


def _trainer(**params):
    brain = BrainParameters("B", {"stateSize": 3, "actionSize": 2, "actionSpaceType": 1, "stateSpaceType": 1,
                                  "cameraResolutions": [], "actionDescriptions": []})
    return _Blocks(None, {"B": brain}, "B", params, training=False)


def test_trainer_settings_hold_each_nested_block_as_a_frozen_dataclass():
    settings = _trainer(max_steps="1.0e3", reward_signals={"rnd": {"strength": "1.0e-2"}, "extrinsic": None},
                        self_play={"save_steps": 100, "swap_steps": 50},
                        behavioral_cloning={"demo_path": "x.demo"}).settings
    assert settings.max_steps == 1000.0
    assert list(settings.reward_signals) == ["extrinsic", "rnd"]  # extrinsic first: its head is exported
    rnd = settings.reward_signals["rnd"]
    assert (rnd.strength, rnd.gamma, rnd.encoding_size) == (0.01, 0.99, 64)
    assert settings.self_play.team_change == 500 and settings.self_play.window == 10  # 5 x save_steps
    assert settings.behavioral_cloning.demo_path == "x.demo" and settings.behavioral_cloning.num_epoch == 3
    for block, key in ((settings, "max_steps"), (rnd, "gamma"), (settings.self_play, "window"),
                       (settings.behavioral_cloning, "steps")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(block, key, 0)
    assert _trainer().settings.reward_signals is None and _trainer().settings.self_play is None


def test_a_nested_block_a_direct_caller_passes_is_checked_when_read():
    with pytest.raises(TrainerConfigError, match=r"brain 'B', key 'self_play\.windw': unknown key of self_play"):
        assert _trainer(self_play={"windw": 3}).settings


def test_both_readers_make_one_typed_settings_object_that_the_trainer_takes_as_it_is():
    r22 = resolve("run.yaml", {"behaviors": {"Tennis": {"trainer_type": "ppo", "hyperparameters": {
        "learning_rate": "1.0e-3"}, "reward_signals": {"rnd": {"strength": 0.5}}}}}, tuple(REGISTRY.names()))
    flat = trainer_config_from_dict("t.yaml", {"Tennis": {"learning_rate": "1.0e-3",
                                                          "reward_signals": {"rnd": {"strength": 0.5}}}}, REGISTRY)
    ppo = REGISTRY.get("ppo")

    class Light(Trainer):  # PPO's declarations, no graph
        hyperparameters = ppo.hyperparameters

    brain = BrainParameters("Tennis", {"stateSize": 3, "actionSize": 2, "actionSpaceType": 1, "stateSpaceType": 1,
                                       "cameraResolutions": [], "actionDescriptions": []})
    for settings in (r22.behaviors["Tennis"].brain, flat.blocks["Tennis"]):
        checked = settings.parameters
        assert isinstance(checked, CheckedSettings) and checked.declared is ppo.hyperparameters
        assert checked.typed.learning_rate == 1e-3 and checked.typed.reward_signals["rnd"].strength == 0.5
        assert list(checked["reward_signals"]) == ["rnd"] and checked["reward_signals"]["rnd"]["gamma"] == 0.99
        with pytest.raises(TypeError):
            checked["learning_rate"] = 1.0  # read-only
        trainer = Light(None, {"Tennis": brain}, "Tennis", checked, training=False)
        assert trainer.settings is checked.typed and trainer.parameters["learning_rate"] == 1e-3
    copied = Light(None, {"Tennis": brain}, "Tennis", dict(checked), training=False)  # a direct caller's dict
    assert copied.settings is not checked.typed and copied.settings == checked.typed


def test_learn_py_builds_frozen_typed_run_options_once():
    options = learn._run_options(docopt(learn.__doc__, argv=["Basic", "--num-envs", "2", "--timeout", "30",
                                                             "--restarts-rate-limit-period-s", "1.5e1"]))
    assert (options.num_envs, options.timeout, options.save_freq, options.schedule) == (2, 30, 50000, "overlapped")
    assert options.restarts.rate_limit_period_s == 15.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.num_envs = 3


@pytest.mark.parametrize("trainer_type", ["ppo", "sac", "poca"])
def test_release_22s_threaded_reaches_the_trainer_settings_and_learn_py_takes_it_too(trainer_type):
    raw = {"behaviors": {"B": {"trainer_type": trainer_type, "threaded": True}}}
    assert resolve("run.yaml", raw, tuple(REGISTRY.names())).behaviors["B"].brain.parameters["threaded"] is True
    flat = trainer_config_from_dict("run.yaml", {"B": {"trainer": trainer_type, "threaded": True}}, REGISTRY)
    assert flat.settings_for("B").parameters["threaded"] is True
    assert resolve("run.yaml", {"behaviors": {"B": {"trainer_type": trainer_type}}},
                   tuple(REGISTRY.names())).behaviors["B"].brain.parameters["threaded"] is False
