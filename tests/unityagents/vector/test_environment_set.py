"""EnvironmentSet over scripted workers: agent keys, per-environment resets, concurrency, restarts.

The workers here are in-process stand-ins with the ``EnvironmentWorker`` interface, so every
rule of the set is checked exactly and fast; ``tests/e2e/test_num_envs.py`` runs the real thing.
"""
from typing import Any, Dict, List, Optional

import numpy as np
import pytest

from tests.fake_env import collector_of, end_episodes, learn_from_step
from tests.step_view import InfoView
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.on_policy import OnPolicyTrainer
from trainers.trainer.trajectory import PolicyOutput
from unityagents.base_env import DecisionSteps, TerminalSteps
from unityagents.brain import BrainParameters
from unityagents.exception import UnityCommunicationException, UnityEnvironmentException, UnityTimeOutException
from unityagents.vector.environment_set import EnvironmentSet
from unityagents.vector.restart import RestartPolicy

BRAIN = {"stateSize": 2, "actionSize": 1, "memorySize": 0, "cameraResolutions": [],
         "actionDescriptions": [], "actionSpaceType": 1, "stateSpaceType": 1}


class ScriptedWorker:
    """One environment of 3 agents; its state is (environment index, step), its reward 1.

    :param done_at: steps after which its Academy reports global done.
    :param fail_at: steps at which ``receive`` raises (the environment "crashed").
    """

    log = []  # (index, call) of every worker, in call order

    def __init__(self, index: int, done_at=(), fail_at=(), n_agents: int = 3):
        self.index = index
        self.brains = {"B": BrainParameters("B", BRAIN)}
        self.external_brain_names = ["B"]
        self.reset_parameters = {"size": 1.0}
        self.academy_name = "Scripted"
        self.logfile_path = f"/logs/env{index}.log"
        self.global_done: Optional[bool] = None
        self.done_at, self.fail_at, self.n = set(done_at), set(fail_at), n_agents
        self.steps = 0
        self.resets: List[Dict[str, float]] = []
        self.actions: List[np.ndarray] = []
        self.closed = False
        self._sent = None

    def _info(self) -> Dict[str, Any]:
        states = np.array([[self.index, self.steps]] * self.n, dtype=np.float32)
        spec = self.brains["B"].behavior_spec
        return {"B": (DecisionSteps([states], np.ones(self.n), np.arange(self.n)), TerminalSteps.empty(spec))}

    def reset_send(self, train_mode=True, config=None) -> None:
        self.log.append((self.index, "reset_send"))
        self.resets.append(dict(config or {}))
        self.steps = 0
        self._sent = "reset"

    def step_send(self, action=None, memory=None, value=None) -> None:
        self.log.append((self.index, "step_send"))
        self.actions.append(action["B"].continuous)
        self.steps += 1
        self._sent = "step"

    def receive(self) -> Dict[str, Any]:
        self.log.append((self.index, "receive"))
        if self._sent == "step" and self.steps in self.fail_at:
            raise UnityCommunicationException("Lost the environment: it closed the connection.", self.logfile_path)
        self.global_done = self.steps in self.done_at
        return self._info()

    def close(self) -> None:
        self.closed = True


def make_set(n=2, scripts=None, policy=None, **kw):
    scripts = scripts or {}
    made: Dict[int, List[ScriptedWorker]] = {}

    def factory(i):
        attempt = len(made.setdefault(i, []))
        w = ScriptedWorker(i, **scripts.get((i, attempt), {}))
        made[i].append(w)
        return w

    return InfoView(EnvironmentSet(factory, n, restart_policy=policy or RestartPolicy(), **kw)), made


class RecordingTrainer(OnPolicyTrainer):
    """The on-policy base with no network: it stores each agent's state as the ``obs`` field."""

    def __init__(self, brains, **settings):
        super().__init__(None, brains, "B", {"time_horizon": 1000, "buffer_size": 10 ** 6, "max_steps": 1e9,
                                             "summary_freq": 10 ** 9, **settings}, True)

    def act(self, info: BrainInfo) -> PolicyOutput:
        return PolicyOutput(actions=np.asarray(info.states[:, :1]) * 10 + np.arange(len(info.agents))[:, None],
                            fields={"obs": np.asarray(info.states)})


def in_progress(trainer) -> Dict[Any, List[np.ndarray]]:
    """Each agent's trajectory in progress (its ``obs``), as the trainer's collector keeps it."""
    return {agent: list(steps["obs"]) for agent, steps in collector_of(trainer).trajectories.items()}


def obs(trainer, agent) -> List[np.ndarray]:
    """The ``obs`` of the agent's trajectory in progress; none when it has none."""
    return in_progress(trainer).get(agent, [])


def tick(envs, trainer, info):
    actions, _, _, out = trainer.take_action(info)
    new = envs.step(action={"B": actions})
    learn_from_step(trainer, info, new, out)
    return new


def test_agents_are_keyed_by_environment_and_actions_reach_their_rows():
    envs, made = make_set(2)
    info = envs.reset()
    assert info["B"].agents == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    actions = np.arange(6, dtype=np.float32).reshape(6, 1)
    envs.step(action={"B": actions})
    np.testing.assert_array_equal(made[0][0].actions[0], actions[:3])
    np.testing.assert_array_equal(made[1][0].actions[0], actions[3:])


def test_all_environments_are_sent_to_before_any_is_received_from():
    envs, _ = make_set(3)
    envs.reset()
    ScriptedWorker.log.clear()
    envs.step(action={"B": np.zeros((9, 1))})
    calls = [call for _, call in ScriptedWorker.log]
    assert calls == ["step_send"] * 3 + ["receive"] * 3


def test_one_environment_resets_alone_and_the_other_keeps_its_trajectories():
    envs, made = make_set(2, {(1, 0): {"done_at": {2}}})
    trainer = RecordingTrainer(envs.brains)
    info = envs.reset()
    for _ in range(2):
        info = tick(envs, trainer, info)
    assert envs.needs_reset
    before = in_progress(trainer)
    info, ended = envs.reset_finished()
    end_episodes(trainer, ended)
    assert sorted(ended) == [(1, 0), (1, 1), (1, 2)]
    assert len(made[0][0].resets) == 1 and len(made[1][0].resets) == 2  # only environment 1 reset again
    for agent in [(0, 0), (0, 1), (0, 2)]:  # environment 0's trajectories go on, untouched
        assert len(obs(trainer, agent)) == 2
        np.testing.assert_array_equal(obs(trainer, agent), before[agent])
        np.testing.assert_array_equal(np.asarray(obs(trainer, agent))[:, 0], [0, 0])
    for agent in ended:
        assert len(obs(trainer, agent)) == 0
    info = tick(envs, trainer, info)
    assert len(obs(trainer, (0, 0))) == 3
    assert len(obs(trainer, (1, 0))) == 1  # a fresh trajectory from the reset state
    np.testing.assert_array_equal(obs(trainer, (1, 0))[0], [1, 0])


def test_a_lesson_change_reaches_each_environment_at_its_next_reset(tmp_path):
    path = tmp_path / "curriculum.json"
    path.write_text('{"measure": "progress", "thresholds": [0.5], "min_lesson_length": 0, '
                    '"signal_smoothing": false, "parameters": {"size": [1.0, 2.0]}}')
    envs, made = make_set(2, {(1, 0): {"done_at": {1}}}, curriculum=str(path))
    envs.reset()
    assert made[0][0].resets == [{"size": 1.0}] and made[1][0].resets == [{"size": 1.0}]
    assert envs.curriculum.increment_lesson(0.9)
    envs.step(action={"B": np.zeros((6, 1))})
    envs.reset_finished()
    assert made[1][0].resets[-1] == {"size": 2.0}
    assert len(made[0][0].resets) == 1  # environment 0 gets lesson 1 at its own next reset


def test_a_crashed_environment_is_restarted_and_only_its_agents_end():
    envs, made = make_set(2, {(0, 0): {"fail_at": {2}}})
    trainer = RecordingTrainer(envs.brains)
    info = envs.reset()
    info = tick(envs, trainer, info)
    info = tick(envs, trainer, info)  # environment 0 fails here: its agents are absent
    assert [a for a in info["B"].agents] == [(1, 0), (1, 1), (1, 2)]
    assert envs.needs_reset and made[0][0].closed
    info, ended = envs.reset_finished()
    end_episodes(trainer, ended)
    assert len(made[0]) == 2 and envs.restarts() == 1  # launched again on the same index
    assert sorted(ended) == [(0, 0), (0, 1), (0, 2)]
    assert info["B"].agents == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert len(obs(trainer, (1, 2))) == 2
    assert len(obs(trainer, (0, 2))) == 0


def test_past_the_restart_limit_the_error_names_cause_and_log():
    envs, _ = make_set(2, {(1, 0): {"fail_at": {1}}}, policy=RestartPolicy(max_lifetime_restarts=0))
    envs.reset()
    envs.step(action={"B": np.zeros((6, 1))})
    with pytest.raises(UnityEnvironmentException) as e:
        envs.reset_finished()
    message = str(e.value)
    assert "Environment 1 failed and cannot be restarted" in message
    assert "--max-lifetime-restarts 0" in message
    assert "UnityCommunicationException" in message and "/logs/env1.log" in message


def test_without_a_restart_policy_the_failure_is_raised_as_is():
    envs, _ = make_set(1, {(0, 0): {"fail_at": {1}}})
    envs.env.restart_policy = None
    envs.reset()
    with pytest.raises(UnityCommunicationException, match="closed the connection"):
        envs.step(action={"B": np.zeros((3, 1))})


def test_restart_rate_limit_counts_per_environment_and_period():
    policy = RestartPolicy(max_lifetime_restarts=-1, rate_limit_n=2, rate_limit_period_s=10)
    assert policy.refusal(0, now=0.0) is None
    assert policy.refusal(0, now=1.0) is None
    assert "2 time(s) in the last 10 s" in policy.refusal(0, now=2.0)
    assert policy.refusal(1, now=2.0) is None  # another environment has its own budget
    assert policy.refusal(0, now=10.5) is None  # the first restart left the window
    lifetime = RestartPolicy(max_lifetime_restarts=1, rate_limit_n=-1)
    assert lifetime.refusal(0, now=0) is None
    assert "limit of --max-lifetime-restarts 1" in lifetime.refusal(0, now=1000)


@pytest.mark.parametrize("kwargs", [{"max_lifetime_restarts": 1.5}, {"rate_limit_n": -2},
                                    {"rate_limit_period_s": 0}, {"rate_limit_period_s": float("nan")}])
def test_bad_restart_limits_are_clear_errors(kwargs):
    with pytest.raises(UnityEnvironmentException, match="must be"):
        RestartPolicy(**kwargs)


def test_a_start_failure_of_one_environment_closes_the_others():
    started: List[Any] = []

    def factory(i):
        if i == 2:
            raise UnityTimeOutException("The environment did not connect within 1 s.")
        w = ScriptedWorker(i)
        started.append(w)
        return w

    with pytest.raises(UnityTimeOutException, match="Environment 2 of 3 could not start.*did not connect"):
        EnvironmentSet(factory, 3)
    assert len(started) == 2 and all(w.closed for w in started)


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_the_number_of_environments_must_be_a_positive_integer(n):
    with pytest.raises(UnityEnvironmentException, match="integer >= 1"):
        EnvironmentSet(lambda i: ScriptedWorker(i), n)


def test_environments_of_different_scenes_are_refused():
    def factory(i):
        w = ScriptedWorker(i)
        if i == 1:
            w.brains = {"Other": BrainParameters("Other", BRAIN)}
        return w

    with pytest.raises(UnityEnvironmentException, match="same scene or build"):
        EnvironmentSet(factory, 2)


def test_a_step_in_two_halves_lets_the_caller_work_while_the_environments_simulate():
    """``send_step`` sends every environment its rows and returns; ``receive_step`` gathers the
    answers as ``step`` would; a half out of turn is refused with what to call instead."""
    from unityagents.base_env import ActionTuple

    envs = EnvironmentSet(lambda i: ScriptedWorker(i), 2, restart_policy=RestartPolicy())
    try:
        envs.reset()
        with pytest.raises(UnityEnvironmentException, match="call send_step"):
            envs.receive_step()
        envs.send_step(action={"B": ActionTuple(continuous=np.arange(6, dtype=np.float32)[:, None])})
        with pytest.raises(UnityEnvironmentException, match=r"Environment\(s\) \[0, 1\] were sent a step"):
            envs.send_step(action={"B": ActionTuple(continuous=np.zeros((6, 1), np.float32))})
        steps = envs.receive_step()
        decisions, _ = steps["B"]
        assert decisions.agent_id.tolist() == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
        assert decisions.obs[0][:, 1].tolist() == [1.0] * 6  # every environment took its step
    finally:
        envs.close()
