"""From steps to experience: what a policy decided, which rows pair, where trajectories end.

The types a trainer consumes (``Transitions``, ``Trajectory``, ``Episode``, ``Experience``) and the
functions that pair two consecutive ``BrainInfo`` of a brain into transitions and find where
trajectories end. ``runner.collector`` keeps the state between steps (the decisions
still waiting for an answer, the trajectories in progress, the episodes' running totals) and
calls these with it; the trainers never pair rows themselves.

One API-2 rule shapes the pairing: when an agent is done, the state sent with ``done`` is already
the *first* observation of its next episode (Unity resets it in the same frame). So the step that
starts from an ``info`` whose ``local_done`` is set is a valid transition and is stored; the
transition that ended the episode is the one taken from the previous ``info``, whose next state is
meaningless and is masked by ``done``. API-2 does not say whether ``done`` came from a terminal
state or from the agent's ``maxStep``; both are treated as terminal. Agents are keys: an agent id,
or ``(environment, agent id)`` with several environments, so pairing never mixes environments.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Hashable, Iterator, List, Optional, Tuple, Union

import numpy as np

from trainers.buffer import AgentBuffer
from trainers.trainer.brain_info import BrainInfo

#: agent -> (info, outputs, row) of a decision that its agent has not answered yet.
Waiting = Dict[Any, Tuple[BrainInfo, "PolicyOutput", int]]


@dataclass
class PolicyOutput:
    """What a trainer's ``act`` decided for the N agents of one ``BrainInfo``.

    :param actions: the policy's decision: ``[N, actionSize]`` floats for continuous actions
        (the unclipped Gaussian sample, whose log-probability the update needs), ``[N, 1]``
        (one column per branch) for discrete ones.
    :param sent: what ``take_action`` sent to the environment: ``actions`` under the brain's
        action contract (``Trainer.environment_actions``); filled by ``take_action``.
    :param fields: per-agent values stored with each agent's transition, row ``i`` for agent
        ``i`` of the info (e.g. ``actions``, ``log_probs``, ``value_estimates``, the normalised
        ``states``). Each key becomes a field of the agent's trajectory (on-policy) or of the
        replay buffer (off-policy).
    :param memories: the brain's next ``[N, memorySize]`` memories (recurrent policies), or None.
    :param values: ``[N]`` value estimates shown in Unity's value channel, or None.
    """

    actions: np.ndarray
    fields: Dict[str, np.ndarray] = field(default_factory=dict)
    memories: Optional[np.ndarray] = None
    values: Optional[np.ndarray] = None
    sent: Optional[np.ndarray] = None


#: ``step_fields(before, after)``: ``{field: (values, "current" | "next")}`` added to each trajectory
#: step, row ``i`` of ``before`` (acted from) or row ``j`` of ``after`` (reached).
StepFields = Callable[[BrainInfo, BrainInfo], Dict[str, Tuple[Any, str]]]


@dataclass(frozen=True)
class Collection:
    """What a trainer asks of the collector, declared once (``Trainer.collection``).

    :param linked_brains: the other brains whose batches the trainer reads (a ghost's learner, an
        imitator's teacher); the controller hands each call its own brain's batch and these,
        nothing else, and their transitions and episodes arrive in ``Experience.linked``.
    :param horizon: the steps after which an agent's trajectory is cut and handed over; None for
        a trainer that learns from each step's transitions and keeps no trajectory.
    :param step_fields: fields added to each trajectory step beside the policy's (``StepFields``),
        e.g. the raw inputs a reward signal reads; None adds none.
    """

    linked_brains: Tuple[str, ...] = ()
    horizon: Optional[int] = None
    step_fields: Optional[StepFields] = None


def step_rewards(info: BrainInfo) -> np.ndarray:
    """Each agent's reward plus its group reward (modern protocol; 0 without groups).

    A learner that knows nothing of groups (PPO, SAC) optimises both, as ML-Agents' do; MA-POCA
    (``trainers.poca``) reads the two apart.
    """
    rewards = np.asarray(info.rewards, dtype=np.float64)
    if len(info.group_rewards) == len(rewards) and len(rewards):
        rewards = rewards + np.asarray(info.group_rewards, dtype=np.float64)
    return rewards


def agent_pairs(current: BrainInfo, following: BrainInfo) -> Iterator[Tuple[int, int, Any]]:
    """``(i, j, agent)`` for each agent at row ``i`` of ``current`` and row ``j`` of ``following``.

    Agents of ``current`` missing from ``following`` (removed from the scene) have no transition,
    nor has a row that only reports an episode's end (modern protocol: it took no action). Agents
    whose ``current.local_done`` is set are *not* skipped (see the module docstring).
    """
    next_index = {agent: j for j, agent in enumerate(following.agents)}
    asked = current.decision_requested
    for i, agent in enumerate(current.agents):
        j = next_index.get(agent)
        if j is not None and asked[i]:
            yield i, j, agent


def with_late_decisions(current: BrainInfo, following: BrainInfo, outputs: PolicyOutput,
                        waiting: Waiting) -> Tuple[BrainInfo, PolicyOutput]:
    """``current``/``outputs`` extended with the decisions of ``waiting`` that are answered only now.

    With the modern protocol an agent may act at step t and report again only at t+k (decision
    periods, staggered agents): its row of ``current`` finds no partner in ``following``. Such a
    decision is kept in ``waiting`` (updated here), with its outputs row, until the agent
    reappears; then it is appended as an extra row, so that ``agent_pairs`` pairs it like any
    other. API-2 agents report every step, so there this returns its arguments unchanged.
    """
    present = set(following.agents)
    asked = current.decision_requested
    deciding_now = {a for a, ask in zip(current.agents, asked) if ask}
    late = [waiting.pop(agent) for agent in list(waiting) if agent in present and agent not in deciding_now]
    for i, agent in enumerate(current.agents):
        if asked[i] and agent not in present:
            waiting[agent] = (current, outputs, i)
    if not late:
        return current, outputs
    fields = {key: np.concatenate([np.asarray(values)] + [np.asarray(out.fields[key])[i:i + 1]
                                                          for _, out, i in late])
              for key, values in outputs.fields.items()}
    return (_extended(current, [(src, i) for src, _, i in late]),
            PolicyOutput(outputs.actions, fields, outputs.memories, outputs.values, outputs.sent))


def _extended(current: BrainInfo, rows: List[Tuple[BrainInfo, int]]) -> BrainInfo:
    """``current`` with row ``i`` of each ``(info, i)`` of ``rows`` appended (each asking a decision)."""

    def cat(own: Any, name: str) -> Any:
        if own is None:
            return None
        return np.concatenate([np.asarray(own)] + [np.asarray(getattr(src, name))[i:i + 1] for src, i in rows])

    def extend(own: List[Any], name: str) -> List[Any]:
        return list(own) + [getattr(src, name)[i] for src, i in rows]

    return BrainInfo(
        [np.concatenate([obs] + [src.observations[k][i:i + 1] for src, i in rows])
         for k, obs in enumerate(current.observations)],
        cat(current.states, "states"), cat(current.memories, "memories"), extend(current.rewards, "rewards"),
        extend(current.agents, "agents"), extend(current.local_done, "local_done"),
        cat(current.previous_actions, "previous_actions"), extend(current.max_reached, "max_reached"),
        cat(current.action_masks, "action_masks"), extend(current.group_id, "group_id"),
        extend(current.group_rewards, "group_rewards"), list(current.decision_requested) + [True] * len(rows),
        current.terminal_info)


@dataclass
class TrajectoryEnds:
    """Where the trajectories in progress end after one step (rows and agents of that step's info).

    :param finished: agents whose episode ended: their trajectory ends with value 0 after it.
    :param interrupted: agents whose episode was cut by a max step: bootstrapped from the value of
        the episode's last observation (the terminal info's row when there is one).
    :param cut: rows whose trajectory reached ``time_horizon``: bootstrapped from their state.
    :param done: every agent whose episode ended (finished or interrupted), in row order, for the
        episode bookkeeping; it includes agents without a trajectory.
    """

    finished: List[Any]
    interrupted: List[Any]
    cut: List[int]
    done: List[Any]


def trajectory_ends(info: BrainInfo, length: Callable[[Any], int], time_horizon: int) -> TrajectoryEnds:
    """Where the trajectories of ``info``'s agents end; ``length(agent)`` is its trajectory's steps."""
    ends = TrajectoryEnds([], [], [], [])
    for j, agent in enumerate(info.agents):
        steps = length(agent)
        if info.local_done[j]:
            if steps and info.max_reached[j]:
                ends.interrupted.append(agent)
            elif steps:
                ends.finished.append(agent)
            ends.done.append(agent)
        elif steps >= time_horizon:
            ends.cut.append(j)
    return ends


@dataclass
class Transitions:
    """The transitions one step completed for one brain: every agent that acted and is answered now.

    Transition ``k`` is agent ``agents[k]``, which acted from row ``rows[k]`` of ``before`` (late
    decisions appended, see ``with_late_decisions``) and is answered by row ``next_rows[k]`` of
    ``after``: the reward it got for that action, whether its episode ended, the state it reached.

    :param outputs: the trainer's ``PolicyOutput`` for the rows of ``before`` (late rows
        appended), or None when the trainer returns none (the ghost, the imitator, a linked brain).
    :param rewards: ``[n]`` each agent's reward plus its group reward (``step_rewards``).
    """

    agents: List[Hashable]
    before: BrainInfo
    rows: np.ndarray
    after: BrainInfo
    next_rows: np.ndarray
    outputs: Optional[PolicyOutput]
    rewards: np.ndarray

    def __len__(self) -> int:
        return len(self.agents)

    @property
    def dones(self) -> np.ndarray:
        """``[n]`` bool: the transition ended its agent's episode (finished or interrupted)."""
        return np.asarray(self.after.local_done, dtype=bool)[self.next_rows]

    def field(self, key: str) -> np.ndarray:
        """The policy's field ``key`` for each transition (``outputs.fields[key]`` at ``rows``)."""
        return np.asarray(self.outputs.fields[key])[self.rows]


#: How a trajectory ended: its episode finished (nothing follows), was interrupted by a max step
#: (bootstrapped from the episode's last observation), or was cut at ``time_horizon`` (bootstrapped
#: from the state its agent goes on from).
FINISHED, INTERRUPTED, CUT = "finished", "interrupted", "cut"


@dataclass
class Trajectory:
    """One agent's consecutive steps, handed to its trainer whole.

    :param steps: one value per step and field: the policy's ``fields``, ``rewards``, and what
        the trainer's ``Collection.step_fields`` adds.
    :param end: ``FINISHED``, ``INTERRUPTED`` or ``CUT``.
    :param bootstrap: ``(info, row)`` whose state the value after the last step is estimated
        from (None when ``FINISHED``: the value is 0).
    """

    agent: Hashable
    steps: AgentBuffer
    end: str
    bootstrap: Optional[Tuple[BrainInfo, int]] = None

    def __len__(self) -> int:
        return len(self.steps["rewards"])


@dataclass(frozen=True)
class Episode:
    """An episode that ended: its agent, the sum of its rewards (group rewards included), its steps."""

    agent: Hashable
    reward: float
    length: int


@dataclass
class Experience:
    """What one step gave one trainer, from ``ExperienceCollector.collect``.

    :param latest: the trainer's brain's batch after the step (the one it acts on next).
    :param transitions: the transitions the step completed, or None when none did.
    :param trajectories: those that ended at this step, finished first (row order), then the
        interrupted, then the ones cut at ``time_horizon``; only for a trainer with a horizon.
    :param episodes: the episodes that ended at this step, in row order.
    :param linked: the same for each of the trainer's ``Collection.linked_brains`` (no trajectories).
    """

    brain: str
    latest: BrainInfo
    transitions: Optional[Transitions] = None
    trajectories: List[Trajectory] = field(default_factory=list)
    episodes: List[Episode] = field(default_factory=list)
    linked: Dict[str, "Experience"] = field(default_factory=dict)


def pair_transitions(current: BrainInfo, following: BrainInfo,
                     outputs: Optional[PolicyOutput] = None) -> Optional[Transitions]:
    """The transitions from ``current`` to ``following`` (``agent_pairs``), or None when no agent pairs."""
    pairs = list(agent_pairs(current, following))
    if not pairs:
        return None
    rows, next_rows, agents = zip(*pairs)
    next_rows = np.asarray(next_rows)
    return Transitions(list(agents), current, np.asarray(rows), following, next_rows, outputs,
                       step_rewards(following)[next_rows])


def bootstrap_value(values: Union[np.ndarray, Dict[str, np.ndarray]], k: int) -> Union[float, Dict[str, float]]:
    """Row ``k`` of what ``bootstrap_values`` returned: one value, or ``{signal: value}`` with reward signals."""
    if isinstance(values, dict):
        return {name: float(v[k]) for name, v in values.items()}
    return float(values[k])


__all__ = ["CUT", "FINISHED", "INTERRUPTED", "Episode", "Experience", "PolicyOutput", "Trajectory", "TrajectoryEnds",
           "Transitions", "agent_pairs", "bootstrap_value", "pair_transitions", "step_rewards", "trajectory_ends",
           "with_late_decisions"]
