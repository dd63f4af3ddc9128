"""The shipped SAC run configs: both formats build the same trainer settings."""
import os

import yaml

from trainers.settings import run_config
from trainers.settings.trainer_config import trainer_config_from_dict
from trainers.trainer.registry import load_registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_the_two_shipped_3dball_sac_configs_train_alike_and_update_while_the_scene_simulates():
    with open(os.path.join(ROOT, "config", "sac", "3DBall.yaml")) as f:
        flat = yaml.safe_load(f)["Ball3DBrain"]
    with open(os.path.join(ROOT, "config", "sac", "3DBall_release22.yaml")) as f:
        raw = yaml.safe_load(f)
    registry = load_registry()
    block = run_config.resolve("r22.yaml", raw, tuple(registry.names())).behaviors["Ball3DBrain"].block
    a = trainer_config_from_dict("flat.yaml", {"B": flat}, registry).settings_for("B").parameters
    b = trainer_config_from_dict("r22.yaml", {"B": block}, registry).settings_for("B").parameters
    # learn.py leaves reward_signal_steps_per_update unset (None: steps_per_update); Release 22 fills it in
    assert a.pop("reward_signal_steps_per_update") is None
    assert b.pop("reward_signal_steps_per_update") == a["steps_per_update"]
    assert a == b
    assert a["trainer"] == "sac" and a["threaded"] is True
