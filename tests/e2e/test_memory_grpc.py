"""Recurrent PPO over the modern protocol: the memory the trainer keeps, its settings, and Hallway.

A modern Unity environment stores no memory (its brains report ``memorySize`` 0): the ONNX model's
``recurrent_out`` is fed back as ``recurrent_in`` by Unity's inference, zeros for a new agent, and
dropped when its episode ends. So over gRPC the trainer keeps each agent's memory itself, keyed like
every per-agent state of a trainer (``(environment, agent)`` with several environments), sized by
``memory_size`` (``network_settings.memory.memory_size`` in a Release 22 run config).
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import learn_r22
from tests.conftest import learn_over_grpc, load_config, run_academy, write
from tests.e2e.test_learn_r22 import R22_3DBALL
from tests.onnx_contract import assert_contract
from trainers.trainer.base import TrainerConfigError
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.registry import load_registry
from unityagents.brain import BrainParameters

MODERN = "Hallway?team=0"


def modern_brain(name=MODERN, memory=0) -> BrainParameters:
    """A brain as the gRPC communicator builds it (no memory), or an API-2 one with ``memory``."""
    params = {"stateSize": 6, "actionSize": 4, "memorySize": memory, "cameraResolutions": [],
              "actionDescriptions": [""] * 4, "actionSpaceType": 0, "stateSpaceType": 1}
    if not memory:
        params.update(actionBranches=[4], actionMasks=True, continuousActionContract="unit")
    return BrainParameters(name, params)


def info(agents, done=None, asked=None, seed=0) -> BrainInfo:
    n = len(agents)
    states = np.random.default_rng(seed).normal(size=(n, 6)).astype(np.float32)
    return BrainInfo([], states, np.zeros((n, 0), np.float32), [0.0] * n, list(agents),
                     list(done or [False] * n), np.zeros((n, 1), np.float32), action_masks=np.ones((n, 4), np.float32),
                     decision_requested=list(asked or [True] * n))


# ---------------------------------------------------------------- the memories the trainer keeps
def test_memories_are_kept_per_agent_key_zero_when_new_and_dropped_at_the_episode_end():
    from tests.trainers.ppo.test_ppo import make_trainer

    trainer = make_trainer(modern_brain(), use_recurrent=True, memory_size=8)
    a, b, c = ("env0", 1), ("env1", 1), ("env0", 2)  # the same agent id in two environments: two agents

    def act(agents, **kwargs):
        _, memories, _, out = trainer.take_action({MODERN: info(agents, **kwargs)})
        assert memories.shape == (len(agents), 8)
        return dict(zip(agents, out.fields["memory"])), dict(zip(agents, memories))

    used, after_first = act([a, b, c])
    assert all(not m.any() for m in used.values()), "a new agent starts from zeros"
    assert all(m.any() for m in after_first.values()), "the LSTM writes a memory"
    used, after_second = act([c, a, b], seed=1)  # another row order: keyed by agent, not by row
    for agent in (a, b, c):
        np.testing.assert_array_equal(used[agent], after_first[agent])
    # a ends its episode and asks for its next decision (its row is the new episode's first state);
    # b only reports its episode's end (its last state, for bootstrapping); c goes on.
    used, _ = act([a, b, c], done=[True, True, False], asked=[True, False, True], seed=2)
    assert not used[a].any()
    np.testing.assert_array_equal(used[b], after_second[b])
    np.testing.assert_array_equal(used[c], after_second[c])
    trainer.end_episode([c])  # its environment reset
    used, _ = act([b, c], seed=3)
    assert not used[b].any() and not used[c].any(), "an ended episode's memory is gone"


# ---------------------------------------------------------------- settings and their errors
def environment_settings(tmp_path, text, brain):
    return load_config(tmp_path, text).settings_for_environment({brain.brain_name: brain}, [brain.brain_name])


def test_memory_size_sizes_a_modern_brains_memory_and_bad_settings_are_refused_before_training(tmp_path):
    settings = environment_settings(tmp_path, "HallwayBrain:\n  use_recurrent: true\n  memory_size: 64\n",
                                    modern_brain())
    assert settings[MODERN].parameters["memory_size"] == 64
    bad = {
        "HallwayBrain:\n  use_recurrent: true\n": (modern_brain(), "key 'use_recurrent'", "Set memory_size"),
        "HallwayBrain:\n  use_recurrent: true\n  memory_size: 7\n": (modern_brain(), "key 'memory_size'", "even"),
        "HallwayBrain:\n  memory_size: 64\n": (modern_brain(), "key 'memory_size'", "use_recurrent: true"),
        "HallwayBrain:\n  use_recurrent: true\n  memory_size: 64\n": (
            modern_brain("HallwayBrain", memory=32), "has memorySize 32 in the scene", "set it to 32"),
        "HallwayBrain:\n  trainer: sac\n  use_recurrent: true\n": (
            modern_brain(), "key 'use_recurrent'", "Set memory_size"),
    }
    for text, (brain, where, fix) in bad.items():
        with pytest.raises(TrainerConfigError) as error:
            environment_settings(tmp_path, text, brain)
        message = str(error.value)
        assert "Hallway" in message and where in message and fix in message, (text, message)


def test_a_release_22_memory_block_becomes_the_recurrent_settings(tmp_path):
    text = R22_3DBALL.replace("num_layers: 2}", "num_layers: 2, memory: {memory_size: 64, sequence_length: 16}}")
    options = {flag: None for flag in learn_r22.FLAGS}
    _, config, _, _, _ = learn_r22.load(write(tmp_path / "r22.yaml", text), options, None, load_registry())
    params = config.blocks["Ball3DBrain"].parameters
    assert (params["use_recurrent"], params["memory_size"], params["sequence_length"]) == (True, 64, 16)
    defaults = R22_3DBALL.replace("num_layers: 2}", "num_layers: 2, memory: {}}")
    _, config, _, _, _ = learn_r22.load(write(tmp_path / "defaults.yaml", defaults), options, None, load_registry())
    params = config.blocks["Ball3DBrain"].parameters
    assert (params["memory_size"], params["sequence_length"]) == (128, 64)  # Release 22's defaults


# ---------------------------------------------------------------- Hallway over gRPC
HALLWAY = {"HallwayBrain": {"use_recurrent": True, "memory_size": 64, "sequence_length": 16, "batch_size": 256,
                            "buffer_size": 2048, "beta": 1.0e-2, "hidden_units": 64, "learning_rate": 1.0e-3,
                            "max_steps": 4.0e4, "summary_freq": 5000, "time_horizon": 64}}


@pytest.mark.slow
def test_recurrent_ppo_solves_hallway_over_grpc_and_its_onnx_runs_with_memory_as_unity_does(tmp_path):
    """A memoryless policy can only guess the side (about 0.4); the LSTM reads the cue and keeps it.

    The memory is 64 floats while the scene's API-2 memorySize is 32: over gRPC the size is the
    trainer's, and the academy runs the file with the file's own memory_size, as Unity does.
    """
    rewards, path = learn_over_grpc(tmp_path, "Hallway", HALLWAY, "lstm", timeout=900)
    assert rewards and rewards[-1] >= 0.9, rewards
    # The sensors as the built-in Hallway declares them over gRPC: its rays, then its one vector value.
    model = assert_contract(path, modern_brain(), sensors=[("RayPerceptionSensor", (5,)),
                                                                ("VectorSensor_size1", (1,))])
    inputs = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    assert inputs["recurrent_in"][1:] == [1, 64]
    memory_size = next(i for i in model.graph.initializer if i.name == "memory_size")
    assert onnx.numpy_helper.to_array(memory_size).tolist() == [64.0]
    # Unity's inference: zeros for a new agent, recurrent_out fed back each decision.
    scored = run_academy("Hallway", "--brain", f"HallwayBrain=internal:{path}", "--episodes", "200")
    assert scored >= rewards[-1] - 0.1, (scored, rewards)
