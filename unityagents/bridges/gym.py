"""Gymnasium bridges over an open ``UnityEnvironment``: train a brain with any gymnasium-speaking library.

* :class:`UnityToGymWrapper` is a ``gymnasium.Env`` over a brain with exactly one agent (Basic,
  GridWorld).
* :class:`UnityVectorEnv` is a ``gymnasium.vector.VectorEnv`` over a brain with many agents: each
  agent is a sub-environment (3DBall's 12 platforms are 12 sub-environments).

Both take an environment that is already open, default to its only External brain, and send zero
actions to any *other* External brain (use ``unityagents.bridges.pettingzoo.UnityParallelEnv`` to control
them all). Memories are not round-tripped: a recurrent policy of a gymnasium library keeps its own
state.

Spaces, from the brain's ``BrainParameters``:

==================  =======================================================================
vector state        ``Box(-inf, inf, (stateSize,), float32)``; a discrete state is
                    ``Discrete(stateSize)`` (the agent's index, int64)
camera ``k``        ``Box(0, 255, (height, width, channels), uint8)``, channels-last, 1 channel
                    for a black-and-white camera: the PNG's bytes as Unity rendered them (the
                    wire's 0..1 floats times 255), which is what image policies (SB3's
                    ``CnnPolicy``, CleanRL) expect
observation         the one space above when the brain has one input, else a ``Dict`` with keys
                    ``"state"`` and ``"camera_0"``, ``"camera_1"``, ...
actions             continuous: ``Box(-1, 1, (actionSize,), float32)`` (the built-in scenes and
                    Unity's examples clip to that range); discrete: ``Discrete(actionSize)``,
                    or ``MultiDiscrete`` for a modern brain with several branches
==================  =======================================================================

**Episodes and resets.** Unity resets an agent the moment it is done (``resetOnDone``), so API-2's
message that reports ``done`` already carries the *first observation of the next episode*, not the
last one of the ended episode. The wrappers follow that:

* ``UnityVectorEnv`` uses gymnasium's ``AutoresetMode.SAME_STEP``: the observation returned for a
  done sub-environment is its next episode's first one. ``infos["final_info"]`` marks the done
  sub-environments; ``infos["final_obs"]`` holds the terminal observation only when the protocol
  sends it (the modern protocol's terminal rows); API-2 does not, so under API-2 it is absent.
  API-2 cannot tell a time-out (the agent's max step) from the task ending, so every done is a
  ``termination``; the modern protocol's ``max_reached`` becomes a ``truncation``.
* ``UnityToGymWrapper`` returns, with ``terminated``/``truncated``, the observation the environment
  sent (under API-2 the next episode's first one); the following ``reset()`` hands back that
  observation without resetting the scene again, so no step is lost. An Academy-wide done
  (``global_done``) resets the scene.

``reset(seed=...)`` seeds the wrapper's random generator (and the action space's sampler); the
scene's own randomness is seeded once, when the environment is launched (``UnityEnvironment(...,
seed=...)``), and API-2 has no way to reseed it. So the single-agent wrapper declares itself
``spec.nondeterministic = True`` (a reset with the same seed need not repeat the same start), which
is what gymnasium's ``check_env`` reads.

**The registry.** Importing this module registers ``unityagents/Unity-v0``, whose entry point
(:func:`make_unity_env`) launches the build or built-in scene ``env_path`` and wraps it, so
``gymnasium.make("unityagents.bridges.gym:unityagents/Unity-v0", env_path="Basic")`` (the ``module:`` prefix
makes gymnasium import this module first) or, after ``import unityagents.bridges.gym``,
``gymnasium.make("unityagents/Unity-v0", env_path=...)`` gives an environment that gymnasium can
re-make from its spec; ``check_env`` then passes with its default arguments. Gymnasium 1.x loads
no plugins from package metadata, hence the import. A wrapper built directly around an open
environment has a spec without an entry point (it cannot be re-made): check it with
``check_env(..., skip_close_check=True)``.

Import cost: this module needs ``gymnasium`` (``pip install gymnasium``); importing
``unityagents`` alone does not.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

try:
    import gymnasium
    from gymnasium import spaces
    from gymnasium.envs.registration import EnvSpec
    from gymnasium.utils import seeding
    from gymnasium.vector import VectorEnv
    from gymnasium.vector.utils import batch_space
    from gymnasium.vector.vector_env import AutoresetMode
except ImportError as exc:  # pragma: no cover - exercised only without gymnasium
    raise ImportError(
        "unityagents.bridges.gym needs the 'gymnasium' package, which is not installed. Install it with "
        "'pip install gymnasium' (it is listed in requirements.txt).") from exc

from unityagents.base_env import BehaviorSteps
from unityagents.brain import BrainParameters
from unityagents.exception import UnityEnvironmentException

__all__ = ["UnityToGymWrapper", "UnityVectorEnv", "make_unity_env", "ENV_ID", "observation_space", "action_space",
           "observations", "encode_actions", "pick_brain"]


# ---------------------------------------------------------------------------------- rows
class Rows:
    """One brain's agents at one step as the bridges hand them out, one row per agent.

    The deciding agents, then those that only ended their episode; an agent in both is one row
    with both rewards and the observation of its next episode. ``terminal`` holds the ended
    episodes' last observations, where the environment reports them (not API-2).
    """

    def __init__(self, brain: BrainParameters, steps: BehaviorSteps, last_observation: bool):
        decisions, terminals = steps
        self.observations, self.states = brain.cameras_and_state(decisions.obs)
        self.agents: List[Any] = decisions.agent_id.tolist()
        #: The first ``deciding`` rows ask for a decision (the actions the environment takes).
        self.deciding = len(decisions)
        self.rewards = np.array(decisions.reward, np.float64)
        self.local_done = np.zeros(len(self.agents), bool)
        self.max_reached = np.zeros(len(self.agents), bool)
        self.terminal: Optional["Rows"] = None
        if not len(terminals):
            return
        where = decisions.agent_id_to_index
        ended = terminals.agent_id.tolist()
        rows = np.asarray([where.get(a, -1) for a in ended])
        both = rows >= 0
        self.rewards[rows[both]] += terminals.reward[both]
        self.local_done[rows[both]] = True
        self.max_reached[rows[both]] = terminals.interrupted[both]
        cameras, states = brain.cameras_and_state(terminals.obs)
        if (~both).any():  # agents that only ended: rows of their own, with their last observation
            self.observations = [np.concatenate([o, c[~both]]) for o, c in zip(self.observations, cameras)]
            self.states = np.concatenate([self.states, states[~both]])
            self.agents += [a for a, b in zip(ended, both) if not b]
            self.rewards = np.concatenate([self.rewards, terminals.reward[~both]])
            self.local_done = np.concatenate([self.local_done, np.ones(int((~both).sum()), bool)])
            self.max_reached = np.concatenate([self.max_reached, terminals.interrupted[~both]])
        if last_observation:
            self.terminal = Rows.__new__(Rows)
            self.terminal.observations, self.terminal.states, self.terminal.agents = cameras, states, ended


# ---------------------------------------------------------------------------------- spaces
def _input_spaces(brain: BrainParameters) -> Dict[str, spaces.Space]:
    parts: Dict[str, spaces.Space] = {}
    if brain.state_space_size > 0:
        if brain.state_space_type == "discrete":
            parts["state"] = spaces.Discrete(brain.state_space_size)
        else:
            parts["state"] = spaces.Box(-np.inf, np.inf, (brain.state_space_size,), np.float32)
    for k, camera in enumerate(brain.camera_resolutions):
        channels = 1 if camera.get("blackAndWhite") else 3
        parts[f"camera_{k}"] = spaces.Box(0, 255, (camera["height"], camera["width"], channels), np.uint8)
    if not parts:
        raise UnityEnvironmentException(
            f"Brain '{brain.brain_name}' has neither a state nor a camera, so it has no observation space.")
    return parts


def observation_space(brain: BrainParameters) -> spaces.Space:
    """One agent's observation space (see the module docstring)."""
    parts = _input_spaces(brain)
    return next(iter(parts.values())) if len(parts) == 1 else spaces.Dict(parts)


def action_space(brain: BrainParameters) -> spaces.Space:
    """One agent's action space: Box(-1, 1) for continuous, Discrete / MultiDiscrete for discrete."""
    if brain.action_space_type == "continuous":
        return spaces.Box(-1.0, 1.0, (brain.action_space_size,), np.float32)
    branches = list(getattr(brain, "action_branches", None) or [brain.action_space_size])
    return spaces.Discrete(branches[0]) if len(branches) == 1 else spaces.MultiDiscrete(branches)


def observations(brain: BrainParameters, info: Rows, rows: Optional[np.ndarray] = None) -> Any:
    """The observations of ``info``'s agents (all, or ``rows``), batched along axis 0, in the space's layout."""
    parts: Dict[str, np.ndarray] = {}
    select = slice(None) if rows is None else rows
    if brain.state_space_size > 0:
        states = np.asarray(info.states)[select]
        if brain.state_space_type == "discrete":
            parts["state"] = states.reshape(len(states), -1)[:, 0].astype(np.int64)
        else:
            parts["state"] = states.reshape(len(states), brain.state_space_size).astype(np.float32)
    for k, frames in enumerate(info.observations):
        frames = np.asarray(frames)[select]
        if frames.dtype != np.uint8:
            frames = np.clip(np.rint(frames * 255.0), 0, 255).astype(np.uint8)
        parts[f"camera_{k}"] = frames
    return next(iter(parts.values())) if len(parts) == 1 else parts


def _row(batch: Any, i: int) -> Any:
    return {k: v[i] for k, v in batch.items()} if isinstance(batch, dict) else batch[i]


def encode_actions(brain: BrainParameters, actions: Any, n: int) -> np.ndarray:
    """``n`` agents' actions as the float array the wire takes (``[n, action_width]``)."""
    array = np.asarray(actions, dtype=np.float64)
    width = brain.action_width
    if array.size != n * width:
        space = action_space(brain)
        raise UnityEnvironmentException(
            f"Brain '{brain.brain_name}': expected actions for {n} agent(s) in {space} ({n * width} values in "
            f"all), got an array of shape {array.shape}. Pass one action per agent.")
    return array.reshape(n, width)


def pick_brain(env: Any, brain_name: Optional[str]) -> str:
    """``brain_name`` checked against the External brains, or the only External brain."""
    external = list(env.external_brain_names)
    if brain_name is None:
        if len(external) != 1:
            raise UnityEnvironmentException(
                f"The environment has {len(external)} External brains ({external}); name the one to wrap with "
                "brain_name=..., or use unityagents.bridges.pettingzoo.UnityParallelEnv to control all of them.")
        return external[0]
    if brain_name not in external:
        raise UnityEnvironmentException(
            f"Brain {brain_name!r} is not an External brain of this environment; External brains: {external}.")
    return brain_name


class _Driver:
    """What both wrappers share: stepping one brain of an open environment, zeros for the others."""

    def __init__(self, env: Any, brain_name: Optional[str], train_mode: bool):
        self.env = env
        self.brain_name = pick_brain(env, brain_name)
        self.brain: BrainParameters = env.brains[self.brain_name]
        self.train_mode = train_mode
        self.info: Optional[Rows] = None
        self.agents: List[Any] = []

    def reset(self) -> Rows:
        infos = self.env.reset_behaviors(train_mode=self.train_mode)
        self.info = self._take(infos, first=True)
        return self.info

    def step(self, actions: np.ndarray) -> Rows:
        action = {}
        for name in self.env.external_brain_names:
            spec = self.env.brains[name].behavior_spec.action_spec
            if name == self.brain_name:
                action[name] = spec.tuple_of(actions[:len(self._last_infos[name][0])])
            else:
                rows = len(self._last_infos[name][0]) if name in self._last_infos else 0
                action[name] = spec.empty_action(rows)
        infos = self.env.step_behaviors(action)
        self.info = self._take(infos, first=False)
        return self.info

    def _take(self, infos: Dict[str, BehaviorSteps], first: bool) -> Rows:
        self._last_infos = infos
        info = Rows(self.brain, infos[self.brain_name], bool(getattr(self.env, "reports_last_observation", True)))
        agents = list(info.agents)
        if first:
            self.agents = agents
        elif agents != self.agents:
            raise UnityEnvironmentException(
                f"Brain '{self.brain_name}' changed its agents from {self.agents} to {agents}; the gymnasium "
                "wrappers need a fixed set of agents, in a fixed order (as API-2 scenes have).")
        return info


def _flags(info: Rows, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """(terminated, truncated) per agent: ``max_reached`` (modern protocol) is a truncation."""
    done = np.asarray(info.local_done, dtype=bool).reshape(n)
    reached = getattr(info, "max_reached", None)
    reached = np.zeros(n, bool) if reached is None or len(reached) != n else np.asarray(reached, dtype=bool)
    return done & ~reached, done & reached


def _terminal_rows(brain: BrainParameters, info: Rows, agents: List[Any]) -> Dict[int, Any]:
    """Row index -> last observation, for the agents the protocol sent a terminal row for."""
    terminal = info.terminal
    if terminal is None or not len(getattr(terminal, "agents", [])):
        return {}
    batch = observations(brain, terminal)
    index = {agent: i for i, agent in enumerate(agents)}
    return {index[agent]: _row(batch, j) for j, agent in enumerate(terminal.agents) if agent in index}


# ---------------------------------------------------------------------------------- single agent
#: mlagents_envs' keywords: given any of them, ``UnityToGymWrapper`` is mlagents_envs' wrapper.
_UNITY_GYM_KEYWORDS = frozenset({"unity_env", "uint8_visual", "flatten_branched", "allow_multiple_obs",
                                 "action_space_seed"})


def _speaks_unity(args: Tuple[Any, ...], kwargs: Dict[str, Any], unity_keywords: frozenset) -> bool:
    """Whether a wrapper was called as mlagents_envs' is: with one of its keywords, or on a ``BaseEnv``
    that is not a ``unityagents.UnityEnvironment`` (which alone has the conveniences' ``reset_behaviors``)."""
    env = args[0] if args else kwargs.get("unity_env", kwargs.get("env"))
    return bool(unity_keywords & set(kwargs)) or not hasattr(env, "reset_behaviors")


class UnityToGymWrapper(gymnasium.Env):
    """A ``gymnasium.Env`` over an External brain that has exactly one agent.

    Called as mlagents_envs' wrapper is (``UnityToGymWrapper(unity_env, uint8_visual=...,
    flatten_branched=..., allow_multiple_obs=..., action_space_seed=...)``: any of those keywords,
    or an environment that is not a ``unityagents.UnityEnvironment``), it returns
    ``unityagents.envs.unity_gym_env.UnityToGymWrapper`` instead, with mlagents_envs' spaces and
    episodes.

    :param env: an open ``unityagents.UnityEnvironment``; the wrapper does not own it, but
        ``close()`` closes it unless ``close_env=False``.
    :param brain_name: the brain to drive; by default the only External brain.
    :param train_mode: reset the scene in training (fast) mode.
    """

    metadata = {"render_modes": []}

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if _speaks_unity(args, kwargs, _UNITY_GYM_KEYWORDS):
            from unityagents.envs.unity_gym_env import UnityToGymWrapper as UnityGym

            return UnityGym(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, env: Any, brain_name: Optional[str] = None, train_mode: bool = True, close_env: bool = True):
        self._driver = _Driver(env, brain_name, train_mode)
        self.brain = self._driver.brain
        self.observation_space = observation_space(self.brain)
        self.action_space = action_space(self.brain)
        self._close_env = close_env
        self._next_first: Optional[Any] = None  # the next episode's first observation, once done
        self.spec = EnvSpec(f"unityagents/{self.brain_name}-v0", entry_point=None, nondeterministic=True)

    @property
    def brain_name(self) -> str:
        return self._driver.brain_name

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict]:
        """Start an episode: reuse the observation Unity sent with the last done, else reset the scene."""
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
        if self._next_first is not None and not self._driver.env.global_done:
            obs, self._next_first = self._next_first, None
            return obs, {}
        info = self._driver.reset()
        if len(info.agents) != 1:
            raise UnityEnvironmentException(
                f"UnityToGymWrapper drives a brain of one agent, but '{self.brain_name}' has {len(info.agents)}; "
                "use unityagents.bridges.gym.UnityVectorEnv (one sub-environment per agent) instead.")
        self._next_first = None
        return _row(observations(self.brain, info), 0), {}

    def step(self, action: Any) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        if self._driver.info is None:
            raise UnityEnvironmentException("UnityToGymWrapper.step() was called before reset(); call reset() first.")
        if self._next_first is not None:
            raise UnityEnvironmentException("The episode has ended (terminated or truncated); call reset() first.")
        info = self._driver.step(encode_actions(self.brain, action, 1))
        obs = _row(observations(self.brain, info), 0)
        terminated, truncated = (bool(x[0]) for x in _flags(info, 1))
        if self._driver.env.global_done:
            terminated = terminated or not truncated
        extra: Dict[str, Any] = {}
        if terminated or truncated:
            self._next_first = obs
            terminal = _terminal_rows(self.brain, info, self._driver.agents)
            if 0 in terminal:
                obs = terminal[0]
        return obs, float(info.rewards[0]), terminated, truncated, extra

    def close(self) -> None:
        if self._close_env:
            self._driver.env.close()


# ---------------------------------------------------------------------------------- many agents
class UnityVectorEnv(VectorEnv):
    """A ``gymnasium.vector.VectorEnv`` whose sub-environments are the agents of one External brain.

    Auto-resets in ``SAME_STEP`` mode (see the module docstring). Rewards are float32-compatible
    float64 arrays, ``terminations``/``truncations`` bool arrays of ``num_envs``.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, env: Any, brain_name: Optional[str] = None, train_mode: bool = True, close_env: bool = True):
        self._driver = _Driver(env, brain_name, train_mode)
        self.brain = self._driver.brain
        self._close_env = close_env
        info = self._driver.reset()
        self.num_envs = len(info.agents)
        if self.num_envs == 0:
            raise UnityEnvironmentException(f"Brain '{self.brain_name}' has no agents to make sub-environments of.")
        self._first = observations(self.brain, info)
        self.single_observation_space = observation_space(self.brain)
        self.single_action_space = action_space(self.brain)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    @property
    def brain_name(self) -> str:
        return self._driver.brain_name

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict]:
        """Reset the scene (every sub-environment at once: API-2 resets the whole Academy)."""
        if seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(seed)
            self.action_space.seed(seed)
            self.single_action_space.seed(seed)
        if self._first is not None:  # the reset done in __init__ has not been used yet
            obs, self._first = self._first, None
            return obs, {}
        return observations(self.brain, self._driver.reset()), {}

    def step(self, actions: Any) -> Tuple[Any, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        if self._driver.info is None:
            raise UnityEnvironmentException("UnityVectorEnv.step() was called before reset(); call reset() first.")
        self._first = None
        info = self._driver.step(encode_actions(self.brain, actions, self.num_envs))
        obs = observations(self.brain, info)
        rewards = np.asarray(info.rewards, dtype=np.float64).reshape(self.num_envs)
        terminations, truncations = _flags(info, self.num_envs)
        infos: Dict[str, Any] = {}
        if self._driver.env.global_done:  # the Academy ended every episode: start the next ones now
            terminations = terminations | ~truncations
            obs = observations(self.brain, self._driver.reset())
        done = terminations | truncations
        if done.any():
            terminal = _terminal_rows(self.brain, info, self._driver.agents)
            for i in np.flatnonzero(done):
                entry: Dict[str, Any] = {"final_info": {"max_reached": bool(truncations[i])}}
                if i in terminal:
                    entry["final_obs"] = terminal[i]
                infos = self._add_info(infos, entry, int(i))
        return obs, rewards, terminations, truncations, infos

    def close_extras(self, **kwargs: Any) -> None:
        if self._close_env:
            self._driver.env.close()

    def __enter__(self) -> "UnityVectorEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------------------- registry
ENV_ID = "unityagents/Unity-v0"


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def make_unity_env(env_path: str, brain_name: Optional[str] = None, train_mode: bool = True,
                   base_port: Optional[int] = None, worker_id: int = 0, **unity_kwargs: Any) -> UnityToGymWrapper:
    """The registry's entry point: launch ``env_path`` and wrap its one-agent brain.

    ``env_path`` is a build or a built-in scene name; ``unity_kwargs`` go to ``UnityEnvironment``
    (``seed``, ``protocol``, ``no_graphics``, ``timeout_wait``, ``engine_config``, ...). Without
    ``base_port`` a free port is taken, so that gymnasium can re-make the environment from its spec
    while the first one is still open (``check_env`` does); with a fixed ``base_port``, give each
    simultaneous copy its own ``worker_id``.
    """
    from unityagents.environment import UnityEnvironment

    if base_port is None:
        base_port = _free_port() - int(worker_id)
    env = UnityEnvironment(env_path, worker_id=worker_id, base_port=base_port, **unity_kwargs)
    try:
        return UnityToGymWrapper(env, brain_name=brain_name, train_mode=train_mode)
    except BaseException:
        env.close()
        raise


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point="unityagents.bridges.gym:make_unity_env", nondeterministic=True)
