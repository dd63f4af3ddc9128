"""Group trajectories: the steps of one multi-agent group, and the team returns every member shares.

A group's trajectory is a list of *group steps*, one per environment step in which some member
acted. Each step holds, per member that acted, what that member's own trajectory would hold (its
policy's fields, its observation for the critic, its encoded action, its own reward and group
reward), and the step's *team reward* (ML-Agents' extrinsic reward under POCA: every member's own
reward plus the group reward).

The team's lambda-returns ``G_t`` run over the whole group trajectory, until the group's episode
ends (every member done), not until each member's own end. So a member that left early (fell in a
hazard) is credited, at each of its steps, with the rewards and penalties its mates earned after it
left: its advantage is ``G_t - b_i,t`` with the same ``G_t`` as theirs. Nothing here knows
TensorFlow: ``finish`` takes the critic as a function of padded member rows.
"""
from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Hashable, List, Tuple

import numpy as np

from trainers.returns import get_gae


@dataclass
class MemberStep:
    """One member's decision within a group step."""

    fields: Dict[str, Any]     # the policy's per-agent fields (actions, log_probs, value_estimates, ...)
    state: np.ndarray          # the observation the critic reads
    action: np.ndarray         # the action as the critic reads it (continuous values, one-hot branches)
    reward: float              # the member's own reward for this step
    group_reward: float        # the group reward the member received for this step


@dataclass
class GroupTrajectory:
    """The group steps not yet moved to the update buffer, and who is in the group's episode."""

    steps: List[Dict[Hashable, MemberStep]] = field(default_factory=list)
    members: set = field(default_factory=set)   # agents that acted in the group's current episode
    left: set = field(default_factory=set)      # of those, the ones whose episode ended
    episode_total: float = 0.0                  # team reward of the episode's steps already moved on

    def add(self, step: Dict[Hashable, MemberStep]) -> None:
        self.steps.append(step)
        self.members.update(step)
        self.left.difference_update(step)  # acting again: back in play

    def over(self) -> bool:
        """Every member of the group's episode is done: the group's episode ended."""
        return bool(self.members) and self.members <= self.left

    def __len__(self) -> int:
        return len(self.steps)


def team_reward(step: Dict[Hashable, MemberStep]) -> float:
    """Every member's own reward, plus the group reward (the same for every member; averaged)."""
    members = list(step.values())
    return float(sum(m.reward for m in members) + np.mean([m.group_reward for m in members]))


def critic_rows(steps: List[Dict[Hashable, MemberStep]]) -> Tuple[List[Tuple[int, Hashable]], Dict[str, np.ndarray]]:
    """One row per member-step: ``(step index, agent)`` and the critic's padded inputs.

    ``mate_states``/``mate_actions`` are ``[rows, M, ...]`` with ``M`` the most mates any row has
    (at least 1); ``mate_present`` marks the real ones.
    """
    index = [(t, agent) for t, step in enumerate(steps) for agent in step]
    mates = max((len(step) - 1 for step in steps), default=0)
    width = max(mates, 1)
    first = steps[index[0][0]][index[0][1]]
    n = len(index)
    own = np.zeros((n, first.state.size), np.float32)
    states = np.zeros((n, width, first.state.size), np.float32)
    actions = np.zeros((n, width, first.action.size), np.float32)
    present = np.zeros((n, width), np.float32)
    for r, (t, agent) in enumerate(index):
        own[r] = steps[t][agent].state
        others = [m for a, m in steps[t].items() if a != agent]
        for k, mate in enumerate(others):
            states[r, k], actions[r, k], present[r, k] = mate.state, mate.action, 1.0
    return index, {"own_state": own, "mate_states": states, "mate_actions": actions, "mate_present": present}


def team_returns(rewards: np.ndarray, values: np.ndarray, value_next: float, gamma: float,
                 lambd: float) -> np.ndarray:
    """The lambda-returns of the team, ``G_t = r_t + gamma ((1 - lambd) V_{t+1} + lambd G_{t+1})``.

    They equal GAE(lambda) plus V, so ``trainers.returns.get_gae`` computes them.
    """
    values = np.asarray(values, np.float64)
    return get_gae(rewards, values, value_next, gamma=gamma, lambd=lambd) + values


def finish(steps: List[Dict[Hashable, MemberStep]], value_next: float, gamma: float, lambd: float,
           critic: Callable[[Dict[str, np.ndarray]], Tuple[np.ndarray, np.ndarray]]) -> List[Dict[str, Any]]:
    """The update-buffer rows of a finished (or cut) group trajectory, one per member-step.

    :param value_next: V of the group after the last step: 0 when the group's episode ended,
        the critic's value of the members still in play when the trajectory was cut.
    :param critic: ``rows -> (values, baselines)``, each ``[rows]``.
    Each row holds the member's policy fields, its critic inputs (unpadded: ``mate_states`` etc.
    for its mates only) and ``discounted_returns`` (the team's ``G_t``), ``critic_value`` (V_t),
    ``critic_baseline`` (b_i,t), ``advantages`` (``G_t - b_i,t``) and ``masks``.
    """
    if not steps:
        return []
    index, inputs = critic_rows(steps)
    values, baselines = critic(inputs)
    step_value = np.zeros(len(steps))
    for r, (t, _) in enumerate(index):
        step_value[t] = values[r]  # the same set of members for every row of a step
    rewards = np.asarray([team_reward(step) for step in steps])
    returns = team_returns(rewards, step_value, value_next, gamma, lambd)
    rows = []
    for r, (t, agent) in enumerate(index):
        member = steps[t][agent]
        mates = int(inputs["mate_present"][r].sum())
        rows.append({
            **member.fields,
            "critic_own_state": inputs["own_state"][r],
            "critic_mate_states": inputs["mate_states"][r, :mates],
            "critic_mate_actions": inputs["mate_actions"][r, :mates],
            "discounted_returns": np.float32(returns[t]),
            "critic_value": np.float32(values[r]),
            "critic_baseline": np.float32(baselines[r]),
            "advantages": np.float32(returns[t] - baselines[r]),
            "masks": np.float32(1.0),
        })
    return rows


def pad_rows(rows: List[Dict[str, Any]], keys: List[str]) -> Dict[str, np.ndarray]:
    """The update buffer as arrays: per-row fields stacked, the mates padded to the most any row has."""
    arrays = {key: np.asarray([row[key] for row in rows]) for key in keys}
    width = max(max((len(row["critic_mate_states"]) for row in rows), default=0), 1)
    first = rows[0]
    states = np.zeros((len(rows), width, first["critic_own_state"].size), np.float32)
    actions = np.zeros((len(rows), width, first["critic_mate_actions"].shape[-1]), np.float32)
    present = np.zeros((len(rows), width), np.float32)
    for r, row in enumerate(rows):
        k = len(row["critic_mate_states"])
        if k:
            states[r, :k], actions[r, :k], present[r, :k] = row["critic_mate_states"], row["critic_mate_actions"], 1.0
    arrays.update(critic_own_state=np.asarray([row["critic_own_state"] for row in rows], np.float32),
                  critic_mate_states=states, critic_mate_actions=actions, critic_mate_present=present)
    return arrays


def encode_rows(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The update buffer's member-steps as JSON-safe data (a resumed run must find the steps collected
    before its checkpoint): per field, every row's values flattened into one array with each row's
    shape beside it (a row's mates vary in number), all in one base64 ``.npz``."""
    arrays: Dict[str, np.ndarray] = {}
    for key in (rows[0] if rows else {}):
        values = [np.asarray(row[key]) for row in rows]
        arrays[f"{key}.values"] = np.concatenate([v.reshape(-1) for v in values])
        arrays[f"{key}.shapes"] = np.asarray([v.shape for v in values], np.int64).reshape(len(values), values[0].ndim)
    data = io.BytesIO()
    np.savez_compressed(data, **arrays)
    return {"count": len(rows), "npz": base64.b64encode(data.getvalue()).decode("ascii")}


def decode_rows(state: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The member-steps ``encode_rows`` wrote, in order, with their fields' shapes and dtypes."""
    rows: List[Dict[str, Any]] = [{} for _ in range(int(state["count"]))]
    with np.load(io.BytesIO(base64.b64decode(state["npz"]))) as arrays:
        for name in arrays.files:
            if not name.endswith(".values"):
                continue
            key = name[:-len(".values")]
            values, shapes = arrays[name], arrays[f"{key}.shapes"]
            offset = 0
            for row, shape in zip(rows, shapes):
                size = int(np.prod(shape))
                row[key] = values[offset:offset + size].reshape(tuple(int(d) for d in shape))
                offset += size
    return rows


__all__ = ["GroupTrajectory", "MemberStep", "critic_rows", "decode_rows", "encode_rows", "finish", "pad_rows",
           "team_returns", "team_reward"]
