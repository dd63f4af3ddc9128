"""mlagents_envs 1.1's public surface, module by module, against its counterpart here.

The names and parameters below are mlagents_envs 1.1.0's (read from its wheel's source, written
down here, never imported from it). A name missing here, or a callable whose parameters differ
(other names, another order, another default, a new parameter without a default), fails.
``DIFFERENCES`` lists the few deliberate differences, each with its reason.

The behaviour facts (the bytes each side channel writes, what ``empty_action``/``random_action``
give, the gym wrapper's spaces for the same spec) were produced by mlagents_envs 1.1.0 itself in
its own virtual environment with ``python bench/mlagents_envs_side_by_side.py --peer <its python>``
(which runs the same calls on both sides and prints any difference) and are recorded here.
"""
from __future__ import annotations

import importlib
import inspect
import uuid

import numpy as np
import pytest

# module here -> {name: None (a name, an alias or a constant) or {member: [parameters] or None}}
# Parameters are "name" or "name=default" (repr of the default), self left out.
SURFACE = {
    "unityagents.base_env": {
        "AgentId": None, "GroupId": None, "BehaviorName": None,
        "DecisionStep": {"_fields": ["obs", "reward", "agent_id", "action_mask", "group_id", "group_reward"]},
        "TerminalStep": {"_fields": ["obs", "reward", "interrupted", "agent_id", "group_id", "group_reward"]},
        "DecisionSteps": {"__init__": ["obs", "reward", "agent_id", "action_mask", "group_id", "group_reward"],
                          "empty": ["spec"], "agent_id_to_index": None, "__getitem__": ["agent_id"],
                          "__iter__": [], "__len__": []},
        "TerminalSteps": {"__init__": ["obs", "reward", "interrupted", "agent_id", "group_id", "group_reward"],
                          "empty": ["spec"], "agent_id_to_index": None, "__getitem__": ["agent_id"],
                          "__iter__": [], "__len__": []},
        "ActionTuple": {"__init__": ["continuous=None", "discrete=None"], "add_continuous": ["continuous"],
                        "add_discrete": ["discrete"], "discrete_dtype": None},
        "ActionSpec": {"__init__": ["continuous_size", "discrete_branches"], "is_discrete": [], "is_continuous": [],
                       "discrete_size": None, "empty_action": ["n_agents"], "random_action": ["n_agents"],
                       "create_continuous": ["continuous_size"], "create_discrete": ["discrete_branches"],
                       "create_hybrid": ["continuous_size", "discrete_branches"]},
        "DimensionProperty": {"UNSPECIFIED": None, "NONE": None, "TRANSLATIONAL_EQUIVARIANCE": None,
                              "VARIABLE_SIZE": None},
        "ObservationType": {"DEFAULT": None, "GOAL_SIGNAL": None},
        "ObservationSpec": {"__init__": ["shape", "dimension_property", "observation_type", "name"]},
        "BehaviorSpec": {"_fields": ["observation_specs", "action_spec"]},
        "BehaviorMapping": {"__init__": ["specs"], "__getitem__": ["behavior"], "__len__": [], "__iter__": []},
        "BaseEnv": {"step": [], "reset": [], "close": [], "behavior_specs": None,
                    "set_actions": ["behavior_name", "action"],
                    "set_action_for_agent": ["behavior_name", "agent_id", "action"],
                    "get_steps": ["behavior_name"]},
    },
    "unityagents.environment": {
        "UnityEnvironment": {
            "API_VERSION": None, "DEFAULT_EDITOR_PORT": None, "BASE_ENVIRONMENT_PORT": None,
            "__init__": ["file_name=None", "worker_id=0", "base_port=None", "seed=0", "no_graphics=False",
                         "no_graphics_monitor=False", "timeout_wait=60", "additional_args=None", "side_channels=None",
                         "log_folder=None", "num_areas=1"],
            "behavior_specs": None, "academy_capabilities": None, "reset": [], "step": [], "close": [],
            "get_steps": ["behavior_name"], "set_actions": ["behavior_name", "action"],
            "set_action_for_agent": ["behavior_name", "agent_id", "action"]},
    },
    "unityagents.exception": {
        **{name: None for name in ["UnityException", "UnityEnvironmentException", "UnityCommunicationException",
                                   "UnityCommunicatorStoppedException", "UnityObservationException",
                                   "UnityActionException", "UnityTimeOutException", "UnitySideChannelException",
                                   "UnityPolicyException"]},
        "UnityWorkerInUseException": {"MESSAGE_TEMPLATE": None, "__init__": ["worker_id"]},
    },
    "unityagents.side_channels": {
        "SideChannel": {"__init__": ["channel_id"], "channel_id": None, "queue_message_to_send": ["msg"],
                        "on_message_received": ["msg"]},
        "IncomingMessage": {"__init__": ["buffer", "offset=0"], "read_bool": ["default_value=False"],
                            "read_int32": ["default_value=0"], "read_float32": ["default_value=0.0"],
                            "read_float32_list": ["default_value=None"], "read_string": ["default_value=''"],
                            "get_raw_bytes": []},
        "OutgoingMessage": {"__init__": [], "write_bool": ["b"], "write_int32": ["i"], "write_float32": ["f"],
                            "write_float32_list": ["float_list"], "write_string": ["s"],
                            "set_raw_bytes": ["buffer"]},
        # mlagents_envs writes side_channels=Optional[List[SideChannel]] (an annotation as its default): None here
        "SideChannelManager": {"__init__": ["side_channels=None"], "process_side_channel_message": ["data"],
                               "generate_side_channel_messages": []},
        "EngineConfig": {"__init__": ["width", "height", "quality_level", "time_scale", "target_frame_rate",
                                      "capture_frame_rate"], "default_config": []},
        "EngineConfigurationChannel": {
            "__init__": [], "ConfigurationType": None, "set_configuration": ["config"],
            "set_configuration_parameters": ["width=None", "height=None", "quality_level=None", "time_scale=None",
                                             "target_frame_rate=None", "capture_frame_rate=None"]},
        "EnvironmentParametersChannel": {
            "__init__": [], "EnvironmentDataTypes": None, "SamplerTypes": None,
            "set_float_parameter": ["key", "value"],
            "set_uniform_sampler_parameters": ["key", "min_value", "max_value", "seed"],
            "set_gaussian_sampler_parameters": ["key", "mean", "st_dev", "seed"],
            "set_multirangeuniform_sampler_parameters": ["key", "intervals", "seed"]},
        "FloatPropertiesChannel": {"__init__": ["channel_id=None"], "set_property": ["key", "value"],
                                   "get_property": ["key"], "list_properties": [], "get_property_dict_copy": []},
        "RawBytesChannel": {"__init__": ["channel_id"], "send_raw_data": ["data"],
                            "get_and_clear_received_messages": []},
        "StatsSideChannel": {"__init__": [], "get_and_reset_stats": []},
        "StatsAggregationMethod": {"AVERAGE": None, "MOST_RECENT": None, "SUM": None, "HISTOGRAM": None},
        "DefaultTrainingAnalyticsSideChannel": {"__init__": [], "CHANNEL_ID": None, "environment_initialized": []},
    },
    "unityagents.registry": {
        "default_registry": None,
        "UnityEnvRegistry": {"__init__": [], "register": ["new_entry"], "register_from_yaml": ["path_to_yaml"],
                             "clear": [], "__getitem__": ["identifier"], "__len__": [], "__iter__": []},
        "BaseRegistryEntry": {"__init__": ["identifier", "expected_reward", "description"], "identifier": None,
                              "expected_reward": None, "description": None, "make": []},
    },
    "unityagents.envs.unity_gym_env": {
        "UnityGymException": None,
        "UnityToGymWrapper": {"__init__": ["unity_env", "uint8_visual=False", "flatten_branched=False",
                                           "allow_multiple_obs=False", "action_space_seed=None"],
                              "reset": [], "step": ["action"], "render": [], "close": [], "seed": ["seed=None"],
                              "action_space": None, "observation_space": None, "reward_range": None},
        "ActionFlattener": {"__init__": ["branched_action_space"], "lookup_action": ["action"]},
    },
    "unityagents.envs.unity_pettingzoo_base_env": {
        "UnityPettingzooBaseEnv": {"__init__": ["env", "seed=None", "metadata=None"], "observation_spaces": None,
                                   "observation_space": ["agent"], "action_spaces": None, "action_space": ["agent"],
                                   "side_channel": None, "seed": ["seed=None"], "render": [], "dones": None,
                                   "agents": None, "rewards": None, "infos": None, "possible_agents": None,
                                   "close": [], "state": []},
    },
    "unityagents.envs.unity_parallel_env": {
        "UnityParallelEnv": {"__init__": ["env", "seed=None"], "reset": [], "step": ["actions"]},
    },
    "unityagents.envs.unity_aec_env": {
        "UnityAECEnv": {"__init__": ["env", "seed=None"], "step": ["action"], "observe": ["agent"],
                        "last": ["observe=True"]},
    },
}

#: (path, parameter) -> why it differs here.
DIFFERENCES = {
    ("unityagents.environment:UnityEnvironment.__init__", "order"):
        "the seed's door comes first (file_name, worker_id, base_port, curriculum, seed, ...); mlagents_envs' "
        "keywords are all taken by name, and a seed given 4th is refused with a message saying seed=",
    ("unityagents.environment:UnityEnvironment.__init__", "seed"):
        "None: 0 in the modern protocol's handshake, as mlagents_envs sends by default",
    ("unityagents.environment:UnityEnvironment.__init__", "timeout_wait"): "the seed's default, 30 s per answer",
    ("unityagents.exception:UnityWorkerInUseException.__init__", "order"):
        "also (message, worker_id) for this package's own messages: UnityWorkerInUseException(3) and "
        "UnityWorkerInUseException(worker_id=3) build mlagents_envs' message",
    ("unityagents.envs.unity_gym_env:UnityToGymWrapper.reset", "order"):
        "gymnasium's reset(*, seed=None, options=None)",
    ("unityagents.envs.unity_parallel_env:UnityParallelEnv.reset", "order"):
        "PettingZoo's reset(seed=None, options=None)",
}


def _members():
    for module, names in SURFACE.items():
        for name, members in names.items():
            yield module, name, members


@pytest.mark.parametrize("module, name", [(m, n) for m, n, _ in _members()])
def test_every_public_name_of_mlagents_envs_is_here(module, name):
    loaded = importlib.import_module(module)
    assert hasattr(loaded, name), f"{module} has no {name} (mlagents_envs 1.1 has it)"
    obj = getattr(loaded, name)
    missing = [m for m in (SURFACE[module][name] or {}) if not hasattr(obj, m)]
    assert not missing, f"{module}.{name} has no {missing}"


def _parameters(obj):
    out = []
    for p in inspect.signature(obj).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        out.append((p.name, p.default, p.kind))
    return out


SIGNED = [(f"{m}:{n}.{member}", params) for m, n, members in _members() for member, params in (members or {}).items()
          if isinstance(params, list) and member != "_fields"]


@pytest.mark.parametrize("path, theirs", SIGNED, ids=[p for p, _ in SIGNED])
def test_every_signature_takes_what_mlagents_envs_takes(path, theirs):
    module, _, qual = path.partition(":")
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    ours = _parameters(obj)
    names = [name for name, _, _ in ours]
    wanted = [t.partition("=")[0] for t in theirs]
    missing = [w for w in wanted if w not in names]
    assert not missing, f"{path}: mlagents_envs takes {missing}; ours takes {names}"
    if (path, "order") not in DIFFERENCES:
        positional = [n for n, _, kind in ours if kind != inspect.Parameter.KEYWORD_ONLY]
        assert positional[:len(wanted)] == wanted, f"{path}: mlagents_envs' order is {wanted}, ours {names}"
    by_name = {name: default for name, default, _ in ours}
    for spec in theirs:
        name, has_default, default = spec.partition("=")
        if not has_default or (path, name) in DIFFERENCES:
            continue
        assert repr(by_name[name]) == default, f"{path}: {name} defaults to {by_name[name]!r}, mlagents_envs {default}"
    extra = [name for name, default, _ in ours if name not in wanted and default is inspect.Parameter.empty]
    assert not extra, f"{path}: parameters mlagents_envs does not have must be optional: {extra}"


@pytest.mark.parametrize("module, name", [(m, n) for m, n, members in _members() if members and "_fields" in members])
def test_named_tuples_have_mlagents_envs_fields(module, name):
    assert list(getattr(importlib.import_module(module), name)._fields) == SURFACE[module][name]["_fields"]


def test_exceptions_derive_from_unity_exception_and_the_worker_message_is_mlagents_envs():
    from unityagents import exception as e

    for name in SURFACE["unityagents.exception"]:
        assert issubclass(getattr(e, name), e.UnityException), name
    error = e.UnityWorkerInUseException(3)
    assert error.worker_id == 3 and str(error) == e.UnityWorkerInUseException.MESSAGE_TEMPLATE.format(3)
    assert "worker number 4 is still in use" in str(e.UnityWorkerInUseException(worker_id=4))


# --------------------------------------------------------------------- behaviour, as mlagents_envs 1.1.0 gave it
PEER_BYTES = {
    "engine default_config": (
        "2c3451e97e4fea11b238784f4387d1f70c0000000000000050000000500000002c3451e97e4fea11b238784f4387d1f708000000"
        "01000000010000002c3451e97e4fea11b238784f4387d1f708000000020000000000a0412c3451e97e4fea11b238784f4387d1f7"
        "0800000003000000ffffffff2c3451e97e4fea11b238784f4387d1f708000000040000003c000000"),
    "engine 64x48 time_scale 2.5": (
        "2c3451e97e4fea11b238784f4387d1f70c0000000000000040000000300000002c3451e97e4fea11b238784f4387d1f708000000"
        "0200000000002040"),
    "environment parameters": (
        "1e894c530f81ea11a9d082248586040013000000070000006772617669747900000000c3f51c411e894c530f81ea11a9d0822485"
        "8604001c000000040000006d6173730100000007000000000000000000003f000000401e894c530f81ea11a9d08224858604001d"
        "000000050000007363616c650100000003000000010000000000803fcdcccc3d1e894c530f81ea11a9d08224858604002a000000"
        "060000006c656e677468010000000b00000002000000040000000000803f00000040000080400000a040"),
    "float properties": "d0f7cc607e4fea11b238784f4387d1f70d00000005000000737065656400004040",
    "raw bytes": "c0a55ba8874fea11a517784f4387d1f703000000666f6fc0a55ba8874fea11a517784f4387d1f7020000000001",
    "outgoing message": "01feffffff0000003f020000000000803f00004040090000006d6c6167656e747321",
}


def _written(channel) -> str:
    from unityagents.side_channels import SideChannelManager

    return bytes(SideChannelManager([channel]).generate_side_channel_messages()).hex()


def test_side_channels_write_the_bytes_mlagents_envs_writes():
    from unityagents import side_channels as sc

    engine = sc.EngineConfigurationChannel()
    engine.set_configuration(sc.EngineConfig.default_config())
    assert _written(engine) == PEER_BYTES["engine default_config"]
    engine.set_configuration_parameters(width=64, height=48, time_scale=2.5)
    assert _written(engine) == PEER_BYTES["engine 64x48 time_scale 2.5"]
    params = sc.EnvironmentParametersChannel()
    params.set_float_parameter("gravity", 9.81)
    params.set_uniform_sampler_parameters("mass", 0.5, 2.0, 7)
    params.set_gaussian_sampler_parameters("scale", 1.0, 0.1, 3)
    params.set_multirangeuniform_sampler_parameters("length", [(1.0, 2.0), (4.0, 5.0)], 11)
    assert _written(params) == PEER_BYTES["environment parameters"]
    floats = sc.FloatPropertiesChannel()
    floats.set_property("speed", 3.0)
    assert _written(floats) == PEER_BYTES["float properties"]
    raw = sc.RawBytesChannel(uuid.UUID("a85ba5c0-4f87-11ea-a517-784f4387d1f7"))
    raw.send_raw_data(b"foo")
    raw.send_raw_data(bytearray(b"\x00\x01"))
    assert _written(raw) == PEER_BYTES["raw bytes"]
    assert _written(raw) == ""  # the queue is empty once sent
    out = sc.OutgoingMessage()
    out.write_bool(True)
    out.write_int32(-2)
    out.write_float32(0.5)
    out.write_float32_list([1.0, 3.0])
    out.write_string("mlagents!")
    assert bytes(out.buffer).hex() == PEER_BYTES["outgoing message"]
    msg = sc.IncomingMessage(bytes(out.buffer))
    assert [msg.read_bool(), msg.read_int32(), msg.read_float32(), msg.read_float32_list(), msg.read_string(),
            msg.read_int32(default_value=7), msg.read_string("x")] == [True, -2, 0.5, [1.0, 3.0], "mlagents!", 7, "x"]


def test_messages_go_through_a_manager_to_their_channel():
    from unityagents import side_channels as sc

    class Ints(sc.SideChannel):
        def __init__(self):
            super().__init__(uuid.UUID("a85ba5c0-4f87-11ea-a517-784f4387d1f7"))
            self.got = []

        def on_message_received(self, msg):
            self.got.append(msg.read_int32())

    sender, receiver = Ints(), Ints()
    for value in (5, 6):
        out = sc.OutgoingMessage()
        out.write_int32(value)
        sender.queue_message_to_send(out)
    assert len(sender.message_queue) == 2
    sc.SideChannelManager([receiver]).process_side_channel_message(
        sc.SideChannelManager([sender]).generate_side_channel_messages())
    assert receiver.got == [5, 6] and sender.message_queue == []

    a, b = sc.FloatPropertiesChannel(), sc.FloatPropertiesChannel()
    a.set_property("prop1", 1.0)
    a.set_property("prop2", 2.0)
    sc.SideChannelManager([b]).process_side_channel_message(sc.SideChannelManager([a]).generate_side_channel_messages())
    assert b.get_property("prop1") == 1.0 and b.get_property("missing") is None
    assert b.get_property_dict_copy() == a.get_property_dict_copy() == {"prop1": 1.0, "prop2": 2.0}
    assert sorted(b.list_properties()) == ["prop1", "prop2"]

    stats = sc.StatsSideChannel()
    stat = sc.OutgoingMessage()
    stat.write_string("stats-1")
    stat.write_float32(42.0)
    stat.write_int32(1)
    stats.on_message_received(sc.IncomingMessage(stat.buffer))
    assert stats.get_and_reset_stats() == {"stats-1": [(42.0, sc.StatsAggregationMethod.MOST_RECENT)]}
    assert stats.get_and_reset_stats() == {}


def test_channel_errors_are_mlagents_envs_errors():
    from unityagents import side_channels as sc
    from unityagents.exception import UnityCommunicationException, UnityEnvironmentException, UnitySideChannelException

    engine = sc.EngineConfigurationChannel()
    with pytest.raises(UnitySideChannelException):
        engine.set_configuration_parameters(width=None, height=42)
    for channel in (engine, sc.EnvironmentParametersChannel(), sc.DefaultTrainingAnalyticsSideChannel()):
        with pytest.raises(UnityCommunicationException, match=str(channel.channel_id)):  # only Python writes there
            channel.on_message_received(sc.IncomingMessage(b"\x00\x00\x00\x00"))
    with pytest.raises(UnityEnvironmentException, match="same channel id"):
        sc.SideChannelManager([sc.RawBytesChannel(engine.channel_id), engine])
    frame = sc.StatsSideChannel().channel_id.bytes_le + (12).to_bytes(4, "little")
    with pytest.raises(UnityEnvironmentException, match="unexpectedly short"):
        sc.SideChannelManager([sc.StatsSideChannel()]).process_side_channel_message(frame + b"\x00" * 4)


def test_a_message_a_channel_cannot_read_names_the_channel():
    from unityagents import side_channels as sc
    from unityagents.exception import UnitySideChannelException

    stats = sc.StatsSideChannel()
    bad = sc.OutgoingMessage()
    bad.write_string("key")
    bad.write_float32(1.0)
    bad.write_int32(9)  # no such aggregation
    with pytest.raises(UnitySideChannelException, match=str(stats.channel_id)):
        sc.SideChannelManager([stats]).process_side_channel_message(
            stats.channel_id.bytes_le + len(bad.buffer).to_bytes(4, "little") + bytes(bad.buffer))

    class Strict(sc.SideChannel):
        def on_message_received(self, msg):
            int(msg.read_string())  # a scene that sent something else

    strict = Strict(uuid.UUID("a85ba5c0-4f87-11ea-a517-784f4387d1f7"))
    text = sc.OutgoingMessage()
    text.write_string("not a number")
    with pytest.raises(UnitySideChannelException, match="a85ba5c0-4f87-11ea-a517-784f4387d1f7.*ValueError"):
        sc.SideChannelManager([strict]).process_side_channel_message(
            strict.channel_id.bytes_le + len(text.buffer).to_bytes(4, "little") + bytes(text.buffer))


@pytest.mark.parametrize("spec_name", ["continuous 3", "discrete (3, 2)", "hybrid 2 (4,)"])
def test_empty_and_random_actions_are_mlagents_envs(spec_name):
    from unityagents.base_env import ActionSpec

    spec = {"continuous 3": ActionSpec.create_continuous(3), "discrete (3, 2)": ActionSpec.create_discrete((3, 2)),
            "hybrid 2 (4,)": ActionSpec.create_hybrid(2, (4,))}[spec_name]
    # mlagents_envs 1.1.0: (continuous shape, dtype, |sum|, discrete shape, dtype, |sum|) of empty_action(5), and
    # is_continuous, is_discrete, discrete_size
    peer_empty = {"continuous 3": [(5, 3), "float32", 0.0, (5, 0), "int32", 0],
                  "discrete (3, 2)": [(5, 0), "float32", 0.0, (5, 2), "int32", 0],
                  "hybrid 2 (4,)": [(5, 2), "float32", 0.0, (5, 1), "int32", 0]}
    peer_kind = {"continuous 3": [True, False, 0], "discrete (3, 2)": [False, True, 2],
                 "hybrid 2 (4,)": [False, False, 1]}
    empty = spec.empty_action(5)
    assert [empty.continuous.shape, str(empty.continuous.dtype), float(np.abs(empty.continuous).sum()),
            empty.discrete.shape, str(empty.discrete.dtype), int(np.abs(empty.discrete).sum())] == peer_empty[spec_name]
    assert [spec.is_continuous(), spec.is_discrete(), spec.discrete_size] == peer_kind[spec_name]
    rand = spec.random_action(200)
    assert rand.continuous.shape == (200, spec.continuous_size) and rand.continuous.dtype == np.float32
    assert rand.discrete.shape == (200, spec.discrete_size) and rand.discrete.dtype == np.int32
    assert rand.continuous.size == 0 or (rand.continuous.min() >= -1 and rand.continuous.max() <= 1)
    for k, branch in enumerate(spec.discrete_branches):
        assert 0 <= rand.discrete[:, k].min() and rand.discrete[:, k].max() < branch


def test_steps_and_behavior_mapping_as_mlagents_envs():
    from unityagents.base_env import (
        ActionSpec,
        BehaviorMapping,
        BehaviorSpec,
        DecisionSteps,
        DimensionProperty,
        ObservationSpec,
        ObservationType,
        TerminalSteps,
    )

    ds = DecisionSteps([np.arange(12, dtype=np.float32).reshape(3, 4)], np.arange(3, dtype=np.float32),
                       np.arange(10, 13, dtype=np.int32), [np.zeros((3, 4), bool)], np.arange(3, dtype=np.int32),
                       np.arange(3, dtype=np.float32))
    assert [ds.agent_id_to_index[i] for i in (10, 11, 12)] == [0, 1, 2] and list(ds) == [10, 11, 12]
    assert np.array_equal(ds[10].action_mask[0], np.zeros(4, bool))
    with pytest.raises(KeyError):
        ds.agent_id_to_index[-1]
    ts = TerminalSteps([np.zeros((3, 4), np.float32)], np.zeros(3, np.float32), np.array([1, 0, 1], bool),
                       np.arange(10, 13, dtype=np.int32), np.zeros(3, np.int32), np.zeros(3, np.float32))
    assert [ts[i].interrupted for i in (10, 11, 12)] == [True, False, True]
    specs = [ObservationSpec(s, (DimensionProperty.UNSPECIFIED,) * len(s), ObservationType.DEFAULT, f"s{i}")
             for i, s in enumerate([(3, 2), (5,)])]
    spec = BehaviorSpec(specs, ActionSpec.create_continuous(3))
    assert [o.shape for o in DecisionSteps.empty(spec).obs] == [(0, 3, 2), (0, 5)]
    assert [o.shape for o in TerminalSteps.empty(spec).obs] == [(0, 3, 2), (0, 5)]
    live = {"A": spec}
    mapping = BehaviorMapping(live)
    live["B"] = spec  # a view: a behaviour added later shows up
    assert list(mapping) == ["A", "B"] and len(mapping) == 2 and mapping["B"] is spec
    with pytest.raises(TypeError):
        mapping["C"] = spec  # read-only
