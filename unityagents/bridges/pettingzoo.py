"""PettingZoo environments over every agent of every External brain of an open ``UnityEnvironment``.

:class:`UnityParallelEnv` is the ``ParallelEnv`` (all agents act at once, as Unity steps them);
:func:`unity_aec_env` is the same environment as an ``AECEnv`` (agents act in turn), for libraries
and tools written against PettingZoo's AEC API.

Multi-agent libraries (and PettingZoo's own tools) drive all agents at once: Tennis' two rackets per
court (``TennisBrain`` and ``ghost-TennisBrain``) or 3DBall's 12 platforms. Agents are named
``"<brain>_<k>"`` with ``k`` the agent's row among the brain's steps (fixed for API-2 scenes);
spaces per agent are those of ``unityagents.bridges.gym`` (Box/Discrete vector states, uint8 channels-last
cameras, ``Box(-1, 1)`` or ``Discrete`` actions).

**Episodes.** PettingZoo removes an agent from ``agents`` once it is terminated or truncated, and
the episode lasts until no agent is left. Unity, however, restarts a done agent at once
(``resetOnDone``): from then on the wrapper sends it zero actions and drops its rewards until
``reset()``, which resets the whole scene. An Academy-wide done (``global_done``) terminates
every live agent; ``max_cycles`` (set by ``pettingzoo.test.parallel_api_test``, or given to the
constructor) truncates every live agent after that many steps. API-2 cannot tell a time-out from
the task ending, so its dones are terminations; the modern protocol's ``max_reached`` is a
truncation.

**AEC.** ``unity_aec_env`` is PettingZoo's own ``parallel_to_aec`` over the parallel environment:
it collects one action per live agent in ``agent_selection`` order and steps the scene once
every live agent has acted, so a cycle of the AEC environment is one step of Unity.

Importing this module needs ``pettingzoo`` (``pip install pettingzoo``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

try:
    from pettingzoo import AECEnv, ParallelEnv
    from pettingzoo.utils import parallel_to_aec
except ImportError as exc:  # pragma: no cover - exercised only without pettingzoo
    raise ImportError(
        "unityagents.bridges.pettingzoo needs the 'pettingzoo' package, which is not installed. Install it with "
        "'pip install pettingzoo' (it is listed in requirements.txt).") from exc

from unityagents.base_env import BehaviorSteps
from unityagents.brain import BrainParameters
from unityagents.bridges.gym import (
    Rows,
    _flags,
    _row,
    _speaks_unity,
    action_space,
    encode_actions,
    observation_space,
    observations,
)
from unityagents.envs.unity_aec_env import UnityAECEnv
from unityagents.exception import UnityEnvironmentException

__all__ = ["UnityAECEnv", "UnityParallelEnv", "unity_aec_env"]


class UnityParallelEnv(ParallelEnv):
    """Every agent of every External brain as a PettingZoo parallel agent.

    Called as mlagents_envs' wrapper is (``UnityParallelEnv(env, seed=...)``, or on an environment
    that is not a ``unityagents.UnityEnvironment``), it returns
    ``unityagents.envs.unity_parallel_env.UnityParallelEnv`` instead, with mlagents_envs' agent
    names and spaces (on a ``unityagents.UnityEnvironment``, pass ``seed`` by keyword: the second
    positional argument here is ``max_cycles``).

    :param env: an open ``unityagents.UnityEnvironment``; ``close()`` closes it unless ``close_env=False``.
    :param max_cycles: truncate all live agents after this many steps of an episode (None: never).
    :param train_mode: reset the scene in training (fast) mode.
    """

    metadata = {"name": "unity_parallel_v0", "render_modes": [], "is_parallelizable": True}

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if _speaks_unity(args, kwargs, frozenset({"seed"})):
            from unityagents.envs.unity_parallel_env import UnityParallelEnv as UnityParallel

            return UnityParallel(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, env: Any, max_cycles: Optional[int] = None, train_mode: bool = True, close_env: bool = True):
        self.env = env
        self.max_cycles = max_cycles
        self.train_mode = train_mode
        self._close_env = close_env
        self.brains: Dict[str, BrainParameters] = {b: env.brains[b] for b in env.external_brain_names}
        if not self.brains:
            raise UnityEnvironmentException("The environment has no External brain, so there is no agent to control.")
        infos = self._view(self.env.reset_behaviors(train_mode=train_mode))
        self._rows = self._agent_rows(infos)
        self.possible_agents: List[str] = list(self._rows)
        self._observation_spaces = {a: observation_space(self.brains[b]) for a, (b, _) in self._rows.items()}
        self._action_spaces = {a: action_space(self.brains[b]) for a, (b, _) in self._rows.items()}
        self.agents: List[str] = []
        self._pending: Optional[Dict[str, Rows]] = infos  # the reset above, handed out by the first reset()
        self._infos: Dict[str, Rows] = infos
        self._cycles = 0
        self.render_mode = None

    def _view(self, steps: Dict[str, BehaviorSteps]) -> Dict[str, Rows]:
        last = bool(getattr(self.env, "reports_last_observation", True))
        return {brain: Rows(self.brains[brain], steps[brain], last) for brain in self.brains}

    def _agent_rows(self, infos: Dict[str, Rows]) -> Dict[str, Tuple[str, int]]:
        rows = {}
        for brain in self.brains:
            for k in range(len(infos[brain].agents)):
                rows[f"{brain}_{k}"] = (brain, k)
        return rows

    def observation_space(self, agent: str):
        """The agent's observation space: the same object on every call, as PettingZoo requires."""
        return self._observation_spaces[self._check(agent)]

    def action_space(self, agent: str):
        """The agent's action space (one object per agent, so that seeding it sticks)."""
        return self._action_spaces[self._check(agent)]

    def _check(self, agent: str) -> str:
        if agent not in self._rows:
            raise KeyError(f"{agent!r} is not an agent of this environment; agents are {self.possible_agents}")
        return agent

    def _observe(self, infos: Dict[str, Rows], agents: List[str]) -> Dict[str, Any]:
        batches = {brain: observations(self.brains[brain], infos[brain]) for brain in self.brains}
        return {agent: _row(batches[self._rows[agent][0]], self._rows[agent][1]) for agent in agents}

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        """Reset the scene; every possible agent is live again."""
        if seed is not None:
            for k, agent in enumerate(self.possible_agents):
                self.action_space(agent).seed(seed + k)
        infos, self._pending = (self._pending, None) if self._pending is not None else (
            self._view(self.env.reset_behaviors(train_mode=self.train_mode)), None)
        if self._agent_rows(infos) != self._rows:
            raise UnityEnvironmentException(
                f"The External brains' agents changed across resets (now {sorted(self._agent_rows(infos))}); "
                "UnityParallelEnv needs a fixed set of agents.")
        self._infos = infos
        self._cycles = 0
        self.agents = list(self.possible_agents)
        return self._observe(infos, self.agents), {agent: {} for agent in self.agents}

    def step(self, actions: Dict[str, Any]):
        """Act for the live agents (missing ones get zeros); return the five per-agent dicts."""
        if not self.agents:
            raise UnityEnvironmentException("No agent is live: the episode has ended; call reset() first.")
        unknown = sorted(set(actions) - set(self.agents))
        if unknown:
            raise UnityEnvironmentException(f"Actions for agents that are not live: {unknown}; live agents are "
                                            f"{self.agents}. Done agents stay out until reset().")
        self._pending = None
        wire = {}
        for brain, params in self.brains.items():
            n = len(self._infos[brain].agents)
            batch = np.zeros((n, params.action_width))
            for k in range(n):
                agent = f"{brain}_{k}"
                if agent in actions:
                    batch[k] = encode_actions(params, actions[agent], 1)[0]
            wire[brain] = params.behavior_spec.action_spec.tuple_of(batch[:self._infos[brain].deciding])
        infos = self._view(self.env.step_behaviors(wire))
        self._infos = infos
        self._cycles += 1
        live = list(self.agents)
        rewards, terminations, truncations = {}, {}, {}
        flags = {brain: _flags(infos[brain], len(infos[brain].agents)) for brain in self.brains}
        for agent in live:
            brain, k = self._rows[agent]
            rewards[agent] = float(infos[brain].rewards[k])
            terminations[agent] = bool(flags[brain][0][k]) or bool(self.env.global_done)
            truncations[agent] = bool(flags[brain][1][k]) or (
                self.max_cycles is not None and self._cycles >= self.max_cycles and not terminations[agent])
        obs = self._observe(infos, live)
        self.agents = [a for a in live if not (terminations[a] or truncations[a])]
        return obs, rewards, terminations, truncations, {agent: {} for agent in live}

    def close(self) -> None:
        if self._close_env:
            self.env.close()


def unity_aec_env(env: Any, max_cycles: Optional[int] = None, train_mode: bool = True,
                  close_env: bool = True) -> AECEnv:
    """Every agent of every External brain as a PettingZoo AEC agent (arguments as ``UnityParallelEnv``).

    The result enforces PettingZoo's call order (``reset()`` before ``step()``); its ``unwrapped``
    attribute leads to the ``UnityParallelEnv`` underneath.
    """
    return parallel_to_aec(UnityParallelEnv(env, max_cycles=max_cycles, train_mode=train_mode, close_env=close_env))
