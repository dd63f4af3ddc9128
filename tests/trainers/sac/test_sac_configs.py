"""The shipped SAC run configs: both formats build the same trainer settings."""
from tests.conftest import shipped_config_pair


def test_the_two_shipped_3dball_sac_configs_train_alike_and_update_while_the_scene_simulates():
    a, b = shipped_config_pair("config/sac/3DBall.yaml", "config/sac/3DBall_release22.yaml", "Ball3DBrain")
    # learn.py leaves reward_signal_steps_per_update unset (None: steps_per_update); Release 22 fills it in
    assert a.pop("reward_signal_steps_per_update") is None
    assert b.pop("reward_signal_steps_per_update") == a["steps_per_update"]
    assert a == b
    assert a["trainer"] == "sac" and a["threaded"] is True
