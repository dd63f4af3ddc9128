"""A step's experience handed over after the next step is sent changes nothing the run does.

ppo/Basic and ppo/3DBall (a normaliser) train twice each from the same seed over gRPC, once as
shipped (most steps' experience waits for the next send, ``TrainerController._experience_can_wait``)
and once with every step learnt from before the next action: the bytes sent to the scene, the
summaries, every checkpoint's weights must be the same, across updates, summaries,
bootstrapped trajectories, a checkpoint interval and ``max_steps``.
"""
from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
import yaml

import learn_r22
from runner.controller import TrainerController
from tests.conftest import free_port, in_process, write
from unityagents.wire import grpc_server

#: The scalars that time the run, which differ from run to run.
TIMED = {"Environment/Agent Steps Per Second"}

def ppo(normalize: bool, hidden: int, layers: int, batch: int, buffer: int, horizon: int, gamma: float,
        beta: float, epochs: int, max_steps: int, summary_freq: int, interval: int) -> dict:
    """A Release 22 PPO block with these settings (learning rate 3e-4)."""
    return {"trainer_type": "ppo", "time_horizon": horizon, "max_steps": max_steps, "summary_freq": summary_freq,
            "checkpoint_interval": interval,
            "hyperparameters": {"batch_size": batch, "buffer_size": buffer, "learning_rate": 3.0e-4, "beta": beta,
                                "num_epoch": epochs},
            "network_settings": {"normalize": normalize, "hidden_units": hidden, "num_layers": layers},
            "reward_signals": {"extrinsic": {"gamma": gamma, "strength": 1.0}}}


def sac(normalize: bool, hidden: int, batch: int, init: int, per_update: float, threaded: bool, max_steps: int,
        summary_freq: int, interval: int) -> dict:
    """A Release 22 SAC block with these settings (a replay of 10,000, learning rate 3e-4)."""
    return {"trainer_type": "sac", "time_horizon": 64, "max_steps": max_steps, "summary_freq": summary_freq,
            "checkpoint_interval": interval, "threaded": threaded,
            "hyperparameters": {"batch_size": batch, "buffer_size": 10000, "buffer_init_steps": init,
                                "steps_per_update": per_update, "learning_rate": 3.0e-4, "init_entcoef": 0.1},
            "network_settings": {"normalize": normalize, "hidden_units": hidden, "num_layers": 2},
            "reward_signals": {"extrinsic": {"gamma": 0.99, "strength": 1.0}}}


#: Each run's scene, its block, the steps of its summaries and its checkpoints' count. PPO's Basic:
#: no normaliser, a trajectory cut every 3 steps; PPO's 3DBall: a normaliser, so a step that may
#: bootstrap (a trajectory cut every 20 steps, an episode interrupted) or save does not wait (its
#: checkpoints at the interval come on steps that could wait otherwise). SAC's Basic updates once the
#: next step is sent (``threaded``), every 10 steps; SAC's 3DBall before the next action, every 40
#: transitions (a step of its 12 agents in three or four), with a normaliser.
RUNS = {
    "ppo-Basic": ("Basic", ppo(False, 20, 1, batch=32, buffer=256, horizon=3, gamma=0.9, beta=5.0e-3, epochs=3,
                               max_steps=1500, summary_freq=400, interval=700), ["400", "800", "1200", "1500"], 3),
    "ppo-3DBall": ("3DBall", ppo(True, 32, 2, batch=120, buffer=480, horizon=20, gamma=0.99, beta=1.0e-3, epochs=2,
                                 max_steps=2400, summary_freq=600, interval=700), ["600", "1200", "1800", "2400"], 4),
    "sac-Basic": ("Basic", sac(False, 20, batch=32, init=50, per_update=10, threaded=True, max_steps=600,
                               summary_freq=200, interval=250), ["200", "400", "600"], 3),
    "sac-3DBall": ("3DBall", sac(True, 16, batch=32, init=100, per_update=40, threaded=False, max_steps=1200,
                                 summary_freq=300, interval=500), ["600", "900", "1200"], 3),
}


def train(tmp_path, monkeypatch, run: str, waits: bool):
    tmp_path.mkdir()
    sent, waited = hashlib.sha256(), [0, 0]
    answer, can_wait = grpc_server.ExchangeServer.answer, TrainerController._experience_can_wait

    def hashed(self, reply):
        sent.update(reply)
        return answer(self, reply)

    def counted(self, before, after):
        yes = can_wait(self, before, after) if waits else False
        waited[yes] += 1
        return yes

    monkeypatch.setattr(grpc_server.ExchangeServer, "answer", hashed)
    monkeypatch.setattr(TrainerController, "_experience_can_wait", counted)
    scene, block = RUNS[run][:2]
    config = write(tmp_path / "run.yaml", yaml.safe_dump({"behaviors": {scene: block}}))
    code, out = in_process(learn_r22.main, tmp_path, [config, f"--env={scene}", "--run-id=r", "--seed=1",
                                                      f"--base-port={free_port()}"], timeout=300)
    assert code == 0, out[-3000:]
    from trainers.tf_utils import tf

    folder = tmp_path / "results" / "r"
    weights = {}  # every checkpoint's variables
    for index in sorted((folder / "checkpoints").glob("*.index")):
        reader = tf.train.load_checkpoint(str(index)[: -len(".index")])
        weights.update({(index.name, name): reader.get_tensor(name) for name in reader.get_variable_to_shape_map()})
    summaries = re.findall(r"Step: (\d+)\..*?Mean Reward: (\S+)", out)
    scalars = [(event.step, value.tag, value.simple_value)
               for events in sorted((folder / scene).glob("events.out.tfevents.*"))
               for event in tf.train.summary_iterator(str(events)) for value in event.summary.value
               if value.tag not in TIMED]
    checkpoints = sorted(p.name for p in (folder / "checkpoints").glob("*.index"))
    return sent.hexdigest(), (summaries, scalars), checkpoints, weights, waited


@pytest.mark.parametrize("run", list(RUNS))
def test_learning_after_the_next_send_sends_summarises_and_saves_the_same(tmp_path, monkeypatch, run):
    waiting = train(tmp_path / "waiting", monkeypatch, run, waits=True)
    not_waiting = train(tmp_path / "not", monkeypatch, run, waits=False)
    sent, summaries, checkpoints, weights, (learnt_at_once, waited) = waiting
    assert waited > learnt_at_once > 0, (waited, learnt_at_once)  # most steps waited, not every one
    assert not_waiting[4][1] == 0
    assert sent == not_waiting[0]
    assert summaries == not_waiting[1] and [step for step, _ in summaries[0]] == RUNS[run][2]
    assert {tag for _, tag, _ in summaries[1]} >= {"Environment/Cumulative Reward", "Losses/Policy Loss"}
    assert checkpoints == not_waiting[2] and len(checkpoints) == RUNS[run][3]  # at the interval, and at the end
    assert weights.keys() == not_waiting[3].keys()
    for name, value in weights.items():
        assert np.array_equal(value, not_waiting[3][name]), name


def scripted_run(tmp_path, monkeypatch, waits: bool, **saves):
    """PPO on the scripted environment, whose Academy is done every 5 steps (the set resets it);
    ``saves``: the controller's ``save_freq`` (0 unless given) and ``checkpoint_interval``."""
    from runner.settings.trainer_config import load_trainer_config
    from tests.unityagents.vector.test_environment_set import ScriptedWorker
    from trainers.trainer.registry import load_registry
    from unityagents.vector.environment_set import EnvironmentSet

    can_wait, waited = TrainerController._experience_can_wait, []

    def counted(self, before, after):
        waited.append(can_wait(self, before, after) if waits else False)
        return waited[-1]

    monkeypatch.setattr(TrainerController, "_experience_can_wait", counted)
    config = ("B:\n    max_steps: 60\n    summary_freq: 1000000\n    normalize: false\n    batch_size: 6\n"
              "    buffer_size: 24\n    time_horizon: 4\n")
    worker = ScriptedWorker(0, done_at={5})
    cfg = load_trainer_config(write(tmp_path / f"c{waits}.yaml", config), load_registry())
    controller = TrainerController(EnvironmentSet.of(worker), cfg, env_name="Scripted",
                                   model_dir=str(tmp_path / f"models{waits}"),
                                   summary_dir=str(tmp_path / f"summaries{waits}"), **{"save_freq": 0, **saves})
    controller.start_learning()
    return worker, waited


def test_a_step_that_waits_is_learnt_from_before_its_environment_resets(tmp_path, monkeypatch):
    worker, waited = scripted_run(tmp_path, monkeypatch, waits=True)
    reference, _ = scripted_run(tmp_path, monkeypatch, waits=False)
    # the steps whose answer made the Academy done waited too, and so did most others
    assert waited[4] and waited[9] and sum(waited) > len(waited) // 2, waited
    assert len(worker.actions) == len(reference.actions) == 20 and len(worker.resets) == len(reference.resets) == 4
    for ours, theirs in zip(worker.actions, reference.actions):
        assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("saves, saving_steps", [
    ({"save_freq": 7}, [7, 14]),  # every 7 environment steps
    ({"checkpoint_interval": 25}, [9, 17]),  # each time 25 agent steps pass (3 agents a step)
    ({"save_freq": 8, "checkpoint_interval": 25}, [8, 9, 16, 17]),
])
def test_a_step_that_saves_does_not_wait(tmp_path, monkeypatch, saves, saving_steps):
    """Acting on the next step may move a variable the checkpoint holds (a normaliser's moments), so
    the step a save comes of is learnt from before the next action; the steps around it still wait."""
    saved_after, saved_while_waiting, counts = [], [], {"acted": 0, "learnt": 0}
    act, finish, save = TrainerController._act, TrainerController._finish_step, TrainerController.save_model

    def counted(name, method):
        def wrapper(self, *args):
            counts[name] += 1
            return method(self, *args)
        return wrapper

    def recorded(self, behaviors=None):
        saved_after.append(self.global_step)
        saved_while_waiting.append(counts["acted"] > counts["learnt"])  # the next step was acted on first
        return save(self, behaviors)

    monkeypatch.setattr(TrainerController, "_act", counted("acted", act))
    monkeypatch.setattr(TrainerController, "_finish_step", counted("learnt", finish))
    monkeypatch.setattr(TrainerController, "save_model", recorded)
    worker, waited = scripted_run(tmp_path, monkeypatch, waits=True, **saves)
    assert saved_after == saving_steps + [20]  # then the save at the end
    assert not any(saved_while_waiting), (saved_after, saved_while_waiting)
    assert sum(waited) > len(waited) // 2, waited
