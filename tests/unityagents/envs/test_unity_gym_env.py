"""mlagents_envs' gym wrapper here: over a user's own ``BaseEnv`` (no process), and over a built-in scene."""
from __future__ import annotations

import socket
import warnings

import numpy as np
import pytest

from unityagents.base_env import (
    ActionSpec,
    BaseEnv,
    BehaviorMapping,
    BehaviorSpec,
    DecisionSteps,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
    TerminalSteps,
)
from unityagents.envs.unity_gym_env import ActionFlattener, UnityGymException, UnityToGymWrapper


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scripted(BaseEnv):
    """A user's mock: behaviours of ``agents`` agents whose episode ends after ``length`` steps."""

    def __init__(self, shapes, action_spec, behaviors=("B?team=0",), agents=1, length=3, interrupted=False):
        obs = [ObservationSpec(tuple(s), (DimensionProperty.UNSPECIFIED,) * len(s), ObservationType.DEFAULT, f"s{i}")
               for i, s in enumerate(shapes)]
        self.spec = BehaviorSpec(obs, action_spec)
        self.behaviors, self.agents, self.length, self.interrupted = list(behaviors), agents, length, interrupted
        self.t, self.sent, self.closed = 0, [], False

    @property
    def behavior_specs(self):
        return BehaviorMapping({b: self.spec for b in self.behaviors})

    def reset(self):
        self.t = 0

    def step(self):
        self.t += 1

    def close(self):
        self.closed = True

    def set_actions(self, behavior_name, action):
        self.sent.append((behavior_name, action.continuous.copy(), action.discrete.copy()))

    def set_action_for_agent(self, behavior_name, agent_id, action):
        raise NotImplementedError

    def _obs(self, n):
        return [np.full((n,) + tuple(o.shape), 0.25 * (self.t + 1), np.float32) for o in self.spec.observation_specs]

    def get_steps(self, behavior_name):
        n = self.agents
        ids = np.arange(n, dtype=np.int32)
        masks = [np.zeros((n, b), bool) for b in self.spec.action_spec.discrete_branches] or None
        if self.t and self.t % self.length == 0:  # the episode ended: a terminal row only
            terminal = TerminalSteps(self._obs(n), np.full(n, 1.0, np.float32), np.full(n, self.interrupted),
                                     ids, np.zeros(n, np.int32), np.zeros(n, np.float32))
            return DecisionSteps.empty(self.spec), terminal
        decisions = DecisionSteps(self._obs(n), np.full(n, 0.1, np.float32), ids, masks, np.zeros(n, np.int32),
                                  np.zeros(n, np.float32))
        return decisions, TerminalSteps.empty(self.spec)


# The spaces mlagents_envs 1.1.0's wrapper builds for the same specs (bench/mlagents_envs_side_by_side.py).
PEER_SPACES = [
    ([(8,)], ActionSpec.create_continuous(2), {}, "Box(-inf, inf, (8,), float32)", "Box(-1.0, 1.0, (2,), float32)"),
    ([(3, 84, 84), (2,)], ActionSpec.create_discrete((4,)), {}, "Box(0.0, 1.0, (3, 84, 84), float32)", "Discrete(4)"),
    ([(3, 84, 84), (2,)], ActionSpec.create_discrete((4,)),
     {"uint8_visual": True, "allow_multiple_obs": True, "flatten_branched": True},
     "Tuple(Box(0.0, 255.0, (3, 84, 84), uint8), Box(-inf, inf, (2,), float32))", "Discrete(4)"),
    ([(5,), (1,)], ActionSpec.create_discrete((3, 2)), {}, "Box(-inf, inf, (6,), float32)", "MultiDiscrete([3, 2])"),
    ([(5,), (1,)], ActionSpec.create_discrete((3, 2)),
     {"uint8_visual": True, "allow_multiple_obs": True, "flatten_branched": True},
     "Tuple(Box(-inf, inf, (6,), float32))", "Discrete(6)"),
]


def _space(space) -> str:
    name = type(space).__name__
    if name == "Tuple":
        return "Tuple(" + ", ".join(_space(s) for s in space.spaces) + ")"
    if name == "Box":
        return f"Box({float(space.low.min())}, {float(space.high.max())}, {tuple(space.shape)}, {space.dtype})"
    if name == "Discrete":
        return f"Discrete({int(space.n)})"
    return f"MultiDiscrete({[int(n) for n in space.nvec]})"


@pytest.mark.parametrize("shapes, action, kwargs, obs_space, act_space", PEER_SPACES)
def test_spaces_are_those_of_mlagents_envs(shapes, action, kwargs, obs_space, act_space):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = UnityToGymWrapper(Scripted(shapes, action), **kwargs)
    assert (_space(env.observation_space), _space(env.action_space)) == (obs_space, act_space)
    obs, info = env.reset()
    assert env.observation_space.contains(tuple(obs) if isinstance(obs, list) else obs)
    assert isinstance(info["step"], DecisionSteps)


@pytest.mark.parametrize("interrupted", [False, True])
def test_an_episode_ends_with_its_terminal_step(interrupted):
    mock = Scripted([(4,)], ActionSpec.create_discrete((3, 2)), length=3, interrupted=interrupted)
    env = UnityToGymWrapper(mock, flatten_branched=True, action_space_seed=0)
    env.reset()
    results = [env.step(5) for _ in range(3)]
    assert mock.sent[0][2].tolist() == [ActionFlattener([3, 2]).lookup_action(5)] == [[2, 1]]
    assert [r[2:4] for r in results] == [(False, False), (False, False), (not interrupted, interrupted)]
    obs, reward, _, _, info = results[-1]
    assert reward == 1.0 and isinstance(info["step"], TerminalSteps) and np.allclose(obs, 1.0)
    with pytest.raises(UnityGymException, match="reset"):
        env.step(0)
    obs, _ = env.reset()
    assert np.allclose(obs, 0.25) and env.step(0)[2:4] == (False, False)
    env.close()
    assert mock.closed


def test_what_it_cannot_wrap_is_named_with_what_to_use():
    with pytest.raises(UnityGymException, match=r"one behavior.*\['A', 'B'\].*UnityParallelEnv"):
        UnityToGymWrapper(Scripted([(4,)], ActionSpec.create_continuous(1), behaviors=("A", "B")))
    with pytest.raises(UnityGymException, match="one Agent in the environment but 3 were detected.*UnityParallelEnv"):
        UnityToGymWrapper(Scripted([(4,)], ActionSpec.create_continuous(1), agents=3))
    with pytest.raises(UnityGymException, match="both discrete and continuous"):
        UnityToGymWrapper(Scripted([(4,)], ActionSpec.create_hybrid(1, (2,))))


def test_the_registry_s_basic_through_the_bridges_door_passes_gymnasium_s_checker():
    from gymnasium.utils.env_checker import check_env

    from unityagents.bridges.gym import UnityToGymWrapper as BridgeWrapper
    from unityagents.registry import default_registry

    env = BridgeWrapper(default_registry["Basic"].make(base_port=free_port(), seed=0), action_space_seed=0)
    try:
        assert isinstance(env, UnityToGymWrapper)  # mlagents_envs' keywords: mlagents_envs' wrapper
        assert env.name == "Basic?team=0" and _space(env.action_space) == "Discrete(2)"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_env(env, skip_close_check=True, skip_render_check=True)
        env.reset(seed=0)
        ends = 0
        for _ in range(60):
            _, _, terminated, truncated, _ = env.step(1)  # always towards the large goal
            if terminated or truncated:
                ends += 1
                env.reset()
        assert ends >= 5
    finally:
        env.close()
