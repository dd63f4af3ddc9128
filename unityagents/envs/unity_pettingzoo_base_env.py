"""What the PettingZoo wrappers share: every agent of every behaviour of any ``BaseEnv`` as a PettingZoo agent.

``mlagents_envs.envs.unity_pettingzoo_base_env`` -> ``unityagents.envs.unity_pettingzoo_base_env``,
in today's PettingZoo API (``reset()`` -> ``(observations, infos)``; terminations and truncations).

* **Agents** are named as mlagents_envs names them, ``"<behavior name>?agent_id=<id>"`` (e.g.
  ``"Tennis?team=0?agent_id=3"``); an agent that first decides after ``reset()`` joins then, and
  ``possible_agents`` lists every agent seen since the wrapper was made.
* **Spaces**, per behaviour: one ``Box(-inf, inf, shape, float32)`` per sensor (a ``Tuple`` when
  there are several); actions ``Discrete(b)`` for one branch, ``MultiDiscrete`` for several,
  ``Box(-1, 1, (n,), float32)`` when continuous, ``Tuple((Box, Discrete|MultiDiscrete))`` for a
  hybrid behaviour. Each agent of a behaviour gets the same space objects (seeded with ``seed``).
* **Episodes.** An agent in a step's ``TerminalSteps`` is terminated (truncated when the terminal
  step says it was interrupted), with that step's observation and reward, and leaves ``agents``.
  Unity restarts such an agent at once; until ``reset()`` its new decisions are ignored and it is
  sent zero actions, because a PettingZoo agent does not come back within an episode. The episode
  is over when ``agents`` is empty. An agent that asks for no decision at a step (a decision
  period above 1) keeps its last observation, with reward 0.
* **Infos**: ``behavior_name``, ``group_id``, ``group_reward`` (and ``interrupted`` at the end),
  as mlagents_envs gives them, and for a behaviour with discrete branches ``action_mask`` in
  gymnasium's convention (int8, 1 = available; one array per branch for ``MultiDiscrete``), which
  ``action_space(agent).sample(mask)`` and PettingZoo's own tests read. Unity's masks are the
  opposite (True = unavailable); the observations stay what their space says.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np

try:
    from gymnasium import error, spaces
except ImportError as exc:  # pragma: no cover - exercised only without gymnasium
    raise ImportError(
        "unityagents.envs needs the 'gymnasium' package for its spaces, which is not installed. Install it with "
        "'pip install gymnasium'.") from exc

from unityagents.base_env import ActionTuple, BaseEnv, BehaviorSpec
from unityagents.exception import UnityException

__all__ = ["UnityPettingzooBaseEnv"]


def _behavior_to_agent_id(behavior_name: str, unique_id: Any) -> str:
    return f"{behavior_name}?agent_id={unique_id}"


def _agent_id_to_behavior(agent_id: str) -> str:
    return agent_id.split("?agent_id=")[0]


class UnityPettingzooBaseEnv:
    """Every agent of every behaviour of ``env`` (see the module docstring).

    :param env: the ``BaseEnv``; ``close()`` closes it.
    :param seed: seeds the action spaces' samplers when not None.
    :param metadata: PettingZoo's ``metadata`` (by default its name and no render modes).
    """

    def __init__(self, env: BaseEnv, seed: Optional[int] = None, metadata: Optional[dict] = None):
        super().__init__()
        self._env: Optional[BaseEnv] = env
        self.metadata = metadata if metadata is not None else {"name": "unity_pettingzoo_v0", "render_modes": [],
                                                               "is_parallelizable": True}
        self.render_mode: Optional[str] = None
        self._seed = seed
        self._observation_spaces: Dict[str, spaces.Space] = {}
        self._action_spaces: Dict[str, spaces.Space] = {}
        self._possible_agents: Set[str] = set()
        self._live_agents: List[str] = []
        self._finished: Set[str] = set()
        self._rows: Dict[str, Tuple[str, int]] = {}  # deciding agent -> (behaviour, its row in DecisionSteps)
        self._observations: Dict[str, Any] = {}
        self._rewards: Dict[str, float] = {}
        self._cumm_rewards: Dict[str, float] = {}
        self._terminations: Dict[str, bool] = {}
        self._truncations: Dict[str, bool] = {}
        self._infos: Dict[str, Dict[str, Any]] = {}
        self._current_action: Dict[str, ActionTuple] = {}
        if not env.behavior_specs:
            env.step()
        self._update_spaces()
        for name in env.behavior_specs:  # the agents known already, so that possible_agents is set before reset()
            try:
                decisions, _ = env.get_steps(name)
            except (LookupError, UnityException):  # an environment that has not stepped yet
                continue
            self._possible_agents.update(_behavior_to_agent_id(name, i) for i in decisions.agent_id)

    # ------------------------------------------------------------------ spaces
    def _assert_loaded(self) -> BaseEnv:
        if self._env is None:
            raise error.Error("No environment loaded: it was closed. Make a new environment and wrap it.")
        return self._env

    def _update_spaces(self) -> None:
        for name, spec in self._assert_loaded().behavior_specs.items():
            if name not in self._observation_spaces:
                self._observation_spaces[name] = self._observation_space_of(spec)
                self._action_spaces[name] = self._action_space_of(name, spec)

    @staticmethod
    def _observation_space_of(spec: BehaviorSpec) -> spaces.Space:
        parts = tuple(spaces.Box(-np.float32(np.inf), np.float32(np.inf), tuple(o.shape), np.float32)
                      for o in spec.observation_specs)
        return parts[0] if len(parts) == 1 else spaces.Tuple(parts)

    def _action_space_of(self, name: str, spec: BehaviorSpec) -> spaces.Space:
        a = spec.action_spec
        if a.continuous_size == 0 and not a.discrete_branches:
            raise error.Error(f"No actions found: behavior {name!r} has no continuous action and no discrete branch.")
        parts: List[spaces.Space] = []
        if a.continuous_size:
            parts.append(spaces.Box(-1.0, 1.0, (a.continuous_size,), np.float32))
        if len(a.discrete_branches) == 1:
            parts.append(spaces.Discrete(a.discrete_branches[0]))
        elif a.discrete_branches:
            parts.append(spaces.MultiDiscrete(list(a.discrete_branches)))
        space = parts[0] if len(parts) == 1 else spaces.Tuple(parts)
        if self._seed is not None:
            space.seed(self._seed)
        return space

    def observation_space(self, agent: str) -> spaces.Space:
        """The agent's observation space (the same object for every agent of its behaviour)."""
        return self._observation_spaces[self._behavior_of(agent)]

    def action_space(self, agent: str) -> spaces.Space:
        """The agent's action space (the same object for every agent of its behaviour)."""
        return self._action_spaces[self._behavior_of(agent)]

    def _behavior_of(self, agent: str) -> str:
        behavior = _agent_id_to_behavior(agent)
        if behavior not in self._observation_spaces:
            raise KeyError(f"{agent!r} is not an agent of this environment: agents are named "
                           f"'<behavior>?agent_id=<id>' with a behavior among {sorted(self._observation_spaces)}.")
        return behavior

    @property
    def observation_spaces(self) -> Dict[str, spaces.Space]:
        return {agent: self.observation_space(agent) for agent in self.possible_agents}

    @property
    def action_spaces(self) -> Dict[str, spaces.Space]:
        return {agent: self.action_space(agent) for agent in self.possible_agents}

    # ------------------------------------------------------------------ agents
    @property
    def agents(self) -> List[str]:
        """The agents still in this episode, sorted."""
        return sorted(self._live_agents)

    @property
    def possible_agents(self) -> List[str]:
        """Every agent seen since the wrapper was made, sorted."""
        return sorted(self._possible_agents)

    @property
    def num_agents(self) -> int:
        return len(self._live_agents)

    @property
    def max_num_agents(self) -> int:
        return len(self._possible_agents)

    @property
    def rewards(self) -> Dict[str, float]:
        return dict(self._rewards)

    @property
    def terminations(self) -> Dict[str, bool]:
        return dict(self._terminations)

    @property
    def truncations(self) -> Dict[str, bool]:
        return dict(self._truncations)

    @property
    def dones(self) -> Dict[str, bool]:
        """mlagents_envs' name: terminated or truncated."""
        return {a: self._terminations[a] or self._truncations[a] for a in self._terminations}

    @property
    def infos(self) -> Dict[str, Dict[str, Any]]:
        return dict(self._infos)

    @property
    def _cumulative_rewards(self) -> Dict[str, float]:
        return self._cumm_rewards

    @property
    def side_channel(self) -> Dict[str, Any]:
        """The environment's side channels by class name (``env.side_channel["EngineConfigurationChannel"]``)."""
        env = self._assert_loaded()
        manager = getattr(env, "_side_channel_manager", None)  # mlagents_envs' own environment
        channels = list(getattr(manager, "_side_channels_dict", {}).values()) if manager is not None else list(
            getattr(env, "_side_channels", ()))
        return {type(c).__name__: c for c in channels}

    # ------------------------------------------------------------------ episodes
    def _reset(self, seed: Optional[int] = None) -> None:
        if seed is not None:
            self.seed(seed)
        env = self._assert_loaded()
        env.reset()
        self._update_spaces()
        self._live_agents, self._finished, self._rows = [], set(), {}
        self._observations, self._infos = {}, {}
        for name in env.behavior_specs:
            decisions, _ = env.get_steps(name)
            self._current_action[name] = self._create_empty_actions(name, len(decisions))
            for row, agent_id in enumerate(decisions.agent_id):
                agent = _behavior_to_agent_id(name, agent_id)
                self._live_agents.append(agent)
                self._rows[agent] = (name, row)
                self._observations[agent] = self._obs_row(decisions.obs, row)
                self._infos[agent] = self._info(name, decisions, row)
        self._possible_agents.update(self._live_agents)
        self._live_agents.sort()
        self._rewards = {a: 0.0 for a in self._live_agents}
        self._cumm_rewards = {a: 0.0 for a in self._live_agents}
        self._terminations = {a: False for a in self._live_agents}
        self._truncations = {a: False for a in self._live_agents}

    def _process_action(self, current_agent: str, action: Any) -> None:
        """Check ``action`` against the agent's space and write it into its behaviour's batch."""
        if current_agent not in self._live_agents:
            raise error.Error(f"Agent {current_agent!r} is not live (live agents: {self.agents}); an agent that "
                              "ended stays out until reset().")
        space = self.action_space(current_agent)
        if action is None:
            return
        if isinstance(space, spaces.Tuple):
            action = tuple(np.asarray(a, dtype=s.dtype) for a, s in zip(action, space.spaces))
        else:
            action = np.asarray(action, dtype=space.dtype)
        if not space.contains(action):
            raise error.Error(f"Invalid action for {current_agent!r}: got {action!r}, expected an element of {space}.")
        behavior, row = self._rows.get(current_agent, (None, -1))
        if behavior is None:  # live, but asked for no decision at the last step
            return
        batch = self._current_action[behavior]
        if isinstance(space, spaces.Tuple):
            batch.continuous[row] = np.reshape(action[0], -1)
            batch.discrete[row] = np.reshape(action[1], -1)
        elif isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
            batch.discrete[row] = np.reshape(action, -1)
        else:
            batch.continuous[row] = np.reshape(action, -1)

    def _step(self) -> None:
        """Send the actions, step the environment, and read every behaviour's steps."""
        env = self._assert_loaded()
        for name, actions in self._current_action.items():
            if len(actions):
                env.set_actions(name, actions)
        env.step()
        self._update_spaces()
        live = list(self._live_agents)
        self._rows = {}
        self._rewards = {a: 0.0 for a in live}
        self._terminations = {a: False for a in live}
        self._truncations = {a: False for a in live}
        for name in env.behavior_specs:
            decisions, terminals = env.get_steps(name)
            self._current_action[name] = self._create_empty_actions(name, len(decisions))
            for row, agent_id in enumerate(terminals.agent_id):
                agent = _behavior_to_agent_id(name, agent_id)
                if agent in self._finished or agent not in self._terminations:
                    continue  # ended earlier in this episode, or never took part in it
                self._observations[agent] = self._obs_row(terminals.obs, row)
                self._rewards[agent] = float(terminals.reward[row])
                interrupted = bool(terminals.interrupted[row])
                self._terminations[agent], self._truncations[agent] = not interrupted, interrupted
                self._infos[agent] = dict(self._info(name, terminals, row), interrupted=interrupted)
                self._finished.add(agent)
            for row, agent_id in enumerate(decisions.agent_id):
                agent = _behavior_to_agent_id(name, agent_id)
                if agent in self._finished:
                    continue  # restarted by Unity: out until reset(), sent zero actions
                if agent not in self._terminations:  # a newcomer joins the episode
                    self._possible_agents.add(agent)
                    self._live_agents.append(agent)
                    self._terminations[agent] = self._truncations[agent] = False
                self._rows[agent] = (name, row)
                self._observations[agent] = self._obs_row(decisions.obs, row)
                self._rewards[agent] = float(decisions.reward[row])
                self._infos[agent] = self._info(name, decisions, row)
        for agent in self._rewards:
            self._cumm_rewards[agent] = self._cumm_rewards.get(agent, 0.0) + self._rewards[agent]
        self._live_agents = sorted(a for a in self._live_agents if a not in self._finished)

    def _create_empty_actions(self, behavior_name: str, num_agents: int) -> ActionTuple:
        a = self._assert_loaded().behavior_specs[behavior_name].action_spec
        return ActionTuple(np.zeros((num_agents, a.continuous_size), np.float32),
                           np.zeros((num_agents, len(a.discrete_branches)), np.int32))

    @staticmethod
    def _obs_row(obs: List[np.ndarray], row: int) -> Any:
        parts = tuple(np.asarray(o[row], np.float32) for o in obs)
        return parts[0] if len(parts) == 1 else parts

    def _info(self, name: str, steps: Any, row: int) -> Dict[str, Any]:
        info: Dict[str, Any] = {"behavior_name": name, "group_id": int(steps.group_id[row]),
                                "group_reward": float(steps.group_reward[row])}
        branches = self._assert_loaded().behavior_specs[name].action_spec.discrete_branches
        if branches:
            masks = getattr(steps, "action_mask", None)
            allowed = [np.ones(b, np.int8) if masks is None else (~np.asarray(m[row], bool)).astype(np.int8)
                       for b, m in zip(branches, masks if masks is not None else [None] * len(branches))]
            info["action_mask"] = allowed[0] if len(branches) == 1 else tuple(allowed)
            space = self._action_spaces.get(name)
            if isinstance(space, spaces.Tuple):
                info["action_mask"] = (None, info["action_mask"])
        return info

    # ------------------------------------------------------------------ the rest of PettingZoo's API
    def seed(self, seed: Optional[int] = None) -> None:
        """Seed the action spaces' samplers (the environment itself is seeded when it is made)."""
        self._seed = seed
        if seed is not None:
            for space in self._action_spaces.values():
                space.seed(seed)

    def render(self) -> None:
        """Not supported: Unity renders in its own window."""
        return None

    def state(self) -> np.ndarray:
        raise NotImplementedError("A Unity environment has no global state observation; use the agents' "
                                  "observations.")

    def close(self) -> None:
        """Close the environment (once)."""
        if self._env is not None:
            env, self._env = self._env, None
            env.close()
