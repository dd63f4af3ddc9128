"""What the collector promises whatever the agents do: every transition lands in exactly one
trajectory, in time order, none longer than the horizon; every reward lands in exactly one episode;
a step hands over no more steps than ``held_steps`` said it could, and a bootstrap value only where
``may_bootstrap`` said it might.

Hypothesis draws streams of steps of the modern protocol's kind: agents that skip steps (decision
periods), appear and leave, end episodes (finished, or interrupted by a max step, asking for their
next decision in the same step or not), and reset. Each acted row carries a unique ``id`` field, so
a test can follow every transition from the step that made it to the trajectory that holds it.
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.collector import ExperienceCollector
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.trajectory import CUT, FINISHED, INTERRUPTED, PolicyOutput

BRAIN = "B"
AGENTS = 5

#: One agent's report in a step: absent, deciding, ended and deciding, or ended only.
ROW = st.tuples(st.sampled_from(["absent", "decide", "decide", "decide", "end+decide", "end"]),
                st.booleans(),  # interrupted (when it ends)
                st.integers(-2, 3))  # reward


def batch(step: int, rows) -> BrainInfo:
    agents = [a for a, (kind, _, _) in enumerate(rows) if kind != "absent"]
    kinds = [rows[a][0] for a in agents]
    n = len(agents)
    return BrainInfo([], np.full((n, 1), step, np.float32), np.zeros((n, 0)), [float(rows[a][2]) for a in agents],
                     agents, [k.startswith("end") for k in kinds], np.zeros((n, 1)),
                     max_reached=[rows[a][1] and kinds[r].startswith("end") for r, a in enumerate(agents)],
                     decision_requested=[k != "end" for k in kinds])


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(st.lists(ROW, min_size=AGENTS, max_size=AGENTS), min_size=2, max_size=30),
       horizon=st.integers(1, 6), resets=st.sets(st.integers(1, 29), max_size=3))
def test_every_transition_lands_once_in_order_and_every_reward_in_one_episode(steps, horizon, resets):
    collector = ExperienceCollector(BRAIN, time_horizon=horizon)
    next_id = 0
    made: Dict[int, float] = {}  # transition id -> its reward, as the step reported it
    placed: List[int] = []  # ids, as the trajectories handed over hold them
    rewards_by_agent: Dict[int, float] = {}
    closed_by_agent: Dict[int, float] = {}
    unanswered: Dict[int, int] = {}  # agent -> the id of its decision that awaits its next report
    before = batch(0, steps[0])
    for t, rows in enumerate(steps[1:], start=1):
        if t in resets:  # an environment reset cuts every episode: what it held is dropped
            collector.end_episode(None)
            made = {i: r for i, r in made.items() if i in placed}
            rewards_by_agent = dict(closed_by_agent)
            unanswered = {}
        ids = np.arange(next_id, next_id + len(before.agents))
        next_id += len(before.agents)
        unanswered.update({a: int(i) for a, i, asked in zip(before.agents, ids, before.decision_requested) if asked})
        outputs = PolicyOutput(np.zeros((len(before.agents), 1)), {"id": ids})
        after = batch(t, rows)
        most = collector.held_steps() + len(before.agents)  # the bounds the controller's waiting rests on
        may_bootstrap = collector.may_bootstrap(after)
        experience = collector.collect({BRAIN: before}, {BRAIN: after}, outputs)
        assert sum(len(trajectory.steps["rewards"]) for trajectory in experience.trajectories) <= most
        assert may_bootstrap or all(trajectory.bootstrap is None for trajectory in experience.trajectories)
        if experience.transitions is not None:
            tr = experience.transitions
            for agent, i, reward in zip(tr.agents, tr.field("id").tolist(), tr.rewards.tolist()):
                assert i not in made, "a decision is answered once"
                made[i] = reward
                rewards_by_agent[agent] = rewards_by_agent.get(agent, 0.0) + reward
        for agent in after.agents:  # an agent that reports again answers its last decision, however late
            if agent in unanswered:
                assert unanswered.pop(agent) in made
        for trajectory in experience.trajectories:
            ids_held = [int(i) for i in trajectory.steps["id"]]
            assert 1 <= len(ids_held) <= horizon
            assert ids_held == sorted(ids_held), "a trajectory's steps are in time order"
            assert list(trajectory.steps["rewards"]) == [made[i] for i in ids_held]
            if trajectory.end == CUT:
                assert len(ids_held) == horizon and trajectory.bootstrap[0] is after
            else:
                assert trajectory.end in (FINISHED, INTERRUPTED)
                row = after.agents.index(trajectory.agent)
                assert after.local_done[row], "a trajectory ends early only with its episode"
                assert (trajectory.end == INTERRUPTED) == bool(after.max_reached[row])
            placed += ids_held
        for episode in experience.episodes:
            closed_by_agent[episode.agent] = closed_by_agent.get(episode.agent, 0.0) + episode.reward
        for agent, done in zip(after.agents, after.local_done):
            if done:
                assert agent not in collector._tallies[BRAIN].rewards, "an ended episode is closed at once"
        before = after
    in_progress = [int(i) for trajectory in collector.trajectories.values() for i in trajectory["id"]]
    assert len(placed) == len(set(placed)) and not set(placed) & set(in_progress), "no transition is kept twice"
    assert set(placed) | set(in_progress) == set(made), "every transition is in a trajectory"
    tally = collector._tallies[BRAIN].rewards
    for agent, total in rewards_by_agent.items():
        assert np.isclose(closed_by_agent.get(agent, 0.0) + tally.get(agent, 0.0), total), agent
