"""trainer_configurations.yaml: every shipped block loads, and each known mistake is a clear error."""
import os

import pytest

from runner.settings.trainer_config import TrainerConfigError, load_trainer_config
from tests.conftest import load_config
from trainers.trainer.registry import load_registry
from unityagents.brain import BrainParameters

REGISTRY = load_registry()
ROOT = __file__.rsplit("/tests/", 1)[0]


def test_shipped_file_loads_and_every_block_resolves():
    config = load_trainer_config(os.path.join(ROOT, "trainer_configurations.yaml"), REGISTRY)
    assert config.blocks, "the shipped file has per-brain blocks"
    ball = config.settings_for("Ball3DBrain")
    assert ball.trainer_type == "ppo" and ball.parameters["normalize"] is True
    assert isinstance(ball.parameters["max_steps"], float)  # '3.0e5' is a string in YAML 1.1


def test_defaults_merge_aliases_and_yaml11_numbers(tmp_path):
    config = load_config(tmp_path, """
        default:
            max_steps: 1.0e6
            batch_size: 64
            hidden_units: 32
        A:
            batch_size: 128
            buffer_size: 2.0e3
        B: A
        C: B
    """)
    a = config.settings_for("A").parameters
    assert a["max_steps"] == 1e6 and a["batch_size"] == 128 and a["hidden_units"] == 32
    assert a["buffer_size"] == 2000 and isinstance(a["buffer_size"], int)
    assert config.settings_for("C").parameters == a
    assert config.settings_for("C").from_block == "A"
    other = config.settings_for("NotInTheFile")
    assert other.from_block == "default" and other.parameters["batch_size"] == 64


MISTAKES = [
    ("unknown key in a brain block", "A:\n  lambd_a: 0.9\n", "brain 'A', key 'lambd_a'.*Did you mean 'lambd'"),
    ("unknown key in default", "default:\n  batchsize: 2\n", "block 'default', key 'batchsize'"),
    ("wrong type: string for int", "A:\n  batch_size: lots\n", "brain 'A', key 'batch_size': expected an integer"),
    ("wrong type: non-integral float", "A:\n  num_epoch: 2.5\n", "key 'num_epoch': expected an integer"),
    ("wrong type: bool for number", "A:\n  gamma: true\n", "key 'gamma': expected a number"),
    ("wrong type: number for bool", "A:\n  normalize: 1\n", "key 'normalize': expected true or false"),
    ("wrong type: list for float", "A:\n  learning_rate: [1]\n", "key 'learning_rate': expected a number"),
    ("out of range: negative", "A:\n  learning_rate: -1.0e-3\n", "key 'learning_rate': must be > 0"),
    ("out of range: gamma above 1", "A:\n  gamma: 1.5\n", "key 'gamma': must be in \\[0, 1\\]"),
    ("out of range: zero batch", "A:\n  batch_size: 0\n", "key 'batch_size': must be > 0"),
    ("bad choice", "A:\n  learning_rate_schedule: cosine\n",
     "key 'learning_rate_schedule': must be 'linear' or 'constant'"),
    ("batch larger than buffer", "A:\n  batch_size: 4096\n  buffer_size: 1024\n", "brain 'A'.*batch_size.*buffer_size"),
    ("alias cycle", "A: B\nB: C\nC: A\n", "alias cycle A -> B -> C -> A"),
    ("alias to nothing", "A: Nowhere\n", "brain 'A' is an alias of 'Nowhere', but there is no block"),
    ("block of the wrong type", "A: 3\n", "brain 'A': expected a block of key: value"),
    ("unknown trainer", "A:\n  trainer: a2c\n",
     "brain 'A', key 'trainer': Unknown trainer type 'a2c'. Known trainer types: .*ppo"),
    ("contradicting selectors", "A:\n  trainer: ppo\n  is_ghost: true\n",
     "'trainer: ppo' contradicts 'is_ghost: true'"),
    ("non-bool selector", "A:\n  is_imitation: yes please\n", "key 'is_imitation': expected true or false"),
    ("key set by learn.py", "A:\n  graph_scope: x\n", "key 'graph_scope': set by learn.py"),
    ("default not a mapping", "default: 3\n", "the 'default' block must be a mapping"),
    ("top level not a mapping", "- a\n- b\n", "expected a mapping"),
    ("invalid YAML", "A:\n  batch_size: [1\n", "not valid YAML"),
    ("recurrent sequence longer than the batch",
     "A:\n  use_recurrent: true\n  sequence_length: 64\n  batch_size: 32\n  buffer_size: 64\n",
     "brain 'A'.*sequence_length"),
]


@pytest.mark.parametrize("what, text, match", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_configuration_mistakes_are_clear_errors(tmp_path, what, text, match):
    with pytest.raises(TrainerConfigError, match=match):
        load_config(tmp_path, text)


def test_errors_name_the_file(tmp_path):
    with pytest.raises(TrainerConfigError, match="config.yaml: brain 'A'"):
        load_config(tmp_path, "A:\n  gamma: x\n")


def test_missing_file(tmp_path):
    with pytest.raises(TrainerConfigError, match="could not be found.*--trainer-config"):
        load_trainer_config(str(tmp_path / "nope.yaml"), REGISTRY)


def test_environment_checks_run_for_external_brains(tmp_path):
    config = load_config(tmp_path, "Ball3DBrain:\n  use_recurrent: true\n  sequence_length: 8\n")
    brains = {"Ball3DBrain": BrainParameters("Ball3DBrain", {
        "stateSize": 8, "actionSize": 2, "memorySize": 0, "cameraResolutions": [],
        "actionDescriptions": ["", ""], "actionSpaceType": 1, "stateSpaceType": 1})}
    with pytest.raises(TrainerConfigError, match="Ball3DBrain.*memorySize"):
        config.settings_for_environment(brains, ["Ball3DBrain"])


def test_configuration_reference_matches_the_code():
    from runner.settings.config_docs import hyperparameters_markdown

    with open(os.path.join(ROOT, "docs", "configuration.md")) as f:
        assert f.read().strip() == hyperparameters_markdown(REGISTRY).strip(), \
            "docs/configuration.md is stale: regenerate it with " \
            "`python -m runner.settings.config_docs > docs/configuration.md`"
