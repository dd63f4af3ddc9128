"""``--deterministic`` and ``network_settings.deterministic`` reach every trainer type, and a run
trains with them end to end (what the trainers then send: ``tests/trainers/test_deterministic.py``)."""
from __future__ import annotations

import yaml

import learn_r22
from tests.conftest import free_port, in_process, write
from trainers.trainer.registry import load_registry

CONFIG = """
behaviors:
  Walker: {trainer_type: ppo}
  Crawler: {trainer_type: sac}
  Striker: {trainer_type: poca, network_settings: {hidden_units: 64, deterministic: {given}}}
"""


def parameters(tmp_path, text, *flags):
    options = {flag: None for flag in learn_r22.FLAGS}
    options.update({flag: True for flag in flags})
    _, r22, _, _, _ = learn_r22.load(write(tmp_path / "run.yaml", text), options, None, load_registry())
    return {name: block.parameters for name, block in r22.blocks.items()}


def test_the_key_sets_one_behavior_and_the_flag_sets_them_all(tmp_path):
    by_key = parameters(tmp_path, CONFIG.replace("{given}", "true"))
    assert [by_key[n]["deterministic"] for n in ("Walker", "Crawler", "Striker")] == [False, False, True]
    by_flag = parameters(tmp_path, CONFIG.replace("{given}", "false"), "--deterministic")
    assert all(p["deterministic"] for p in by_flag.values())
    assert by_flag["Striker"]["hidden_units"] == 64  # the flag adds the key, the block keeps the rest
    # default_settings too, so behaviours the file does not list act the same way
    with_default = parameters(tmp_path, "default_settings: {trainer_type: ppo}\nbehaviors:\n  Walker: {}\n",
                              "--deterministic")
    assert with_default["Walker"]["deterministic"]


def test_a_deterministic_run_trains_and_records_the_setting(tmp_path):
    config = write(tmp_path / "ball.yaml", """
default_settings:
  trainer_type: ppo
  hyperparameters: {batch_size: 64, buffer_size: 256}
  network_settings: {hidden_units: 16}
  max_steps: 600
  summary_freq: 300
""")
    code, out = in_process(learn_r22.main, tmp_path, [config, "--env=3DBall", "--run-id=d", "--deterministic",
                                                      f"--base-port={free_port()}"], timeout=120)
    assert code == 0, out[-3000:]
    used = yaml.safe_load((tmp_path / "results" / "d" / "run_logs" / "trainer_parameters.yaml").read_text())
    assert used and all(p["deterministic"] is True for p in used.values()), used
