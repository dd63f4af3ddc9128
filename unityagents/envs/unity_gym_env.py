"""A ``gymnasium.Env`` over any ``BaseEnv`` with one behaviour of one agent (mlagents_envs' ``UnityToGymWrapper``).

``mlagents_envs.envs.unity_gym_env`` -> ``unityagents.envs.unity_gym_env``; the wrapper takes the
same arguments and builds the same spaces, in gymnasium's API (``reset()`` -> ``(obs, info)``,
``step()`` -> ``(obs, reward, terminated, truncated, info)``)::

    env = UnityToGymWrapper(default_registry["Basic"].make(), uint8_visual=True)

It drives the environment through the low-level API only (``behavior_specs``, ``reset``,
``get_steps``, ``set_actions``, ``step``), so it wraps a Unity build, a built-in scene or a
user's own ``BaseEnv`` alike.

Spaces, from the behaviour's ``BehaviorSpec``:

* each camera (a 3-D sensor): ``Box(0, 1, shape, float32)``, or ``Box(0, 255, shape, uint8)`` with
  ``uint8_visual``; the shape is the spec's (channels first through the low-level API);
* the vector sensors (1-D), concatenated: ``Box(-inf, inf, (total,), float32)``; other sensors
  (a variable-length one) are left out;
* the observation: the first camera, or the vectors when there is no camera; with
  ``allow_multiple_obs`` a ``Tuple`` of every camera then the vectors (a list of arrays);
* actions: ``Discrete(b)`` for one branch, ``MultiDiscrete`` for several (``Discrete`` of their
  product with ``flatten_branched``), ``Box(-1, 1, (n,), float32)`` when continuous; a hybrid
  behaviour is refused.

**Episodes.** A step whose agent is in ``TerminalSteps`` ends the episode with that terminal
step's observation and reward: ``terminated``, or ``truncated`` when the terminal step says it was
interrupted (a max step). ``reset()`` then resets the environment, as ``step()`` after the end
is refused. ``info["step"]`` is the ``DecisionSteps`` or ``TerminalSteps`` the step came from.
"""
from __future__ import annotations

import itertools
import logging
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

try:
    import gymnasium
    from gymnasium import error, spaces
    from gymnasium.envs.registration import EnvSpec
except ImportError as exc:  # pragma: no cover - exercised only without gymnasium
    raise ImportError(
        "unityagents.envs.unity_gym_env needs the 'gymnasium' package, which is not installed. Install it with "
        "'pip install gymnasium' (it is listed in requirements.txt).") from exc

from unityagents.base_env import ActionTuple, BaseEnv, DecisionSteps, TerminalSteps

logger = logging.getLogger("unityagents")

__all__ = ["ActionFlattener", "GymStepResult", "UnityGymException", "UnityToGymWrapper"]

#: What ``step`` returns: observation, reward, terminated, truncated, info.
GymStepResult = Tuple[Any, float, bool, bool, Dict[str, Any]]


class UnityGymException(error.Error):
    """The environment cannot be wrapped as it is, or the wrapper was used out of order."""


class UnityToGymWrapper(gymnasium.Env):
    """A gymnasium environment over one behaviour of one agent (see the module docstring).

    :param unity_env: the ``BaseEnv`` to wrap; ``close()`` closes it.
    :param uint8_visual: cameras as uint8 0..255 instead of float32 0..1.
    :param flatten_branched: several discrete branches as one ``Discrete`` of every combination.
    :param allow_multiple_obs: every camera and the vectors, as a tuple, instead of one of them.
    :param action_space_seed: seeds the action space's sampler when not None.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, unity_env: BaseEnv, uint8_visual: bool = False, flatten_branched: bool = False,
                 allow_multiple_obs: bool = False, action_space_seed: Optional[int] = None):
        self._env = unity_env
        if not self._env.behavior_specs:
            self._env.step()
        self.visual_obs: Optional[np.ndarray] = None
        self._previous_decision_step: Optional[DecisionSteps] = None
        self._flattener: Optional[ActionFlattener] = None
        self.game_over = False
        self._allow_multiple_obs = allow_multiple_obs
        self.render_mode: Optional[str] = None
        names = list(self._env.behavior_specs.keys())
        if len(names) != 1:
            raise UnityGymException(
                f"There can only be one behavior in a UnityEnvironment if it is wrapped in a gym; this one has "
                f"{len(names)}: {names}. Use unityagents.envs.unity_parallel_env.UnityParallelEnv for all of them, "
                "or, on a unityagents.UnityEnvironment, unityagents.bridges.gym.UnityToGymWrapper(env, "
                "brain_name=...) for one (the others get zero actions).")
        self.name = names[0]
        # A reset with the same seed need not repeat the same start: the environment is seeded once,
        # when it is made (what gymnasium's check_env reads from the spec).
        self.spec = EnvSpec(f"unityagents/{self.name.split('?')[0]}-v0", entry_point=None, nondeterministic=True)
        self.group_spec = self._env.behavior_specs[self.name]
        if self._get_n_vis_obs() == 0 and self._get_vec_obs_size() == 0:
            raise UnityGymException(
                f"Behavior {self.name!r} has no camera and no vector observation "
                f"(its sensors: {[tuple(o.shape) for o in self.group_spec.observation_specs]}), so the wrapper has "
                "nothing to observe.")
        self.uint8_visual = uint8_visual
        if uint8_visual and self._get_n_vis_obs() == 0:
            logger.warning("uint8_visual was set to true, but visual observations are not in use. "
                           "This setting will not have any effect.")
        if self._get_n_vis_obs() + (self._get_vec_obs_size() > 0) >= 2 and not self._allow_multiple_obs:
            logger.warning("The environment contains multiple observations. You must define allow_multiple_obs=True "
                           "to receive them all. Otherwise, only the first visual observation (or vector observation "
                           "if there are no visual observations) will be provided in the observation.")
        self._env.reset()
        decision_steps, _ = self._env.get_steps(self.name)
        self._check_agents(len(decision_steps))
        self._previous_decision_step = decision_steps

        action_spec = self.group_spec.action_spec
        if action_spec.is_discrete():
            self.action_size = action_spec.discrete_size
            branches = action_spec.discrete_branches
            if action_spec.discrete_size == 1:
                self._action_space: spaces.Space = spaces.Discrete(branches[0])
            elif flatten_branched:
                self._flattener = ActionFlattener(branches)
                self._action_space = self._flattener.action_space
            else:
                self._action_space = spaces.MultiDiscrete(branches)
        elif action_spec.is_continuous():
            if flatten_branched:
                logger.warning("The environment has a non-discrete action space. It will not be flattened.")
            self.action_size = action_spec.continuous_size
            high = np.ones(action_spec.continuous_size, np.float32)
            self._action_space = spaces.Box(-high, high, dtype=np.float32)
        else:
            raise UnityGymException(
                f"Behavior {self.name!r} has {action_spec.continuous_size} continuous actions and the discrete "
                f"branches {list(action_spec.discrete_branches)}: the gym wrapper does not provide explicit support "
                "for both discrete and continuous actions. Use unityagents.envs.unity_parallel_env.UnityParallelEnv "
                "(a Tuple action space) or the low-level API.")
        if action_space_seed is not None:
            self._action_space.seed(action_space_seed)

        parts: List[spaces.Space] = []
        for shape in self._get_vis_obs_shape():
            if uint8_visual:
                parts.append(spaces.Box(0, 255, dtype=np.uint8, shape=shape))
            else:
                parts.append(spaces.Box(0, 1, dtype=np.float32, shape=shape))
        if self._get_vec_obs_size() > 0:
            high = np.full(self._get_vec_obs_size(), np.inf, np.float32)
            parts.append(spaces.Box(-high, high, dtype=np.float32))
        self._observation_space = spaces.Tuple(parts) if self._allow_multiple_obs else parts[0]

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict]:
        """Reset the environment; the observation of its agent's first decision, and ``{"step": DecisionSteps}``.

        ``seed`` seeds the wrapper's generator and its action space's sampler; the environment's
        own randomness is seeded when it is made (``UnityEnvironment(seed=...)``).
        """
        super().reset(seed=seed)
        if seed is not None:
            self._action_space.seed(seed)
        self._env.reset()
        decision_step, _ = self._env.get_steps(self.name)
        self._check_agents(len(decision_step))
        self.game_over = False
        obs, _, _, _, info = self._single_step(decision_step)
        return obs, info

    def step(self, action: Any) -> GymStepResult:
        """Send ``action`` to the agent, step the environment, and return gymnasium's five values."""
        if self.game_over:
            raise UnityGymException(
                "You are calling 'step()' even though this environment has already returned terminated or "
                "truncated = True. You must always call 'reset()' once an episode ends.")
        if self._flattener is not None:
            action = self._flattener.lookup_action(action)
        action = np.asarray(action).reshape((1, self.action_size))
        action_tuple = ActionTuple()
        if self.group_spec.action_spec.is_continuous():
            action_tuple.add_continuous(action)
        else:
            action_tuple.add_discrete(action)
        self._env.set_actions(self.name, action_tuple)
        self._env.step()
        decision_step, terminal_step = self._env.get_steps(self.name)
        self._check_agents(max(len(decision_step), len(terminal_step)))
        if len(terminal_step) != 0:
            self.game_over = True
            return self._single_step(terminal_step)
        self._previous_decision_step = decision_step
        return self._single_step(decision_step)

    def _single_step(self, info: Union[DecisionSteps, TerminalSteps]) -> GymStepResult:
        if self._allow_multiple_obs:
            observation: Any = [self._preprocess_single(obs[0]) for obs in self._get_vis_obs_list(info)]
            if self._get_vec_obs_size() >= 1:
                observation.append(self._get_vector_obs(info)[0, :])
        elif self._get_n_vis_obs() >= 1:
            observation = self._preprocess_single(self._get_vis_obs_list(info)[0][0])
        else:
            observation = self._get_vector_obs(info)[0, :]
        if self._get_n_vis_obs() >= 1:
            self.visual_obs = self._preprocess_single(self._get_vis_obs_list(info)[0][0])
        ended = isinstance(info, TerminalSteps)
        interrupted = bool(info.interrupted[0]) if ended else False
        return observation, float(info.reward[0]), ended and not interrupted, interrupted, {"step": info}

    def _preprocess_single(self, single_visual_obs: np.ndarray) -> np.ndarray:
        if self.uint8_visual:
            return (255.0 * np.asarray(single_visual_obs)).astype(np.uint8)
        return np.asarray(single_visual_obs, np.float32)

    def _get_n_vis_obs(self) -> int:
        return sum(1 for spec in self.group_spec.observation_specs if len(spec.shape) == 3)

    def _get_vis_obs_shape(self) -> List[Tuple[int, ...]]:
        return [tuple(spec.shape) for spec in self.group_spec.observation_specs if len(spec.shape) == 3]

    def _get_vis_obs_list(self, step_result: Union[DecisionSteps, TerminalSteps]) -> List[np.ndarray]:
        return [obs for obs in step_result.obs if len(obs.shape) == 4]

    def _get_vector_obs(self, step_result: Union[DecisionSteps, TerminalSteps]) -> np.ndarray:
        vectors = [np.asarray(obs, np.float32) for obs in step_result.obs if len(obs.shape) == 2]
        return np.concatenate(vectors, axis=1)

    def _get_vec_obs_size(self) -> int:
        return sum(spec.shape[0] for spec in self.group_spec.observation_specs if len(spec.shape) == 1)

    def render(self) -> Optional[np.ndarray]:
        """The last camera observation (the environment renders nothing new for it)."""
        return self.visual_obs

    def close(self) -> None:
        """Close the wrapped environment."""
        self._env.close()

    def seed(self, seed: Any = None) -> None:
        """mlagents_envs' method: the environment cannot be reseeded here (seed it when it is made)."""
        logger.warning("Could not seed environment %s", self.name)

    @staticmethod
    def _check_agents(n_agents: int) -> None:
        if n_agents > 1:
            raise UnityGymException(
                f"There can only be one Agent in the environment but {n_agents} were detected. Use "
                "unityagents.envs.unity_parallel_env.UnityParallelEnv (one PettingZoo agent each), or, on a "
                "unityagents.UnityEnvironment, unityagents.bridges.gym.UnityVectorEnv (one sub-environment each).")

    @property
    def reward_range(self) -> Tuple[float, float]:
        return -float("inf"), float("inf")

    @property
    def action_space(self) -> spaces.Space:
        return self._action_space

    @action_space.setter
    def action_space(self, value: spaces.Space) -> None:
        self._action_space = value

    @property
    def observation_space(self) -> spaces.Space:
        return self._observation_space

    @observation_space.setter
    def observation_space(self, value: spaces.Space) -> None:
        self._observation_space = value


class ActionFlattener:
    """Several discrete branches as one ``Discrete``: every combination of their actions, numbered.

    :param branched_action_space: the branches' sizes, e.g. ``[2, 3, 3]``.
    """

    def __init__(self, branched_action_space: Any):
        self._action_shape = list(branched_action_space)
        self.action_lookup = self._create_lookup(self._action_shape)
        self.action_space = spaces.Discrete(len(self.action_lookup))

    @classmethod
    def _create_lookup(cls, branched_action_space: Any) -> Dict[int, List[int]]:
        combos = itertools.product(*(range(n) for n in branched_action_space))
        return {i: list(combo) for i, combo in enumerate(combos)}

    def lookup_action(self, action: Any) -> List[int]:
        """The branch indices of the combination ``action``."""
        return self.action_lookup[int(action)]
