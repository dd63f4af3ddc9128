"""Pairing with the modern protocol's changing set of agents (no TensorFlow, no socket): the
``ExperienceCollector`` that pairs rows and keeps trajectories, and the on-policy base it hands them to.

An agent that acts at step t may report again only at t+k (decision periods), a row may only report
the end of an episode (no decision asked), and an episode cut by its max step is bootstrapped from
the value of its last observation.
"""
import numpy as np

from runner.collector import ExperienceCollector
from trainers.buffer import AgentBuffer
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.on_policy import OnPolicyTrainer
from trainers.trainer.trajectory import PolicyOutput

BRAIN = "Ball?team=0"


class Recorder(OnPolicyTrainer):
    """An on-policy base without a graph: records what the base hands to its hooks."""

    def __init__(self):  # no Trainer.__init__: no session, no config
        self.brain_name = BRAIN
        self.update_buffer = AgentBuffer()
        self.update_fields = ["actions", "rewards"]
        self.reward_signals = {}
        self.stats, self.finished, self.bootstrapped = [], [], []
        self.is_training, self.step, self._values = True, 0, {"max_steps": 1e9}  # still learning

    def add_stat(self, key, value):
        self.stats.append((key, value))

    def bootstrap_values(self, info, rows):
        self.bootstrapped.append([float(info.states[r, 0]) for r in rows])
        return np.asarray([10.0 * info.states[r, 0] for r in rows])

    def process_trajectory(self, trajectory, value_next):
        self.finished.append((list(trajectory["actions"]), list(trajectory["rewards"]), value_next))


class Pairing:
    """The controller's part for one trainer: its collector pairs each step, the trainer learns from it."""

    def __init__(self):
        self.trainer = Recorder()
        self.collector = ExperienceCollector(BRAIN, time_horizon=1000)

    def collect(self, before, after):
        """The step from ``before`` to ``after``, the policy acting on ``before``; its experience."""
        return self.collector.collect({BRAIN: before}, {BRAIN: after}, act(before))

    def learn(self, before, after):
        experience = self.collect(before, after)
        self.trainer.process_experience(experience)
        return experience


def info(agents, rewards=None, done=None, asked=None, interrupted=None, states=None, terminal=None):
    n = len(agents)
    return BrainInfo([], np.asarray(states if states is not None else [[float(a)] for a in agents], np.float32),
                     np.zeros((n, 0)), rewards or [0.0] * n, list(agents), done or [False] * n,
                     np.zeros((n, 1)), max_reached=interrupted, decision_requested=asked, terminal_info=terminal)


def act(i):
    return PolicyOutput(np.zeros((len(i.agents), 1)), {"actions": np.asarray([[10 * a] for a in i.agents], float)})


def test_a_decision_answered_steps_later_is_paired_with_the_next_report():
    p = Pairing()
    s0 = info([1, 2])
    s1 = info([1], rewards=[0.5])                 # agent 2 acts on a longer period: absent
    experience = p.collect(s0, s1)
    assert experience.transitions.agents == [1] and experience.transitions.rewards.tolist() == [0.5]
    assert list(p.collector.trajectories[1]["rewards"]) == [0.5]
    assert 2 not in p.collector.trajectories
    assert list(p.collector._waiting) == [2]      # its decision waits for its next report
    s2 = info([1, 2], rewards=[0.25, 0.75])      # agent 2 reports again: its decision from s0 pairs
    experience = p.collect(s1, s2)
    transitions = experience.transitions
    assert dict(zip(transitions.agents, transitions.rewards.tolist())) == {1: 0.25, 2: 0.75}
    assert dict(zip(transitions.agents, transitions.field("actions").tolist())) == {1: [10.0], 2: [20.0]}
    assert list(p.collector.trajectories[2]["rewards"]) == [0.75]
    assert [list(a) for a in p.collector.trajectories[2]["actions"]] == [[20.0]]  # the action taken at s0
    assert list(p.collector.trajectories[1]["rewards"]) == [0.5, 0.25]
    assert p.collector._waiting == {}
    assert experience.trajectories == []          # nothing ended: no done, far from the horizon


def test_a_row_that_only_reports_an_end_is_no_decision():
    p = Pairing()
    s0 = info([1])
    s1 = info([1], rewards=[-1.0], done=[True], asked=[False])   # terminal only
    p.learn(s0, s1)
    assert p.trainer.finished == [([[10.0]], [-1.0], 0.0)]
    assert ("cumulative_reward", -1.0) in p.trainer.stats
    s2 = info([1], rewards=[0.0])                 # first decision of the next episode
    experience = p.learn(s1, s2)
    assert experience.transitions is None, "no transition may start from a terminal-only row"
    assert len(p.collector.trajectories[1]["rewards"]) == 0, "no transition may start from a terminal-only row"
    assert p.collector._waiting == {}


def test_an_interrupted_episode_is_bootstrapped_from_its_last_observation():
    p = Pairing()
    s0 = info([1, 2])
    last = info([1], rewards=[0.1], done=[True], asked=[False], interrupted=[True], states=[[7.0]])
    # agent 1: max step reached, and already asked for its next decision (state 3 = next episode)
    s1 = info([1, 2], rewards=[0.1, 0.2], done=[True, True], interrupted=[True, False],
              states=[[3.0], [4.0]], terminal=last)
    p.learn(s0, s1)
    finished = {tuple(a[0]): v for a, _, v in p.trainer.finished}
    assert finished[(20.0,)] == 0.0                # agent 2 ended its episode: value 0
    assert finished[(10.0,)] == 70.0               # agent 1 was interrupted: V(terminal state 7)
    assert p.trainer.bootstrapped == [[7.0]]


def test_api2_infos_pair_row_by_row_as_before():
    p = Pairing()
    s0, s1 = info([5, 6]), info([6, 5], rewards=[1.0, 2.0], done=[False, True])
    p.learn(s0, s1)
    assert p.trainer.finished == [([[50.0]], [2.0], 0.0)]
    assert list(p.collector.trajectories[6]["rewards"]) == [1.0]
    assert p.collector._waiting == {}


def test_merged_steps_keep_the_modern_fields():
    """Environment 0's agent 1 only ended its episode (interrupted), environment 1's agents decide:
    the trainers' batch keeps masks, groups, the flags and the terminal rows, keyed by environment."""
    from runner.agent_processor import brain_info
    from unityagents.base_env import DecisionSteps, TerminalSteps, merge_steps
    from unityagents.brain import BrainParameters

    params = BrainParameters(BRAIN, {"stateSize": 1, "actionSize": 2, "actionSpaceType": 0, "actionBranches": [2],
                                     "actionMasks": True})
    spec = params.behavior_spec
    ended = TerminalSteps([np.ones((1, 1), np.float32)], np.asarray([1.0]), np.asarray([True]), np.asarray([1]),
                          np.asarray([3]))
    deciding = DecisionSteps([np.zeros((2, 1), np.float32)], np.zeros(2), np.asarray([1, 2]),
                             [np.asarray([[False, True], [True, False]])], np.asarray([0, 4]))
    merged = brain_info(params, merge_steps([(0, (DecisionSteps.empty(spec), ended)),
                                             (1, (deciding, TerminalSteps.empty(spec)))]))
    assert merged.agents == [(0, 1), (1, 1), (1, 2)]
    assert merged.decision_requested == [False, True, True]
    assert merged.max_reached == [True, False, False]
    assert merged.group_id == [3, 0, 4]
    assert merged.action_masks.tolist() == [[1, 1], [1, 0], [0, 1]]
    assert merged.terminal_info.agents == [(0, 1)]
