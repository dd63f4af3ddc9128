"""Every agent of any ``BaseEnv`` as a PettingZoo ``ParallelEnv`` (mlagents_envs' ``UnityParallelEnv``).

``mlagents_envs.envs.unity_parallel_env`` -> ``unityagents.envs.unity_parallel_env``, in today's
PettingZoo API; agents, spaces and episodes as ``unity_pettingzoo_base_env`` describes::

    env = UnityParallelEnv(default_registry["Tennis"].make(), seed=0)
    observations, infos = env.reset()
    while env.agents:
        actions = {agent: env.action_space(agent).sample() for agent in env.agents}
        observations, rewards, terminations, truncations, infos = env.step(actions)
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from gymnasium import error

try:
    from pettingzoo import ParallelEnv
except ImportError as exc:  # pragma: no cover - exercised only without pettingzoo
    raise ImportError(
        "unityagents.envs.unity_parallel_env needs the 'pettingzoo' package, which is not installed. Install it "
        "with 'pip install pettingzoo' (it is listed in requirements.txt).") from exc

from unityagents.base_env import BaseEnv
from unityagents.envs.unity_pettingzoo_base_env import UnityPettingzooBaseEnv

__all__ = ["UnityParallelEnv"]


class UnityParallelEnv(UnityPettingzooBaseEnv, ParallelEnv):
    """All agents act at once, as Unity steps them.

    :param env: the ``BaseEnv`` to wrap; ``close()`` closes it.
    :param seed: seeds the agents' action spaces when not None.
    """

    def __init__(self, env: BaseEnv, seed: Optional[int] = None):
        super().__init__(env, seed, {"name": "unity_parallel_v0", "render_modes": [], "is_parallelizable": True})

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Dict, Dict]:
        """Reset the environment: the deciding agents' observations and infos."""
        self._reset(seed)
        return dict(self._observations), {agent: dict(self._infos[agent]) for agent in self._live_agents}

    def step(self, actions: Dict[str, Any]) -> Tuple[Dict, Dict, Dict, Dict, Dict]:
        """Act for the live agents (those without an action get zeros); the five per-agent dicts."""
        self._assert_loaded()
        if not self._live_agents:
            raise error.Error("You must reset the environment before you can perform a step: no agent is live "
                              "(the episode has ended, or reset() was never called).")
        for agent, action in actions.items():
            self._process_action(agent, action)
        self._step()
        taking_part = list(self._terminations)
        return ({a: self._observations[a] for a in taking_part}, dict(self._rewards), dict(self._terminations),
                dict(self._truncations), {a: dict(self._infos[a]) for a in taking_part})
