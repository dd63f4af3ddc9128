"""The overlapped schedule over scripted workers, driven by the controller's own loop.

Each environment here answers after its own delay, so the environments interleave; the checks are
that every action answers the observation its environment last sent, that every agent's data
equal the synchronous schedule's for a deterministic policy, and that a crash in flight restarts
only that environment.
"""
import threading
import time

import numpy as np
import pytest

from runner.collector import ExperienceCollector
from runner.controller import TrainerController
from tests.unityagents.vector.test_environment_set import BRAIN, RecordingTrainer, ScriptedWorker
from trainers.trainer.on_policy import OnPolicyTrainer
from trainers.trainer.trajectory import PolicyOutput
from unityagents.base_env import ActionTuple, DecisionSteps, TerminalSteps
from unityagents.brain import BrainParameters
from unityagents.exception import UnityEnvironmentException
from unityagents.vector.environment_set import EnvironmentSet
from unityagents.vector.restart import RestartPolicy

WIDE = dict(BRAIN, stateSize=4)


def policy(states: np.ndarray) -> np.ndarray:
    """A deterministic policy of the observation only: (environment, step, agent, last action)."""
    return (states[:, 0] * 1000 + states[:, 1] * 10 + states[:, 2] + 0.5 * states[:, 3])[:, None]


class EchoWorker(ScriptedWorker):
    """State (environment, step, agent, its last action), reward = its last action; it answers after
    ``delay`` seconds and records whether each action is ``policy`` of the state it last sent."""

    def __init__(self, index, delay=0.0, **kw):
        super().__init__(index, **kw)
        self.brains = {"B": BrainParameters("B", WIDE)}
        self.delay = delay
        self.last = np.zeros(self.n, np.float32)
        self.answered_own = []
        self._shown = None

    def _info(self):
        n = self.n
        states = np.stack([np.full(n, self.index), np.full(n, self.steps), np.arange(n), self.last], 1)
        self._shown = states.astype(np.float32)
        return {"B": (DecisionSteps([self._shown], self.last.astype(np.float64), np.arange(n)),
                      TerminalSteps.empty(self.brains["B"].behavior_spec))}

    def step_send(self, action=None, memory=None, value=None):
        sent = action["B"].continuous
        self.answered_own.append(np.array_equal(sent, policy(self._shown)))
        self.last = sent[:, 0]
        super().step_send(action)

    def receive(self):
        time.sleep(self.delay)
        return super().receive()


class DeterministicTrainer(RecordingTrainer):
    def __init__(self, brains, max_steps, threaded=False):
        super().__init__(brains, max_steps=max_steps, threaded=threaded)

    def act(self, info):
        return PolicyOutput(actions=policy(np.asarray(info.states)), fields={"obs": np.asarray(info.states)})


def controller_of(envs, trainer) -> TrainerController:
    """A controller over ``envs`` that drives ``trainer`` for brain B (with its collector), unbuilt."""
    controller = TrainerController(envs, None, "scripted")
    controller.trainers = {"B": trainer}
    controller.collectors = {"B": ExperienceCollector.for_trainer(trainer)}
    controller.save_freq = 0
    return controller


def run(schedule, delays=(0.0, 0.0, 0.0), scripts=None, max_steps=90, policy_=None):
    """A controller loop over len(delays) EchoWorkers; the trainer and the workers it made."""
    made = {}

    def factory(i):
        attempt = len(made.setdefault(i, []))
        w = EchoWorker(i, delay=delays[i], **(scripts or {}).get((i, attempt), {}))
        made[i].append(w)
        return w

    envs = EnvironmentSet(factory, len(delays), restart_policy=policy_ or RestartPolicy(), schedule=schedule)
    trainer = DeterministicTrainer(envs.brains, max_steps)
    controller = controller_of(envs, trainer)
    try:
        envs.reset()
        (controller._loop_overlapped if schedule == "overlapped" else controller._loop_sync)(
            *(() if schedule == "overlapped" else (controller.processor.infos(envs.merged(range(envs.n_envs))),)))
        controller.left_in_flight = envs.in_flight
    finally:
        envs.close()
    return trainer, made, controller


def trajectories(controller):
    """Each agent's trajectory in progress, ``(obs, rewards)``, as the controller's collector keeps it."""
    return {a: (np.asarray(steps["obs"]), np.asarray(steps["rewards"]))
            for a, steps in controller.collectors["B"].trajectories.items()}


def test_each_action_answers_its_own_observation_while_the_environments_interleave():
    trainer, made, _ = run("overlapped", delays=(0.0, 0.004, 0.001))
    steps = [made[i][0].steps for i in range(3)]
    assert steps[0] > steps[1]  # the quick environment did not wait for the slow one
    for i in range(3):
        assert made[i][0].answered_own and all(made[i][0].answered_own)


def test_every_agents_data_equal_the_synchronous_schedules_for_a_deterministic_policy():
    _, _, sync = run("sync", max_steps=900)  # 100 steps per agent: more than any of the overlapped run
    _, _, controller = run("overlapped", delays=(0.0, 0.003, 0.001), max_steps=180)
    a, b = trajectories(sync), trajectories(controller)
    assert sorted(a) == sorted(b)
    shortest = min(len(b[agent][0]) for agent in b)
    assert shortest >= 2 and max(len(b[agent][0]) for agent in b) > shortest  # they interleaved
    for agent, (obs, rewards) in b.items():
        n = len(obs)
        np.testing.assert_array_equal(obs, a[agent][0][:n])
        np.testing.assert_array_equal(rewards, a[agent][1][:n])
    assert controller.global_step == sum(len(b[agent][0]) for agent in b) // (3 * 3)


def test_an_environment_that_dies_in_flight_restarts_and_only_its_agents_end():
    # The other two sleep too, so that however loaded the machine, they cannot reach max_steps before
    # the restarted environment has answered: its agents' data are what the test reads.
    _, made, controller = run("overlapped", delays=(0.001, 0.002, 0.001), scripts={(1, 0): {"fail_at": {3}}},
                              max_steps=240)
    obs = {agent: obs for agent, (obs, _) in trajectories(controller).items()}

    def answered(i, worker):  # steps sent minus the one still in flight when the loop ended
        return worker.steps - (i in controller.left_in_flight)

    assert len(made[1]) == 2 and made[1][0].closed and len(made[0]) == len(made[2]) == 1
    assert all(made[1][1].answered_own)
    # The restarted environment's agents start over from its reset state; the others never lost a step.
    first = obs[(1, 0)]
    assert first[0, 1] == 0 and len(first) == answered(1, made[1][1]) >= 1
    for i in (0, 2):
        assert len(obs[(i, 0)]) == answered(i, made[i][0]) > 3


def test_past_the_restart_limit_an_in_flight_failure_ends_the_run():
    with pytest.raises(UnityEnvironmentException, match="Environment 1 failed and cannot be restarted"):
        run("overlapped", scripts={(1, 0): {"fail_at": {2}}}, policy_=RestartPolicy(max_lifetime_restarts=0))


def test_an_environment_in_flight_is_reset_only_once_it_has_answered():
    envs = EnvironmentSet(lambda i: EchoWorker(i, delay=0.05 * i), 2, schedule="overlapped")
    info = envs.merged([0, 1]) if envs.reset() else None
    envs.send([0, 1], action={"B": ActionTuple(policy(info["B"][0].obs[0]))})
    assert envs.collect() == [0]
    envs.reset_all("a new lesson")
    restarted, ended = envs.reset_idle()
    assert restarted == [0] and sorted(ended) == [(0, 0), (0, 1), (0, 2)]
    assert envs.needs_reset and not envs.needs_idle_reset  # environment 1 is still in flight
    with pytest.raises(UnityEnvironmentException, match="in flight"):
        envs.step(action={"B": ActionTuple(np.zeros((6, 1)))})
    assert envs.collect() == [1]
    restarted, ended = envs.reset_idle()
    assert restarted == [1] and not envs.needs_reset
    envs.close()


def test_collect_takes_every_answer_that_arrived_in_index_order_and_leaves_the_rest_in_flight():
    envs = EnvironmentSet(lambda i: EchoWorker(i, delay=1.5 if i == 0 else 0.0), 3, schedule="overlapped")
    try:
        envs.reset()
        envs.send([2, 1, 0], action={"B": ActionTuple(policy(envs.merged([2, 1, 0])["B"][0].obs[0]))})
        deadline = time.monotonic() + 30
        while envs._answers.qsize() < 2 and time.monotonic() < deadline:  # environments 2 and 1 answer at once
            time.sleep(0.01)
        assert envs.collect() == [1, 2]
        assert envs.collect(timeout=0.01) == [] and envs.in_flight == [0]
        assert envs.collect() == [0] and envs.in_flight == [] and envs.collect() == []
        assert all(all(w.answered_own) for w in envs._workers)  # each got the actions of its own observation
    finally:
        envs.close()


@pytest.mark.parametrize("threaded", [True, False])
def test_a_threaded_trainer_updates_while_the_environment_simulates_the_step_just_sent(threaded):
    """``threaded``, for a trainer whose update cannot run beside acting (``prepare_update`` gives
    None, as SAC's): the update runs between the step's send and its answer; otherwise after it."""
    log = []

    def worker(i):
        w = EchoWorker(i)
        w.log = log  # its sends and receives, beside the trainer's updates
        return w

    envs = EnvironmentSet(worker, 1)
    trainer = DeterministicTrainer(envs.brains, max_steps=12, threaded=threaded)
    trainer.is_ready_update = lambda: True
    trainer.update_model = lambda: log.append("update")
    trainer.prepare_update = lambda: None
    controller = controller_of(envs, trainer)
    try:
        envs.reset()
        del log[:]
        controller._loop_sync(controller.processor.infos(envs.merged([0])))
    finally:
        envs.close()
    send, receive = (0, "step_send"), (0, "receive")
    assert log == ([send, "update", receive] if threaded else [send, receive, "update"]) * 4  # 4 steps of 3 agents


class GatedTrainer(OnPolicyTrainer):
    """An on-policy trainer with no network whose update notes its thread and waits (up to
    ``patience`` seconds) for the controller to act twice more: it ends early only if acting goes on
    beside it."""

    patience = 1.0

    def __init__(self, brains, threaded: bool, max_steps: int = 120):
        super().__init__(None, brains, "B", {"time_horizon": 2, "buffer_size": 24, "max_steps": max_steps,
                                             "summary_freq": 10 ** 9, "threaded": threaded}, True)
        self.update_fields = ["obs"]
        self.acted = 0
        self.batches, self.threads, self.acted_meanwhile, self.acted_before = [], [], [], []

    def act(self, info):
        self.acted += 1
        return PolicyOutput(actions=policy(np.asarray(info.states)), fields={"obs": np.asarray(info.states)})

    def bootstrap_values(self, info, rows):
        return np.zeros(len(rows), np.float32)

    def process_trajectory(self, trajectory, value_next):
        pass

    def update(self, batch):
        self.threads.append(threading.get_ident())
        start, deadline = self.acted, time.monotonic() + self.patience
        self.acted_before.append(start)
        while self.acted < start + 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        self.acted_meanwhile.append(self.acted - start)
        self.batches.append(batch["obs"].copy())
        self.add_stat("policy_loss", 1.0)


@pytest.mark.parametrize("schedule", ["sync", "overlapped"])
def test_a_threaded_on_policy_trainer_updates_on_another_thread_while_acting_goes_on(schedule):
    """The update of a ``threaded`` on-policy trainer runs on the background thread while the
    controller keeps acting; each update takes the steps collected before it started, so every
    agent-step lands in exactly one update (or in the buffer after the last), and its losses
    reach the controller's summaries."""
    envs = EnvironmentSet(lambda i: EchoWorker(i), 2 if schedule == "overlapped" else 1)
    trainer = GatedTrainer(envs.brains, threaded=True)
    trainer.patience = 10.0  # acting goes on within milliseconds; a loaded machine may stall it for a second
    controller = controller_of(envs, trainer)
    try:
        if schedule == "sync":
            controller._loop_sync(controller.processor.infos(envs.reset()))
        else:
            envs.reset()
            controller._loop_overlapped()
        controller._settle()
    finally:
        controller.background.close()
        envs.close()
    assert len(trainer.batches) >= 3
    assert threading.get_ident() not in trainer.threads
    # Acting went on during every update that began while the controller had at least two more
    # decisions to make; on a loaded machine the background thread may begin an update only after
    # the loop's last decisions, and such an update (and the one the settle runs) sees none.
    during = [meanwhile for before, meanwhile in zip(trainer.acted_before, trainer.acted_meanwhile)
              if before + 2 <= trainer.acted]
    assert len(during) >= 2 and min(during) >= 2, (trainer.acted_before, trainer.acted_meanwhile, trainer.acted)
    steps = [tuple(row[:3]) for batch in trainer.batches for row in batch]
    steps += [tuple(row[:3]) for row in np.asarray(trainer.update_buffer["obs"])]
    assert len(steps) == len(set(steps))  # (environment, step, agent): none twice
    assert len(trainer.stats["policy_loss"]) == len(trainer.batches)
    assert controller.timers.root.children["background_update"].count == len(trainer.batches)


def test_without_threaded_the_update_runs_on_the_controllers_thread_and_acting_waits():
    """The same trainer without ``threaded``: every update runs inline, so acting cannot go on
    (each update waits out its patience for steps that never come)."""
    envs = EnvironmentSet(lambda i: EchoWorker(i), 1)
    trainer = GatedTrainer(envs.brains, threaded=False, max_steps=60)
    trainer.patience = 0.05
    controller = controller_of(envs, trainer)
    try:
        controller._loop_sync(controller.processor.infos(envs.reset()))
    finally:
        envs.close()
    assert trainer.threads and set(trainer.threads) == {threading.get_ident()}
    assert trainer.acted_meanwhile == [0] * len(trainer.batches)
