"""Steps in, experience out: the per-agent state between two steps that no trainer keeps itself.

The controller owns one ``ExperienceCollector`` per trainer and hands it, after every step, the
trainer's share of the batches before and after the step and the trainer's outputs. The
collector pairs the rows (``trajectory.agent_pairs``, decisions answered late included), keeps
each agent's trajectory in progress and its episode's running reward, and returns an
``Experience``: the step's ``Transitions``, the ``Trajectory`` objects that ended (finished,
interrupted or cut at the trainer's ``time_horizon``), the ``Episode`` objects that ended, and
the same for the brains the trainer links to. What the collector keeps for a trainer is what the
trainer declares in its ``collection``. A trainer learns from that and never pairs or counts rows.

What a trajectory holds per step: the policy's ``fields`` (``PolicyOutput.fields``), ``rewards``,
and the fields its ``Collection.step_fields(before, after)`` names (e.g. the raw inputs a reward
signal reads), each ``(values, "current" | "next")``: row ``i`` of ``before`` or row ``j`` of
``after``.

Agents are keys: an agent id, or ``(environment, agent id)`` with several environments; after an
environment reset ``end_episode`` drops what the cut episodes left here.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, Iterable, List, Mapping, Optional

from trainers.buffer import AgentBuffer, Buffer
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.trajectory import (
    CUT,
    FINISHED,
    INTERRUPTED,
    Episode,
    Experience,
    PolicyOutput,
    StepFields,
    Trajectory,
    Transitions,
    Waiting,
    pair_transitions,
    trajectory_ends,
    with_late_decisions,
)


class EpisodeTally:
    """Each agent's running episode reward and length, closed into ``Episode`` when it ends."""

    def __init__(self):
        self.rewards: Dict[Hashable, float] = {}
        self.steps: Dict[Hashable, int] = {}

    def count(self, agents: Iterable[Hashable], rewards: Iterable[float]) -> None:
        """One step of each of ``agents``, with its reward."""
        totals, steps = self.rewards, self.steps
        for agent, reward in zip(agents, rewards):
            totals[agent] = totals.get(agent, 0.0) + reward
            steps[agent] = steps.get(agent, 0) + 1

    def close(self, agents: Iterable[Hashable]) -> List[Episode]:
        """The episodes of ``agents`` that took a step, in the order given; their tallies restart."""
        return [Episode(agent, self.rewards.pop(agent), self.steps.pop(agent)) for agent in agents
                if agent in self.steps]

    def drop(self, agents: Optional[Iterable[Hashable]]) -> None:
        """After an environment reset: the episodes of ``agents`` (None: all) end without a result."""
        if agents is None:
            self.rewards.clear()
            self.steps.clear()
            return
        for agent in agents:
            self.rewards.pop(agent, None)
            self.steps.pop(agent, None)


class ExperienceCollector:
    """One trainer's experience, step by step (see the module docstring).

    :param brain_name: the brain the trainer acts for.
    :param linked: the other brains it reads (their transitions and episodes only).
    :param time_horizon: the steps after which a trajectory is cut and bootstrapped; None for a
        trainer that learns from transitions, not trajectories (no trajectory is kept).
    :param step_fields: the trainer's extra per-step trajectory fields (module docstring).
    """

    def __init__(self, brain_name: str, linked: Iterable[str] = (), time_horizon: Optional[int] = None,
                 step_fields: Optional[StepFields] = None):
        self.brain_name = brain_name
        self.linked = tuple(b for b in linked if b != brain_name)
        self.time_horizon = time_horizon
        self.step_fields = step_fields
        #: agent -> its trajectory in progress (``time_horizon`` set).
        self.trajectories = Buffer()
        #: The decisions not answered yet (see ``trajectory.with_late_decisions``).
        self._waiting: Waiting = {}
        self._tallies: Dict[str, EpisodeTally] = {b: EpisodeTally() for b in (brain_name, *self.linked)}

    @classmethod
    def for_trainer(cls, trainer: Any) -> "ExperienceCollector":
        """The collector of what ``trainer`` declares in its ``collection``: links, horizon, step fields."""
        wants = trainer.collection
        return cls(trainer.brain_name, wants.linked_brains, wants.horizon, wants.step_fields)

    # ------------------------------------------------------------------ one step
    def collect(self, before: Mapping[str, BrainInfo], after: Mapping[str, BrainInfo],
                outputs: Optional[PolicyOutput]) -> Experience:
        """The trainer's experience of the step from ``before`` to ``after`` (its brain's and its links')."""
        name = self.brain_name
        experience = self._experience(name, before[name], after[name], outputs)
        for link in self.linked:
            experience.linked[link] = self._experience(link, before[link], after[link], None)
        return experience

    def _experience(self, name: str, current: BrainInfo, following: BrainInfo,
                    outputs: Optional[PolicyOutput]) -> Experience:
        own = name == self.brain_name
        if own and outputs is not None:
            current, outputs = with_late_decisions(current, following, outputs, self._waiting)
        transitions = pair_transitions(current, following, outputs)
        tally = self._tallies[name]
        if transitions is not None:
            tally.count(transitions.agents, transitions.rewards.tolist())
            if own and self.time_horizon is not None and outputs is not None:
                self._extend_trajectories(transitions)
        trajectories = self._ended_trajectories(following) if own and self.time_horizon is not None else []
        episodes = tally.close(a for a, done in zip(following.agents, following.local_done) if done)
        return Experience(name, following, transitions, trajectories, episodes)

    def _extend_trajectories(self, transitions: Transitions) -> None:
        """Append each transition's step to its agent's trajectory in progress."""
        fields = transitions.outputs.fields
        extra = self.step_fields(transitions.before, transitions.after) if self.step_fields else {}
        rewards = transitions.rewards.tolist()
        trajectories, fields = self.trajectories, list(fields.items())
        for i, j, agent, reward in zip(transitions.rows.tolist(), transitions.next_rows.tolist(),
                                       transitions.agents, rewards):
            trajectory = trajectories[agent]
            for key, values in fields:
                trajectory[key].append(values[i])
            for key, (values, row) in extra.items():
                trajectory[key].append(values[i if row == "current" else j])
            trajectory["rewards"].append(reward)

    def _ended_trajectories(self, info: BrainInfo) -> List[Trajectory]:
        """The trajectories that end with ``info``: finished, then interrupted, then cut (``trajectory_ends``)."""
        trajectories = self.trajectories
        ends = trajectory_ends(info, lambda agent: len(trajectories[agent]["rewards"]) if agent in trajectories else 0,
                               self.time_horizon)
        ended = [Trajectory(agent, self._take(agent), FINISHED) for agent in ends.finished]
        if ends.interrupted:
            # The value of the episode's last observation: the terminal info's row when the agent
            # already reported its next episode's first observation (modern protocol).
            source = info.terminal_info if info.terminal_info is not None else info
            where = {agent: r for r, agent in enumerate(source.agents)}
            ended += [Trajectory(agent, self._take(agent), INTERRUPTED, (source, where[agent]))
                      for agent in ends.interrupted]
        ended += [Trajectory(info.agents[j], self._take(info.agents[j]), CUT, (info, j)) for j in ends.cut]
        return ended

    def _take(self, agent: Hashable) -> AgentBuffer:
        """The agent's trajectory in progress; its next step starts a new one."""
        return self.trajectories.pop(agent)

    def held_steps(self) -> int:
        """The steps held in trajectories in progress plus the decisions waiting for their answer: with
        the rows of the batch acted on, the most steps the next ``collect`` can hand over."""
        if self.time_horizon is None:
            return len(self._waiting)
        return sum(len(trajectory["rewards"]) for trajectory in self.trajectories.values()) + len(self._waiting)

    def may_bootstrap(self, after: BrainInfo) -> bool:
        """Whether the next ``collect`` that ends at ``after`` (the trainer's own brain's batch) may end a
        trajectory that needs a bootstrap value: one cut at the horizon, or an interrupted episode's."""
        if self.time_horizon is None:
            return False
        trajectories, horizon = self.trajectories, self.time_horizon
        for j, agent in enumerate(after.agents):
            if after.local_done[j]:
                if after.max_reached[j]:
                    return True
            elif (len(trajectories[agent]["rewards"]) if agent in trajectories else 0) + 1 >= horizon:
                return True
        return False

    # ------------------------------------------------------------------ resets
    def end_episode(self, agents: Optional[Iterable[Hashable]] = None) -> None:
        """After an environment reset: the episodes of ``agents`` (None: all) are gone without a
        result; their trajectories in progress, waiting decisions and tallies are dropped."""
        agents = None if agents is None else list(agents)
        if agents is None:
            self.trajectories.clear()
            self._waiting.clear()
        else:
            for agent in agents:
                self.trajectories.pop(agent, None)
                self._waiting.pop(agent, None)
        for tally in self._tallies.values():
            tally.drop(agents)


__all__ = ["EpisodeTally", "ExperienceCollector", "StepFields"]
