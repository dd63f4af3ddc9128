"""``BrainInfo``: the trainers' internal batch of one brain at one step.

The environment layer speaks per-sensor steps (``unityagents.base_env``); ``agent_processor``
turns a behaviour's ``DecisionSteps``/``TerminalSteps`` into one ``BrainInfo``, whose vector
sensors are joined into one state (the layout ``BrainParameters.sensors`` records) and whose
rows are the deciding agents, then those that only report their episode's end. The trainers
read its fields by name; ``trajectory`` pairs two consecutive ones into transitions.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np


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
