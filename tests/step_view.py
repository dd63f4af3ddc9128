"""A test's view of an environment in the trainers' terms: ``BrainInfo`` out, flat action rows in.

Many tests check what a scene sends row by row (states, rewards, dones) and drive it with action
rows (continuous values, then one index per branch), as the trainers do. ``InfoView`` wraps a
``UnityEnvironment`` (or an ``EnvironmentSet``) and turns its steps into ``BrainInfo`` through the
trainers' own agent processor, and the rows it is given back into ``ActionTuple``: what reaches
the environment is exactly what a trainer would send.
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from runner.agent_processor import AgentProcessor
from trainers.trainer.brain_info import BrainInfo


class InfoView:
    """``env`` with ``reset``/``step``/``receive`` in ``BrainInfo`` terms; any other attribute is ``env``'s."""

    def __init__(self, env: Any):
        self.env = env
        self.infos: Dict[str, BrainInfo] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def __str__(self) -> str:
        return str(self.env)

    def _processor(self) -> AgentProcessor:
        return AgentProcessor(self.env.brains, bool(getattr(self.env, "reports_last_observation", True)))

    def _took(self, steps: Dict[str, Any]) -> Dict[str, BrainInfo]:
        self.infos = self._processor().infos(steps)
        return self.infos

    def reset(self, *args: Any, **kwargs: Any) -> Dict[str, BrainInfo]:
        # a UnityEnvironment's steps come from reset_behaviors (its reset() is the seed's door)
        return self._took(getattr(self.env, "reset_behaviors", self.env.reset)(*args, **kwargs))

    def receive(self) -> Dict[str, BrainInfo]:
        return self._took(self.env.receive())

    def decisions(self, action: Any = None, memory: Any = None, value: Any = None):
        """Rows per External brain (a dict, or the bare rows of the only one), one per row of its
        last info, as ``ActionTuple`` (and memories and values) of its deciding agents."""
        external = list(self.env.external_brain_names)

        def by_brain(x: Any) -> Dict[str, Any]:
            if x is None:
                return {}
            return dict(x) if isinstance(x, dict) else {external[0]: x}

        actions = {b: np.asarray(a, np.float64).reshape(len(self.infos[b].agents), self.env.brains[b].action_width)
                   for b, a in by_brain(action).items() if b in self.infos}
        return self._processor().decisions(self.infos, actions, by_brain(memory), by_brain(value))

    def step_send(self, action: Any = None, memory: Any = None, value: Any = None) -> None:
        actions, memories, values = self.decisions(action, memory, value)
        self.env.step_send(actions, {b: m for b, m in memories.items() if m is not None},
                           {b: v for b, v in values.items() if v is not None})

    def step(self, action: Any = None, memory: Any = None, value: Any = None) -> Dict[str, BrainInfo]:
        if not hasattr(self.env, "step_send"):  # an EnvironmentSet
            return self._took(self.env.step(*self.decisions(action, memory, value)))
        self.step_send(action, memory, value)
        return self.receive()

    def reset_finished(self):
        """``EnvironmentSet.reset_finished`` with its merged steps as ``BrainInfo``."""
        steps, ended = self.env.reset_finished()
        return self._took(steps), ended

    def close(self) -> None:
        self.env.close()

    def __enter__(self) -> "InfoView":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
