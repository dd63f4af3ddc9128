"""The shipped SAC run configs: both formats build the same trainer settings."""
import pytest

from tests.conftest import shipped_config_pair


@pytest.mark.parametrize("scene, brain", [("3DBall", "Ball3DBrain"), ("Basic", "BasicBrain")])
def test_the_shipped_sac_configs_train_alike_in_both_formats(scene, brain):
    a, b = shipped_config_pair(f"config/sac/{scene}.yaml", f"config/sac/{scene}_release22.yaml", brain, scene)
    # learn.py leaves reward_signal_steps_per_update unset (None: steps_per_update); Release 22 fills it in
    assert a.pop("reward_signal_steps_per_update") is None
    assert b.pop("reward_signal_steps_per_update") == a["steps_per_update"]
    assert a == b
    assert a["trainer"] == "sac"


def test_3dball_sac_updates_while_the_scene_simulates():
    a, _ = shipped_config_pair("config/sac/3DBall.yaml", "config/sac/3DBall_release22.yaml", "Ball3DBrain", "3DBall")
    assert a["threaded"] is True
