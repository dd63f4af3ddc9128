"""``BrainInfo``: one brain's batch at one step, in the original API's terms, built from the step types.

The environment layer speaks per-sensor steps (``unityagents.base_env``); ``brain_info`` turns a
behaviour's ``DecisionSteps``/``TerminalSteps`` into one ``BrainInfo``, whose vector sensors are
joined into one state (the layout ``BrainParameters.sensors`` records) and whose rows are the
deciding agents, then those that only report their episode's end. ``UnityEnvironment.reset`` and
``step`` return it (the original API's door), and the trainers consume it (``runner.agent_processor``):
one conversion serves both.

An API-2 brain reports every agent every step, so its rows are its agents in the environment's
order, a done agent's state already the first of its next episode, as the original API documents.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Optional

import numpy as np

from unityagents.base_env import BehaviorSteps, DecisionSteps, TerminalSteps
from unityagents.brain import BrainParameters


class BrainInfo:
    """One brain's view of one step, the batch the trainers consume (``agent_processor`` builds it).

    :param observation: one ``[n_agents, H, W, C]`` float array per camera, values in 0..1.
    :param state: ``[n_agents, stateSize]`` (continuous) or ``[n_agents, 1]`` (discrete): the
        vector sensors joined in sensor order (``BrainParameters.sensors``).
    :param memory: ``[n_agents, memorySize]``: what was sent as memory at the previous step,
        zeros after an agent reset (API-2, which keeps memories; empty otherwise).
    :param reward: the reward each agent got for its previous action.
    :param agents: agent ids, in the order of every other field.
    :param local_done: per-agent done. For agents that reset on done, the state in the same
        message is already the first observation of the next episode.
    :param action: ``previous_actions``, the last action each agent executed.
    :param max_reached: per-agent: the episode was *interrupted* (the agent's max step), not
        ended by the task, so a trainer bootstraps its value. Always False for API-2.
    :param action_masks: ``[n_agents, sum(action_branches)]`` float, 1 = the discrete action is
        allowed, 0 = masked; None for brains without discrete actions.
    :param group_id: per-agent multi-agent group (0 = none). :param group_rewards: per-agent
        group reward.
    :param decision_requested: per-agent: the agent asks for an action. False only for an agent
        of the modern protocol that reports the end of its episode without asking for its next
        decision in the same step: its row closes the episode and its action is not sent.
    :param terminal_info: the last observations of the agents whose episode ended in this step
        (modern protocol; rows keyed like ``agents``), for bootstrapping interrupted episodes. A
        done row of this info itself holds the first observation of the next episode when the
        agent already asked for its next decision, as with API-2.
    """

    def __init__(
        self,
        observation: List[np.ndarray],
        state: np.ndarray,
        memory: Optional[np.ndarray] = None,
        reward: Optional[List[float]] = None,
        agents: Optional[List[int]] = None,
        local_done: Optional[List[bool]] = None,
        action: Optional[np.ndarray] = None,
        max_reached: Optional[List[bool]] = None,
        action_masks: Optional[np.ndarray] = None,
        group_id: Optional[List[int]] = None,
        group_rewards: Optional[List[float]] = None,
        decision_requested: Optional[List[bool]] = None,
        terminal_info: Optional["BrainInfo"] = None,
    ):
        self.observations = observation
        self.states = state
        self.memories = memory
        self.rewards = reward if reward is not None else []
        self.agents = agents if agents is not None else []
        self.local_done = local_done if local_done is not None else []
        self.previous_actions = action
        n = len(self.agents)
        self.max_reached = max_reached if max_reached is not None else [False] * n
        self.action_masks = action_masks
        self.group_id = group_id if group_id is not None else [0] * n
        self.group_rewards = group_rewards if group_rewards is not None else [0.0] * n
        self.decision_requested = decision_requested if decision_requested is not None else [True] * n
        self.terminal_info = terminal_info

    def __len__(self) -> int:
        return len(self.agents)

    def __repr__(self) -> str:
        shapes = [o.shape for o in self.observations]
        return (
            f"BrainInfo(agents={len(self.agents)}, states={getattr(self.states, 'shape', None)}, "
            f"observations={shapes}, memories={getattr(self.memories, 'shape', None)})"
        )


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


class BrainInfos(Mapping):
    """``{brain name: BrainInfo}`` of one answer, each brain's built when first read.

    What ``UnityEnvironment.reset``/``step`` return: a script of the original API reads its
    brains' infos, while a low-level-API script, which reads ``get_steps`` instead, pays nothing
    for them.
    """

    def __init__(self, brains: Mapping[str, BrainParameters], steps: Mapping[str, BehaviorSteps],
                 last_observation: bool):
        self._brains = brains
        self._steps = steps
        self._last_observation = last_observation
        self._built: Dict[str, BrainInfo] = {}

    def __getitem__(self, name: str) -> BrainInfo:
        info = self._built.get(name)
        if info is None:
            info = self._built[name] = brain_info(self._brains[name], self._steps[name], self._last_observation)
        return info

    def __iter__(self) -> Iterator[str]:
        return iter(self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    def __repr__(self) -> str:
        return f"BrainInfos({list(self._steps)})"


__all__ = ["BrainInfo", "BrainInfos", "brain_info"]
