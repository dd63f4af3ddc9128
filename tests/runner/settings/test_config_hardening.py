"""Issue 13, item 5: every configuration mistake a hostile user tried is a clear error before launch.

Each case writes a YAML file and expects a ``TrainerConfigError`` whose message names the file,
the block or key, what arrived and what to do. ``MISTAKES`` are found by ``load_trainer_config``
alone (no environment); ``SCENE_MISTAKES`` need the scene's brains (``settings_for_environment``),
which the controller calls right after the handshake, before any trainer is built.
"""
import os

import pytest

from runner.settings import trainer_config as config_module
from runner.settings.trainer_config import TrainerConfigError, load_trainer_config
from tests.conftest import load_config
from trainers.trainer.registry import load_registry
from unityagents.brain import BrainParameters

REGISTRY = load_registry()
ROOT = __file__.rsplit("/tests/", 1)[0]
GIB = 2 ** 30


def brain(name: str, state: int = 8, cameras=(), memory: int = 0, action: int = 2) -> BrainParameters:
    return BrainParameters(name, {
        "stateSize": state, "actionSize": action, "memorySize": memory,
        "cameraResolutions": [{"width": w, "height": h, "blackAndWhite": False} for w, h in cameras],
        "actionDescriptions": [""] * action, "actionSpaceType": 1, "stateSpaceType": 1})


# (what, YAML text, regex the message must match)
MISTAKES = [
    ("empty file", "", r"the file is empty .*expected a mapping with a 'default:' block.*Copy the shipped"),
    ("only comments", "# nothing here\n# at all\n", r"the file is empty \(or only comments\)"),
    ("typo'd default block", "defualt:\n  batch_size: 64\n", r"block 'defualt': did you mean 'default'\?.*Rename it"),
    ("capitalised default block", "Default:\n  batch_size: 64\n", r"block 'Default': did you mean 'default'\?"),
    ("plural default block", "defaults:\n  gamma: 0.9\n", r"block 'defaults': did you mean 'default'\?"),
    ("duplicate key in a brain block", "A:\n  batch_size: 64\n  gamma: 0.9\n  batch_size: 4096\n",
     r"line 4: the key 'batch_size' is given a second time in the same block \(first on line 2\).*Remove one"),
    ("duplicate key in default", "default:\n  gamma: 0.9\n  gamma: 0.8\n",
     r"line 3: the key 'gamma' is given a second time .*first on line 2"),
    ("duplicate brain block", "A:\n  gamma: 0.9\nB:\n  gamma: 0.9\nA:\n  gamma: 0.5\n",
     r"line 5: the key 'A' is given a second time .*first on line 1"),
    ("learning_rate .inf", "A:\n  learning_rate: .inf\n",
     r"brain 'A', key 'learning_rate': expected a finite number, got inf.*Give a finite value"),
    ("gamma .nan", "A:\n  gamma: .nan\n", r"brain 'A', key 'gamma': expected a finite number, got nan"),
    ("beta -.inf", "A:\n  beta: -.inf\n", r"key 'beta': expected a finite number, got -inf"),
    ("max_steps 1e400 (a YAML 1.1 string)", "A:\n  max_steps: 1e400\n",
     r"key 'max_steps': expected a finite number, got '1e400', which is inf"),
    ("max_steps 1.0e+400 (a YAML float)", "A:\n  max_steps: 1.0e+400\n", r"key 'max_steps': expected a finite number"),
    ("quoted 'inf' for a float", "A:\n  epsilon: 'inf'\n", r"key 'epsilon': expected a finite number, got 'inf'"),
    ("quoted 'nan' for an int", "A:\n  buffer_size: 'nan'\n",
     r"key 'buffer_size': expected a finite number, got 'nan'"),
    (".inf for an int", "A:\n  batch_size: .inf\n", r"key 'batch_size': expected a finite number"),
    (".inf in the default block", "default:\n  learning_rate: .inf\n",
     r"block 'default', key 'learning_rate': expected a finite number"),
    ("non-finite key of the imitation trainer in default", "default:\n  batches_per_epoch: .inf\n",
     r"block 'default', key 'batches_per_epoch': expected a finite number"),
    ("num_layers 100000", "A:\n  num_layers: 100000\n",
     r"brain 'A', key 'num_layers': must be at most 64 \(deeper MLPs .*\), got 100000. Use a smaller value"),
    ("hidden_units 1e12", "A:\n  hidden_units: 1e12\n", r"key 'hidden_units': must be at most 65536 .*got '1e12'"),
    ("max_steps 1e13", "A:\n  max_steps: 1.0e13\n", r"key 'max_steps': must be at most 1e12"),
    ("learning_rate 2", "A:\n  learning_rate: 2\n", r"key 'learning_rate': must be at most 1 \(a step size"),
    ("buffer_size 1e9", "A:\n  buffer_size: 1.0e9\n  batch_size: 64\n", r"key 'buffer_size': must be at most 1e8"),
    ("num_epoch 1e6", "A:\n  num_epoch: 1.0e6\n", r"key 'num_epoch': must be at most 1000"),
    ("sequence_length 1e6", "A:\n  sequence_length: 1.0e6\n", r"key 'sequence_length': must be at most 10000"),
    ("summary_freq past int32", "A:\n  summary_freq: 1.0e10\n",
     r"key 'summary_freq': must be at most 2147483647 .*int32"),
    ("absurd value in default", "default:\n  num_layers: 100000\n",
     r"block 'default', key 'num_layers': must be at most 64"),
    ("imitation hidden_units 1e12", "A:\n  trainer: imitation\n  brain_to_imitate: T\n  hidden_units: 1.0e12\n",
     r"brain 'A', key 'hidden_units': must be at most 65536"),
    ("ghost max_num_models 1e6", "A:\n  trainer: ghost\n  brain_to_copy: B\n  max_num_models: 1.0e6\n",
     r"brain 'A', key 'max_num_models': must be at most 1000"),
    ("alias to a typo'd block", "Ball3DBrain:\n  gamma: 0.9\nTurret: Ball3DBrian\n",
     r"brain 'Turret' is an alias of 'Ball3DBrian', but there is no block 'Ball3DBrian'. Did you mean 'Ball3DBrain'\?"),
    ("ghost copying itself", "G:\n  trainer: ghost\n  brain_to_copy: G\n",
     r"brain 'G', key 'brain_to_copy': names the brain itself.*Name the other brain"),
    ("imitating itself", "S:\n  trainer: imitation\n  brain_to_imitate: S\n",
     r"brain 'S', key 'brain_to_imitate': names the brain itself"),
]


@pytest.mark.parametrize("what, text, match", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_mistake_is_a_clear_error_before_launch(tmp_path, what, text, match):
    with pytest.raises(TrainerConfigError, match=match) as raised:
        load_config(tmp_path, text)
    assert str(tmp_path / "config.yaml") in str(raised.value), "the message names the file"


def test_graph_that_cannot_fit_in_memory_is_refused_before_it_is_built(tmp_path, monkeypatch):
    monkeypatch.setattr(config_module, "total_memory_bytes", lambda: 8 * GIB)
    with pytest.raises(TrainerConfigError, match=(
            r"brain 'A', keys 'hidden_units' and 'num_layers': 4 layers of 16384 units make at least 8.05e\+08 "
            r"weights, 12.0 GiB .* more than this machine's 8.0 GiB .*cannot be built. Use fewer or narrower")):
        load_config(tmp_path, "A:\n  hidden_units: 16384\n  num_layers: 4\n")
    # The same network fits a bigger machine: the bound is the memory, not an arbitrary width.
    monkeypatch.setattr(config_module, "total_memory_bytes", lambda: 64 * GIB)
    settings = load_config(tmp_path, "A:\n  hidden_units: 16384\n  num_layers: 4\n").settings_for("A")
    assert settings.parameters["num_layers"] == 4


def test_buffer_that_cannot_fit_in_memory_is_refused_once_the_cameras_are_known(tmp_path, monkeypatch):
    monkeypatch.setattr(config_module, "total_memory_bytes", lambda: 16 * GIB)
    config = load_config(tmp_path, "GridWorldBrain:\n  buffer_size: 1.0e6\n  batch_size: 64\n")
    scene = {"GridWorldBrain": brain("GridWorldBrain", state=0, cameras=[(84, 84)], action=4)}
    with pytest.raises(TrainerConfigError, match=(
            r"brain 'GridWorldBrain', key 'buffer_size': 1000000 steps of 21172 floats each .*21168 camera "
            r"values.* need at least 78.9 GiB, more than this machine's 16.0 GiB.*Use a smaller buffer_size")):
        config.settings_for_environment(scene, ["GridWorldBrain"])
    small = load_config(tmp_path, "GridWorldBrain:\n  buffer_size: 10240\n  batch_size: 64\n")
    assert "GridWorldBrain" in small.settings_for_environment(scene, ["GridWorldBrain"])


SCENE = {"Ball3DBrain": brain("Ball3DBrain"), "ghost-Ball3DBrain": brain("ghost-Ball3DBrain")}
SCENE_MISTAKES = [
    ("typo'd brain block", "Ball3DBrian:\n  batch_size: 64\n",
     r"block 'Ball3DBrian' names no brain of the scene; did you mean 'Ball3DBrain'\? 'Ball3DBrain' has no block, "
     r"so it would train with the 'default' block. "
     r"Rename the block \(the scene's brains: Ball3DBrain, ghost-Ball3DBrain\)"),
    ("brain block in the wrong case", "ball3dbrain:\n  batch_size: 64\n",
     r"block 'ball3dbrain' .*did you mean 'Ball3DBrain'"),
    ("ghost copying a typo'd brain",
     "Ball3DBrain:\n  batch_size: 64\nghost-Ball3DBrain:\n  trainer: ghost\n  brain_to_copy: Ball3DBrian\n",
     r"key 'brain_to_copy': the brain 'Ball3DBrian' is not in the environment"),
]


@pytest.mark.parametrize("what, text, match", SCENE_MISTAKES, ids=[m[0] for m in SCENE_MISTAKES])
def test_mistake_found_against_the_scene(tmp_path, what, text, match):
    config = load_config(tmp_path, text)
    with pytest.raises(TrainerConfigError, match=match) as raised:
        config.settings_for_environment(SCENE, list(SCENE))
    assert str(tmp_path / "config.yaml") in str(raised.value)


def test_blocks_for_other_scenes_and_alias_targets_are_not_typos(tmp_path):
    config = load_config(tmp_path, """
        default:
            batch_size: 64
        TennisBrain:
            batch_size: 128
        ExampleBrain:
            hidden_units: 32
        Ball3DBrain: ExampleBrain
        ghost-Ball3DBrain:
            trainer: ghost
            brain_to_copy: Ball3DBrain
    """)
    settings = config.settings_for_environment(SCENE, list(SCENE))
    assert settings["Ball3DBrain"].parameters["hidden_units"] == 32
    # A near miss of a brain that has its own block is another scene's brain, not a typo.
    near = load_config(tmp_path, "Ball3DBrain:\n  batch_size: 64\nBall3DBrainX:\n  batch_size: 32\n")
    assert set(near.settings_for_environment({"Ball3DBrain": brain("Ball3DBrain")}, ["Ball3DBrain"])) == {"Ball3DBrain"}


def scene_brains(scene: str):
    """A built-in scene's brains as its handshake declares them, and its External brains."""
    from academy import load_scene

    specs = load_scene(scene).brains
    brains = {s.name: BrainParameters(s.name, s.parameters_json()) for s in specs}
    return brains, [s.name for s in specs if s.brain_type == "external"]


def test_shipped_file_passes_every_check_for_every_built_in_scene_and_every_block_is_used(tmp_path):
    """Every block of trainer_configurations.yaml is checked against a scene that trains with it."""
    from academy import SCENES

    shipped = os.path.join(ROOT, "trainer_configurations.yaml")
    config = load_trainer_config(shipped, REGISTRY)
    used = {"default"}
    for scene in SCENES:
        brains, external = scene_brains(scene)
        settings = config.settings_for_environment(brains, external)
        assert sorted(settings) == sorted(external), scene
        missing = [b for b in external if b not in config.blocks]
        assert not missing, f"{scene}: {missing} would train with the 'default' block"
        used.update(external)
    # The documented alternative: PyramidsBrain aliased to the curiosity block.
    text = open(shipped).read().replace("\nPyramidsBrain:\n", "\nPyramidsBrainRND:\n")
    alternative = load_config(tmp_path, text + "\nPyramidsBrain: PyramidsBrainCuriosity\n")
    brains, external = scene_brains("Pyramids")
    signals = alternative.settings_for_environment(brains, external)["PyramidsBrain"].parameters["reward_signals"]
    assert set(signals) == {"extrinsic", "curiosity"}
    used.add("PyramidsBrainCuriosity")
    # The alias example: a brain of no built-in scene, TurretBrain, trained with ExampleBrain's block.
    turret = config.settings_for_environment({"TurretBrain": brain("TurretBrain")}, ["TurretBrain"])
    assert turret["TurretBrain"].parameters["hidden_units"] == 64
    used.update({"TurretBrain", "ExampleBrain"})
    assert set(config.raw) == used, f"blocks no scene checks: {sorted(set(config.raw) - used)}"


def test_merge_keys_may_be_overridden_and_valid_large_values_pass(tmp_path):
    config = load_config(tmp_path, """
        base: &base
            batch_size: 64
            gamma: 0.9
        A:
            <<: *base
            gamma: 0.95
            max_steps: 1.0e12
            num_layers: 64
            hidden_units: 16
    """)
    params = config.settings_for("A").parameters
    assert (params["batch_size"], params["gamma"], params["max_steps"], params["num_layers"]) == (64, 0.95, 1e12, 64)

