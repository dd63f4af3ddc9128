"""The controller asks every trainer to compile its later calls ahead once the run's graph is built."""
from __future__ import annotations

from runner.controller import TrainerController
from runner.settings.trainer_config import load_trainer_config
from tests.conftest import write
from tests.unityagents.vector.test_environment_set import ScriptedWorker
from trainers.trainer.registry import load_registry
from unityagents.vector.environment_set import EnvironmentSet


def test_the_built_controller_has_started_compiling_each_trainers_update(tmp_path):
    config = load_trainer_config(write(tmp_path / "c.yaml", "B:\n    hidden_units: 8\n"), load_registry())
    c = TrainerController(EnvironmentSet.of(ScriptedWorker(0)), config, env_name="Scripted", device="cpu",
                          model_dir=str(tmp_path / "models"), summary_dir=str(tmp_path / "summaries"))
    try:
        with c.graph.as_default():
            c._build()
        (trainer,) = c.trainers.values()
        assert trainer.step == 0 and len(trainer._update_calls) == 1  # before any experience or update
    finally:
        c.sess.close()
        c.env.close()
