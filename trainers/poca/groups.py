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
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple

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
    (at least 1), each row's mates in the order of its step; ``mate_present`` marks the real ones.
    The rows are gathered from one array of every member-step (the padding reads a zero row).
    """
    index = [(t, agent) for t, step in enumerate(steps) for agent in step]
    members = [member for step in steps for member in step.values()]
    n = len(index)
    width = max(max((len(step) - 1 for step in steps), default=0), 1)
    own = np.asarray([member.state for member in members], np.float32).reshape(n, -1)
    actions = np.asarray([member.action for member in members], np.float32).reshape(n, -1)
    where = np.full((n, width), n, np.int64)  # row n: the zero row of the padding
    first = 0
    for step in steps:
        size = len(step)
        for j in range(size):
            others = [first + k for k in range(size) if k != j]
            where[first + j, :len(others)] = others
        first += size
    states = np.concatenate([own, np.zeros((1, own.shape[1]), np.float32)])[where]
    mate_actions = np.concatenate([actions, np.zeros((1, actions.shape[1]), np.float32)])[where]
    present = (where < n).astype(np.float32)
    return index, {"own_state": own, "mate_states": states, "mate_actions": mate_actions, "mate_present": present}


def team_returns(rewards: np.ndarray, values: np.ndarray, value_next: float, gamma: float,
                 lambd: float) -> np.ndarray:
    """The lambda-returns of the team, ``G_t = r_t + gamma ((1 - lambd) V_{t+1} + lambd G_{t+1})``.

    They equal GAE(lambda) plus V, so ``trainers.returns.get_gae`` computes them.
    """
    values = np.asarray(values, np.float64)
    return get_gae(rewards, values, value_next, gamma=gamma, lambd=lambd) + values


@dataclass
class FinishedTrajectory:
    """A finished (or cut) group trajectory waiting for the critic's values."""

    steps: List[Dict[Hashable, MemberStep]]
    rewards: Sequence[float]   # each step's ``team_reward``
    value_next: float          # V of the group after the last step (0 when its episode ended)


def finish(steps: List[Dict[Hashable, MemberStep]], value_next: float, gamma: float, lambd: float,
           critic: Callable[[Dict[str, np.ndarray]], Tuple[np.ndarray, np.ndarray]],
           rewards: Optional[Sequence[float]] = None) -> List[Dict[str, Any]]:
    """The update-buffer rows of a finished (or cut) group trajectory, one per member-step.

    :param value_next: V of the group after the last step: 0 when the group's episode ended,
        the critic's value of the members still in play when the trajectory was cut.
    :param critic: ``rows -> (values, baselines)``, each ``[rows]``.
    :param rewards: each step's ``team_reward``, when the caller has them already.
    Each row holds the member's policy fields, its critic inputs (unpadded: ``mate_states`` etc.
    for its mates only) and ``discounted_returns`` (the team's ``G_t``), ``critic_value`` (V_t),
    ``critic_baseline`` (b_i,t), ``advantages`` (``G_t - b_i,t``) and ``masks``.
    """
    if rewards is None:
        rewards = [team_reward(step) for step in steps]
    return finish_all([FinishedTrajectory(steps, rewards, value_next)], gamma, lambd, critic)[0]


def finish_all(trajectories: Sequence[FinishedTrajectory], gamma: float, lambd: float,
               critic: Callable[[Dict[str, np.ndarray]], Tuple[np.ndarray, np.ndarray]]) -> List[List[Dict[str, Any]]]:
    """``finish`` of several trajectories, their member-steps evaluated by one call of ``critic``.

    The critic's cost per row falls steeply with the batch (a 512-unit critic costs about twice as
    much per row at 40 rows as at 500), and a group's trajectory is often a few dozen rows, so the
    trajectories are padded to the widest one's mates and evaluated together. Padding changes no
    row's value: absent mates get no attention and do not count in the mean.
    """
    parts = [critic_rows(t.steps) if t.steps else ([], None) for t in trajectories]
    shown = [inputs for _, inputs in parts if inputs is not None]
    if not shown:
        return [[] for _ in trajectories]
    width = max(inputs["mate_states"].shape[1] for inputs in shown)

    def padded(array: np.ndarray) -> np.ndarray:
        extra = width - array.shape[1]
        return np.pad(array, [(0, 0), (0, extra)] + [(0, 0)] * (array.ndim - 2)) if extra else array

    joined = {key: np.concatenate([padded(inputs[key]) if key != "own_state" else inputs[key] for inputs in shown])
              for key in shown[0]}
    values, baselines = critic(joined)
    values, baselines = np.asarray(values), np.asarray(baselines)
    out, offset = [], 0
    for trajectory, (index, inputs) in zip(trajectories, parts):
        n = len(index)
        out.append(_rows(trajectory, index, inputs, values[offset:offset + n], baselines[offset:offset + n],
                         gamma, lambd) if n else [])
        offset += n
    return out


def _rows(trajectory: FinishedTrajectory, index: List[Tuple[int, Hashable]], inputs: Dict[str, np.ndarray],
          values: np.ndarray, baselines: np.ndarray, gamma: float, lambd: float) -> List[Dict[str, Any]]:
    """One trajectory's update-buffer rows from its critic rows and their values (see ``finish``)."""
    steps = trajectory.steps
    step_of = np.asarray([t for t, _ in index])
    last = np.cumsum([len(step) for step in steps]) - 1
    step_value = np.asarray(values, np.float64)[last]  # the same set of members for every row of a step
    returns = team_returns(np.asarray(trajectory.rewards), step_value, trajectory.value_next, gamma, lambd)
    row_returns = returns[step_of]
    returns32, values32, baselines32 = (row_returns.astype(np.float32), np.asarray(values, np.float32),
                                        np.asarray(baselines, np.float32))
    advantages = (row_returns - np.asarray(baselines, np.float64)).astype(np.float32)
    mates = inputs["mate_present"].sum(axis=1).astype(np.int64).tolist()
    own, states, actions = inputs["own_state"], inputs["mate_states"], inputs["mate_actions"]
    one = np.float32(1.0)
    rows = []
    for r, (t, agent) in enumerate(index):
        k = mates[r]
        rows.append({
            **steps[t][agent].fields,
            "critic_own_state": own[r],
            "critic_mate_states": states[r, :k],
            "critic_mate_actions": actions[r, :k],
            "discounted_returns": returns32[r],
            "critic_value": values32[r],
            "critic_baseline": baselines32[r],
            "advantages": advantages[r],
            "masks": one,
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
    by_count: Dict[int, List[int]] = {}
    for r, row in enumerate(rows):
        by_count.setdefault(len(row["critic_mate_states"]), []).append(r)
    for k, where in by_count.items():
        if k:
            states[where, :k] = np.asarray([rows[r]["critic_mate_states"] for r in where], np.float32)
            actions[where, :k] = np.asarray([rows[r]["critic_mate_actions"] for r in where], np.float32)
            present[where, :k] = 1.0
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


__all__ = ["FinishedTrajectory", "GroupTrajectory", "MemberStep", "critic_rows", "decode_rows", "encode_rows",
           "finish", "finish_all", "pad_rows", "team_returns", "team_reward"]
