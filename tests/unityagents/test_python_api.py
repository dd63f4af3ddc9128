"""The two doors of ``UnityEnvironment`` at the byte level, the protocol it chooses, and the step
types' mapping behaviour (``docs/python-api.md``)."""
from __future__ import annotations

import struct
import uuid

import numpy as np
import pytest

from tests.unityagents.test_environment import (  # noqa: F401 (fake is a fixture)
    FRAME_A,
    action_message,
    fake,
    full_session_ops,
)
from unityagents import BrainInfo, UnityActionException
from unityagents.base_env import ActionSpec, ActionTuple, DecisionSteps, TerminalSteps
from unityagents.launcher import build_protocol, choose_protocol
from unityagents.side_channels import EngineConfigurationChannel, EnvironmentParametersChannel, SideChannel


def test_the_seeds_door_sends_the_seeds_bytes(fake):  # noqa: F811
    """The seed's flow on the raw environment (no test view): plain arrays in, BrainInfo out, and
    exactly the bytes of the seed's protocol on the wire, the global done refused as the seed does."""
    config, ops = full_session_ops()
    env = fake.launch(ops).env
    info = env.reset(train_mode=True, config={"gravity": 3})
    assert set(info) == {"Ext", "Teacher"} and all(isinstance(i, BrainInfo) for i in info.values())
    ext = info["Ext"]
    assert ext.agents == [-12, 40] and ext.states.shape == (2, 3) and ext.memories.shape == (2, 2)
    np.testing.assert_allclose(ext.observations[0][0], FRAME_A / 255.0, atol=1e-6)
    info = env.step(np.array([[0.25, -1.0], [1.0, 0.5]]))
    assert info["Ext"].local_done == [True, False]
    np.testing.assert_allclose(info["Ext"].rewards, [0.1, -1.0])
    env.step({"Ext": [0.0] * 4}, memory={"Ext": [[1, 2], [3, 4]]}, value=[5, 6])
    assert env.global_done is True
    with pytest.raises(UnityActionException, match="The episode is completed"):
        env.step([0.0] * 4)
    env.close()
    expected = (b"RESET" + config + b"RECEIVED" * 4
                + b"STEP" + action_message([0.25, -1.0, 1.0, 0.5]) + b"RECEIVED" * 4
                + b"STEP" + action_message([0.0] * 4, [1.0, 2.0, 3.0, 4.0], [5.0, 6.0]) + b"RECEIVED" * 4
                + b"EXIT")
    assert fake.transcript() == expected


def test_the_low_level_door_sends_the_same_bytes(fake):  # noqa: F811
    """``set_actions`` + ``step()`` and ``set_action_for_agent`` put the same actions on the wire as
    the seed's arrays; a behaviour given none gets zeros."""
    config, ops = full_session_ops()
    env = fake.launch(ops).env
    env.reset(train_mode=True, config={"gravity": 3})
    decisions, terminals = env.get_steps("Ext")
    assert list(decisions) == [-12, 40] and 40 in decisions and 7 not in decisions and len(terminals) == 0
    assert decisions[40].obs[1].tolist() == pytest.approx([10.5, 11, 12])
    # cameras are channels first through this door, as in mlagents_envs: (C, H, W) of the 3x4 RGB frames
    assert env.behavior_specs["Ext"].observation_specs[0].shape == (3, 3, 4)
    assert decisions.obs[0].shape == (2, 3, 3, 4)
    np.testing.assert_allclose(decisions[-12].obs[0], np.moveaxis(FRAME_A, -1, 0) / 255.0, atol=1e-6)
    env.set_actions("Ext", ActionTuple(np.array([[0.25, -1.0], [9.0, 9.0]])))
    env.set_action_for_agent("Ext", 40, ActionTuple(np.array([[1.0, 0.5]])))
    env.step()
    decisions, terminals = env.get_steps("Ext")
    assert list(terminals) == [-12] and terminals[-12].reward == pytest.approx(0.1)
    env.step()  # nothing set: zeros
    env.close()
    expected = (b"RESET" + config + b"RECEIVED" * 4
                + b"STEP" + action_message([0.25, -1.0, 1.0, 0.5]) + b"RECEIVED" * 4
                + b"STEP" + action_message([0.0] * 4, [0.0] * 4, [0.0, 0.0]) + b"RECEIVED" * 4
                + b"EXIT")
    assert fake.transcript() == expected


# ---------------------------------------------------------------------------- which protocol
def _build(tmp_path, *assemblies: str) -> str:
    binary = tmp_path / "Game.x86_64"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    for path in assemblies:
        f = tmp_path / "Game_Data" / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"")
    return str(binary)


@pytest.mark.parametrize("assemblies, protocol", [
    (["Managed/Assembly-CSharp.dll", "Managed/UnityEngine.dll"], "api2"),      # a 2018 player
    (["Managed/Grpc.Core.dll", "Managed/Assembly-CSharp.dll"], "grpc"),         # a modern Mono player
    (["Managed/Unity.ML-Agents.dll"], "grpc"),
    (["Plugins/x86_64/libgrpc_csharp_ext.x64.so", "il2cpp_data/Metadata/global-metadata.dat"], "grpc"),  # IL2CPP
    ([], None),                                                                  # no data folder at all
])
def test_a_builds_protocol_is_told_from_its_data_folder(tmp_path, assemblies, protocol):
    binary = _build(tmp_path, *assemblies)
    assert build_protocol(binary) == protocol


def test_the_protocol_is_chosen_only_when_not_named(tmp_path, monkeypatch):
    class Channel(SideChannel):
        def on_message_received(self, msg):
            pass

    monkeypatch.chdir(tmp_path)
    assert choose_protocol("3DBall", None) == "api2"                       # a built-in scene speaks both
    assert choose_protocol("3DBall", None, [Channel(uuid.uuid4())]) == "grpc"
    assert choose_protocol("3DBall", None, num_areas=2) == "grpc"
    assert choose_protocol("3DBall", "grpc") == "grpc"
    _build(tmp_path, "Managed/Grpc.Core.dll")
    assert choose_protocol("Game", None) == "grpc"
    assert choose_protocol("Game", "api2") == "api2"                      # named: never second-guessed


# ---------------------------------------------------------------------------- side channels and step types
def test_mlagents_channels_queue_the_bytes_unity_reads():
    engine = EngineConfigurationChannel()
    engine.set_configuration_parameters(width=64, height=48, time_scale=2.5)
    assert engine.take_queued() == [struct.pack("<iii", 0, 64, 48), struct.pack("<if", 2, 2.5)]
    parameters = EnvironmentParametersChannel()
    parameters.set_float_parameter("mass", 2.0)
    parameters.set_uniform_sampler_parameters("size", 1.0, 3.0, 7)
    parameters.set_gaussian_sampler_parameters("size", 0.5, 0.1, 8)
    parameters.set_multirangeuniform_sampler_parameters("size", [(0, 1), (2, 3)], 9)
    key = struct.pack("<i", 4) + b"mass"
    size = struct.pack("<i", 4) + b"size"
    assert parameters.take_queued() == [
        key + struct.pack("<if", 0, 2.0),
        size + struct.pack("<iiiff", 1, 7, 0, 1.0, 3.0),
        size + struct.pack("<iiiff", 1, 8, 1, 0.5, 0.1),
        size + struct.pack("<iiii4f", 1, 9, 2, 4, 0, 1, 2, 3)]
    assert str(engine.channel_id) == "e951342c-4f7e-11ea-b238-784f4387d1f7"
    assert str(parameters.channel_id) == "534c891e-810f-11ea-a9d0-822485860400"


def test_action_spec_makes_actions_of_its_shape():
    spec = ActionSpec.create_hybrid(2, [3, 5])
    action = spec.random_action(4, np.random.default_rng(0))
    assert action.continuous.shape == (4, 2) and action.discrete.shape == (4, 2)
    assert np.all((action.continuous >= -1) & (action.continuous < 1))
    assert np.all(action.discrete < np.array([3, 5])) and action.discrete.dtype == np.int32
    assert spec.empty_action(3).continuous.tolist() == [[0, 0]] * 3
    assert ActionSpec.create_discrete([2]).is_discrete() and ActionSpec.create_continuous(3).is_continuous()
    tuple_ = ActionTuple()
    tuple_.add_discrete([[1], [0]])
    assert tuple_.discrete.shape == (2, 1) and tuple_.continuous.shape == (2, 0)


def test_steps_index_by_agent_id():
    decisions = DecisionSteps([np.arange(6, dtype=np.float32).reshape(3, 2)], np.array([0.5, 1.0, 2.0]),
                              np.array([4, 9, 2]), [np.array([[False, True]] * 3)])
    assert len(decisions) == 3 and list(decisions) == [4, 9, 2] and 9 in decisions and 5 not in decisions
    step = decisions[2]
    assert step.obs[0].tolist() == [4, 5] and step.reward == 2.0 and step.action_mask[0].tolist() == [False, True]
    with pytest.raises(KeyError, match="agent_id 5 is not present in the DecisionSteps"):
        decisions[5]
    terminals = TerminalSteps([np.zeros((1, 2))], np.array([-1.0]), np.array([True]), np.array([9]))
    assert terminals[9].interrupted is True and terminals[9].reward == -1.0 and 4 not in terminals
