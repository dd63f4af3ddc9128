"""The one seam between the environment's step types and what the trainers consume.

The environment layer speaks per-sensor steps (``unityagents.base_env``): for each behaviour, its
``DecisionSteps`` (agents asking for a decision) and ``TerminalSteps`` (agents whose episode
ended), one array per sensor. The trainers consume ``BrainInfo`` batches. ``AgentProcessor`` turns
the one into the other (``unityagents.brain_info``, the conversion ``UnityEnvironment.step`` uses
too), and the trainers' action rows back into the ``ActionTuple`` each behaviour takes:

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

from unityagents.base_env import ActionSpec, ActionTuple, BehaviorSteps
from unityagents.brain import BrainParameters
from unityagents.brain_info import BrainInfo, brain_info


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
