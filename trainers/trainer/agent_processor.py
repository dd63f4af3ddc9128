"""The one seam between the environment's step types and what the trainers consume.

The environment layer speaks per-sensor steps (``unityagents.base_env``): for each behaviour, its
``DecisionSteps`` (agents asking for a decision) and ``TerminalSteps`` (agents whose episode
ended), one array per sensor. The trainers consume ``BrainInfo`` batches. ``AgentProcessor`` turns
the one into the other, and the trainers' action rows back into the ``ActionTuple`` each
behaviour takes:

* rows: the deciding agents, in ``DecisionSteps`` order, then the agents that only ended their
  episode (``decision_requested`` False); with several environments, environment by environment
  (the controller splits the trainers' outputs per environment by these rows);
* an agent in both is one row: done, the terminal reward plus the reward since its next episode
  began, the observations of that next episode, and ``interrupted`` as the terminal step says;
* the vector sensors are joined, in sensor order, into the state (the layout
  ``BrainParameters.sensors`` records), the cameras stay one array each;
* ``terminal_info`` holds the ended episodes' last observations, for bootstrapping, where the
  environment reports them (``reports_last_observation``; API-2 does not).

Nothing here loops over agents unless some agent only ended its episode.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from trainers.trainer.brain_info import BrainInfo
from unityagents.base_env import ActionSpec, ActionTuple, BehaviorSteps, DecisionSteps, TerminalSteps
from unityagents.brain import BrainParameters


def _allowed(decisions: DecisionSteps) -> Optional[np.ndarray]:
    """The masks as the trainers take them: ``[n, sum(branches)]`` float32, 1 = allowed."""
    if decisions.action_mask is None:
        return None
    return 1.0 - np.concatenate(decisions.action_mask, axis=1).astype(np.float32)


def _decision_info(params: BrainParameters, decisions: DecisionSteps) -> BrainInfo:
    n = len(decisions)
    cameras, state = params.cameras_and_state(decisions.obs)
    memory = decisions.memory if decisions.memory is not None else np.zeros((n, 0), np.float32)
    previous = (decisions.previous_action if decisions.previous_action is not None
                else np.zeros((n, params.action_width), np.float32))
    return BrainInfo(cameras, state, memory, decisions.reward.tolist(), decisions.agent_id.tolist(), [False] * n,
                     previous, action_masks=_allowed(decisions), group_id=decisions.group_id.tolist(),
                     group_rewards=decisions.group_reward.tolist())


def _terminal_info(params: BrainParameters, terminals: TerminalSteps) -> BrainInfo:
    n = len(terminals)
    cameras, state = params.cameras_and_state(terminals.obs)
    masks = np.ones((n, int(sum(params.action_branches))), np.float32) if params.uses_action_masks else None
    return BrainInfo(cameras, state, np.zeros((n, 0), np.float32), terminals.reward.tolist(),
                     terminals.agent_id.tolist(), [True] * n, np.zeros((n, params.action_width), np.float32),
                     max_reached=terminals.interrupted.tolist(), action_masks=masks,
                     group_id=terminals.group_id.tolist(), group_rewards=terminals.group_reward.tolist(),
                     decision_requested=[False] * n)


def brain_info(params: BrainParameters, steps: BehaviorSteps, last_observation: bool = True) -> BrainInfo:
    """One behaviour's steps as the trainers' ``BrainInfo`` (see the module docstring).

    :param last_observation: whether ``TerminalSteps.obs`` is an ended episode's last
        observation; only then is it kept as ``terminal_info``.
    """
    decisions, terminals = steps
    info = _decision_info(params, decisions)
    if not len(terminals):
        return info
    where = decisions.agent_id_to_index
    ended = terminals.agent_id.tolist()
    both = [(t, where[a]) for t, a in enumerate(ended) if a in where]
    only = np.asarray([t for t, a in enumerate(ended) if a not in where], np.int64)
    for t, d in both:  # the row closes the episode and starts the next one
        info.rewards[d] = info.rewards[d] + float(terminals.reward[t])
        info.group_rewards[d] = info.group_rewards[d] + float(terminals.group_reward[t])
        info.local_done[d] = True
        info.max_reached[d] = bool(terminals.interrupted[t])
    terminal = _terminal_info(params, terminals)
    if len(only):
        info = _appended(params, info, terminal, terminals.previous_action, only)
    info.terminal_info = terminal if last_observation else None
    return info


def _appended(params: BrainParameters, info: BrainInfo, terminal: BrainInfo, previous_action: Optional[np.ndarray],
              rows: np.ndarray) -> BrainInfo:
    """``info`` with ``rows`` of ``terminal`` appended (agents that only ended), grouped by environment."""
    picked = rows.tolist()

    def cat(own: Optional[np.ndarray], other: Optional[np.ndarray], width: int) -> Optional[np.ndarray]:
        if own is None:
            return None
        extra = np.ones((len(picked), width), np.float32) if other is None else np.asarray(other)[rows]
        # (other None: rows without masks of their own, which act on nothing, allow every action)
        return np.concatenate([np.asarray(own), extra.astype(np.asarray(own).dtype, copy=False)])

    previous = info.previous_actions
    out = BrainInfo(
        [np.concatenate([c, t[rows]]) for c, t in zip(info.observations, terminal.observations)],
        np.concatenate([info.states, terminal.states[rows]]),
        np.concatenate([info.memories, np.zeros((len(picked), info.memories.shape[1]), info.memories.dtype)]),
        info.rewards + [terminal.rewards[t] for t in picked], info.agents + [terminal.agents[t] for t in picked],
        info.local_done + [True] * len(picked),
        cat(previous, previous_action, int(np.shape(previous)[1])) if np.ndim(previous) == 2 else previous,
        max_reached=info.max_reached + [terminal.max_reached[t] for t in picked],
        action_masks=cat(info.action_masks, None, int(sum(params.action_branches))),
        group_id=info.group_id + [terminal.group_id[t] for t in picked],
        group_rewards=info.group_rewards + [terminal.group_rewards[t] for t in picked],
        decision_requested=info.decision_requested + [False] * len(picked))
    return _by_environment(out)


def _by_environment(info: BrainInfo) -> BrainInfo:
    """Rows of merged steps ordered environment by environment (a stable sort: each environment's
    deciding rows, then its rows that only ended), as the controller splits outputs per environment."""
    keys = info.agents
    if not keys or not isinstance(keys[0], tuple):
        return info
    environments = np.asarray([k[0] for k in keys])
    order = np.argsort(environments, kind="stable")
    if np.array_equal(order, np.arange(len(order))):
        return info
    listed = order.tolist()

    def rows(x: Any) -> Any:
        if x is None:
            return None
        if isinstance(x, list):
            return [x[i] for i in listed]
        return np.asarray(x)[order]

    return BrainInfo([o[order] for o in info.observations], info.states[order], rows(info.memories),
                     rows(info.rewards), rows(info.agents), rows(info.local_done), rows(info.previous_actions),
                     rows(info.max_reached), rows(info.action_masks), rows(info.group_id), rows(info.group_rewards),
                     rows(info.decision_requested))


class AgentProcessor:
    """Steps in, ``BrainInfo`` out; the trainers' action rows in, ``ActionTuple`` out (module docstring).

    :param brains: every brain of the environments, by name.
    :param last_observation: the environments' ``reports_last_observation``.
    """

    def __init__(self, brains: Mapping[str, BrainParameters], last_observation: bool = True):
        self.brains = brains
        self.last_observation = last_observation
        self._action_specs: Dict[str, ActionSpec] = {}

    def infos(self, steps: Mapping[str, BehaviorSteps]) -> Dict[str, BrainInfo]:
        """Every brain's steps as its ``BrainInfo``."""
        return {name: brain_info(self.brains[name], s, self.last_observation) for name, s in steps.items()}

    def decisions(self, infos: Mapping[str, BrainInfo], actions: Mapping[str, Any],
                  memories: Mapping[str, Any], values: Mapping[str, Any]) -> Tuple[Dict[str, Any], ...]:
        """The trainers' rows (one per row of each brain's info) as the environment takes them: an
        ``ActionTuple`` of the deciding rows per brain, and those rows of the memories and values."""
        out_actions: Dict[str, ActionTuple] = {}
        out_memories: Dict[str, Any] = {}
        out_values: Dict[str, Any] = {}
        for name, sent in actions.items():
            info = infos[name]
            asked = info.decision_requested
            rows = None if all(asked) else np.flatnonzero(asked)

            def pick(x: Any, rows: Optional[np.ndarray] = rows) -> Any:
                return x if x is None or rows is None else np.asarray(x)[rows]

            spec = self._action_specs.get(name)
            if spec is None:
                spec = self._action_specs[name] = self.brains[name].behavior_spec.action_spec
            rows_sent = np.asarray(sent).reshape(len(info.agents), self.brains[name].action_width)
            out_actions[name] = spec.tuple_of(pick(rows_sent))
            out_memories[name], out_values[name] = pick(memories.get(name)), pick(values.get(name))
        return out_actions, out_memories, out_values


__all__ = ["AgentProcessor", "brain_info"]
