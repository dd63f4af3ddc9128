"""UnityEnvironment against the built-in scenes: BrainInfo shapes and types, and determinism per seed."""

import numpy as np
import pytest

from tests.conftest import free_port
from tests.step_view import InfoView
from unityagents import UnityEnvironment

EXPECTED = {
    # scene: (brain, agents, state shape per agent, state dtype, observations, action width, discrete?)
    "3DBall": ("Ball3DBrain", 12, (8,), np.float32, [], 2, False),
    "Basic": ("BasicBrain", 1, (1,), np.float32, [], 1, True),
    "GridWorld": ("GridWorldBrain", 1, (0,), np.float32, [(84, 84, 3)], 1, True),
}


def rollout(scene: str, seed: int, steps: int = 20):
    brain, n, _, _, _, width, discrete = EXPECTED[scene]
    rng = np.random.default_rng(123)
    trace = []
    with InfoView(UnityEnvironment(scene, base_port=free_port(), seed=seed)) as env:
        infos = [env.reset()]
        for _ in range(steps):
            if env.global_done:
                infos.append(env.reset())
            if discrete:
                action = rng.integers(0, 4 if scene == "GridWorld" else 2, (n, 1))
            else:
                action = rng.uniform(-1, 1, (n, width))
            infos.append(env.step(action))
        for info in infos:
            b = info[brain]
            trace.append((b.states.copy(), list(b.rewards), list(b.local_done),
                          [o.copy() for o in b.observations]))
    return infos, trace


@pytest.mark.parametrize("scene", sorted(EXPECTED))
def test_brain_info_shapes_and_types(scene):
    brain, n, state_shape, dtype, observations, width, _ = EXPECTED[scene]
    infos, _ = rollout(scene, seed=0, steps=5)
    for info in infos:
        assert list(info) == [brain]
        b = info[brain]
        assert len(b.agents) == n and len(set(b.agents)) == n
        assert b.states.shape == (n,) + state_shape and b.states.dtype == dtype
        assert [o.shape[1:] for o in b.observations] == observations
        for o in b.observations:
            assert o.dtype == np.float32 and 0.0 <= o.min() and o.max() <= 1.0
        assert len(b.rewards) == n and all(isinstance(r, float) for r in b.rewards)
        assert len(b.local_done) == n and all(isinstance(d, bool) for d in b.local_done)
        assert b.memories.shape == (n, 0)
    assert infos[-1][brain].previous_actions.shape == (n, width)


@pytest.mark.parametrize("scene", sorted(EXPECTED))
def test_same_seed_same_trajectory_other_seed_differs(scene):
    _, a = rollout(scene, seed=7)
    _, b = rollout(scene, seed=7)
    _, c = rollout(scene, seed=8)
    flat = lambda trace: [np.concatenate([s.ravel()] + [o.ravel() for o in obs]) for s, _, _, obs in trace]  # noqa: E731
    for x, y in zip(flat(a), flat(b)):
        np.testing.assert_array_equal(x, y)
    assert [r for _, r, _, _ in a] == [r for _, r, _, _ in b]
    if scene != "Basic":  # Basic always starts at position 10: its seed changes nothing
        assert any(not np.array_equal(x, y) for x, y in zip(flat(a), flat(c)))
