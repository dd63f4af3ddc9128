"""Every agent of any ``BaseEnv`` as a PettingZoo ``AECEnv`` (mlagents_envs' ``UnityAECEnv``).

``mlagents_envs.envs.unity_aec_env`` -> ``unityagents.envs.unity_aec_env``. The agents act in
turn (``agent_selection``); once every live agent has acted, Unity takes one step. It is
PettingZoo's own conversion of ``UnityParallelEnv`` (agents, spaces and episodes as
``unity_pettingzoo_base_env`` describes), so it keeps PettingZoo's AEC rules exactly::

    env = UnityAECEnv(default_registry["Tennis"].make(), seed=0)
    env.reset()
    for agent in env.agent_iter():
        observation, reward, termination, truncation, info = env.last()
        env.step(None if termination or truncation else env.action_space(agent).sample())
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

try:
    from pettingzoo.utils.conversions import parallel_to_aec_wrapper
except ImportError as exc:  # pragma: no cover - exercised only without pettingzoo
    raise ImportError(
        "unityagents.envs.unity_aec_env needs the 'pettingzoo' package, which is not installed. Install it with "
        "'pip install pettingzoo' (it is listed in requirements.txt).") from exc

from unityagents.base_env import BaseEnv
from unityagents.envs.unity_parallel_env import UnityParallelEnv

__all__ = ["UnityAECEnv"]


class UnityAECEnv(parallel_to_aec_wrapper):
    """The agents of ``env`` in turn.

    :param env: the ``BaseEnv`` to wrap; ``close()`` closes it.
    :param seed: seeds the agents' action spaces when not None.
    """

    def __init__(self, env: BaseEnv, seed: Optional[int] = None):
        super().__init__(UnityParallelEnv(env, seed))

    @property
    def possible_agents(self) -> List[str]:
        """Every agent seen since the wrapper was made (it grows as agents join)."""
        return self.env.possible_agents

    @possible_agents.setter
    def possible_agents(self, value: List[str]) -> None:
        pass  # always read from the parallel environment, which PettingZoo's conversion copies once

    @property
    def side_channel(self) -> Dict[str, Any]:
        """The environment's side channels by class name."""
        return self.env.side_channel

    def seed(self, seed: Optional[int] = None) -> None:
        """Seed the agents' action spaces."""
        self.env.seed(seed)
