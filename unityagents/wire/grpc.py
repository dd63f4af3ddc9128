"""The Python end of the modern ML-Agents protocol (communication API 1.5.0), over gRPC.

Python is the gRPC **server** and Unity the client (``grpc_server``); the one unary RPC
``/communicator_objects.UnityToExternalProto/Exchange`` carries Unity's outputs in its requests
and Python's inputs in its replies, so the reply to call N is whatever the trainer sends next:

* call #1 (initialisation output) -> reply with our initialisation input;
* call #2 (header only) -> left pending: the reply is the first RESET (or, after a version
  mismatch, status 400);
* then every call is the environment's answer to the previous reply (a RESET or STEP).

How behaviours become brains, observations per-sensor steps and actions messages is
``grpc_messages``' business; every field is checked first (``validate``). The camera layout
([H,W,C] before C# package 3.0, [C,H,W] from 3.0) is chosen from the package version in call #1.
``BrainParameters.continuousActionContract`` is ``"unit"``: a trainer sends Unity
``clamp(a, -3, 3) / 3`` as the ONNX export does (``BrainParameters.environment_actions``), while
``send_step`` itself sends the floats it is given, so a gymnasium or PettingZoo user's actions
arrive as they chose them. A variable-length observation (a BufferSensor's ``[N_max, F]``,
dimension properties ``[VariableSize, None]``; we announce ``variableLengthObservation``) is a
sensor of its own (``Sensor.variable_length``); any other rank-2 observation is
refused when its behaviour is announced (``wire/variable_length.py``).

The modern protocol declares no reset parameters (any name goes to the environment-parameters
side channel), carries no memories (the trainers keep them), sends an ended episode's last
observation and never ends an Academy episode: the class attributes below say so.

The server binds 127.0.0.1 only (Unity's own binds all interfaces). Requests are handed to the
caller's thread as raw bytes and parsed there, so a malformed message is an exception in the
trainer, not a log line in a gRPC worker thread.
"""
from __future__ import annotations

import logging
import queue
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from unityagents.base_env import ActionTuple, BehaviorSteps
from unityagents.brain import BrainParameters
from unityagents.exception import (
    UnityCommunicationException,
    UnityProtocolException,
    UnityTimeOutException,
)
from unityagents.wire.base import STATS_AGGREGATIONS, Communicator, Handshake, Peer
from unityagents.wire.grpc_messages import Behavior, new_behavior
from unityagents.wire.grpc_server import ExchangeServer
from unityagents.wire.protos import communicator_objects_pb2 as pb
from unityagents.wire.side_channels import (
    STATS_CHANNEL,
    EngineConfig,
    EngineConfigurationChannel,
    EnvironmentParametersChannel,
    SideChannelManager,
    StatsSideChannel,
    check_side_channels,
    deliver,
)
from unityagents.wire.validate import (
    Spec,
    bad,
    check_same_spec,
    check_status,
    parse_side_channels,
    parse_stat,
    rl_output_of,
    spec_of,
)
from unityagents.wire.variable_length import check_dimension_properties

logger = logging.getLogger("unityagents")

COMMUNICATION_VERSION = "1.5.0"
#: What we tell Unity as our "Python library version" (Unity 2.x+ does not check it).
PACKAGE_VERSION = "0.3.0"

_POLL_SECONDS = 0.2
_STATUS_OK, _STATUS_CLOSE = 200, 400


class GrpcCommunicator(Communicator):
    """The gRPC server end of one environment (see the module docstring).

    :param peer: what the wire knows of the environment (its process, its log, the answer timeout).
    :param port: listened on at 127.0.0.1 only.
    :param seed: sent in the initialisation input (Unity seeds its ``Random`` with it).
    :param engine_config: the engine settings sent with the first reset (time scale 20 by default).
    :param side_channels: the user's ``side_channels.SideChannel`` instances: frames on their ids are
        handed to them, their queued messages ride on the next step or reset.
    """

    protocol = "grpc"
    declares_reset_parameters = False
    carries_memories = False
    reports_last_observation = True
    resets_by_itself = False

    def __init__(self, peer: Peer, port: int, worker_id: int, seed: Optional[int] = None,
                 engine_config: Optional[EngineConfig] = None, side_channels: Sequence[Any] = (), num_areas: int = 1):
        super().__init__(peer)
        self.num_areas = int(num_areas)
        self._user_channels = check_side_channels(side_channels)
        # The channels spoken here are mlagents_envs' classes too: the engine settings go first, then the
        # reset's parameters, then the user's channels (in the order given).
        self._engine = EngineConfigurationChannel()
        self._engine.set_configuration(engine_config or EngineConfig())
        self._parameters = EnvironmentParametersChannel()
        self._stats = StatsSideChannel()
        self._own = SideChannelManager([self._engine, self._parameters])
        self._users = SideChannelManager(self._user_channels.values())
        self.port = port
        self.seed = int(seed or 0)
        self._behaviors: Dict[str, Behavior] = {}
        self.brains: Dict[str, BrainParameters] = {}
        self.channels_last = True  # the layout: [C,H,W] from C# package 3.0, set in the handshake
        self.package_version = ""
        #: What the environment says it can do (its ``UnityRLCapabilitiesProto``), after the handshake.
        self.academy_capabilities: Optional[Any] = None
        self._handshaken = False  # behaviours announced later have no trainer
        self._closed = False
        bye = pb.UnityMessageProto()
        bye.header.status = _STATUS_CLOSE
        self._server = ExchangeServer(port, worker_id, bye.SerializeToString())

    # ---------------------------------------------------------------- waiting for Unity
    def _next_message(self, what: str, timeout: float) -> "pb.UnityMessageProto":
        """Wait for Unity's next call (it becomes the pending one) and parse it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                request = self._server.next_call(_POLL_SECONDS)
                break
            except queue.Empty:
                try:
                    self.peer.check_alive(f"to send {what}")
                except UnityCommunicationException as e:
                    if self.connected:
                        raise
                    raise UnityProtocolException(
                        f"{e} It never made a gRPC call: if it is a 2018 build (ML-Agents 0.3, API-2), "
                        "this looks like an API-2 build; use --protocol api2. A modern build that exits "
                        "at once may be missing its data folder or a display (try --no-graphics).") from None
                if time.monotonic() > deadline:
                    if not self.connected:
                        raise UnityTimeOutException(
                            f"The environment did not call the gRPC server on 127.0.0.1:{self.port} within "
                            f"{timeout:.0f} s (expected its initialisation message). Make sure it was "
                            "launched with --mlagents-port, needs no user interaction, has agents with "
                            "Behavior Type 'Default', and is a modern ML-Agents build (Release 19 or "
                            "later); a 2018 build (ML-Agents 0.3, API-2) needs --protocol api2. Raise "
                            "start_timeout if it is only slow to start.", self.peer.log_path) from None
                    self.peer.raise_timeout(what)
        try:
            message = pb.UnityMessageProto.FromString(request)
        except Exception as e:  # protobuf's DecodeError, or worse for garbage
            raise UnityProtocolException(
                f"The environment sent a malformed or truncated message when {what} was expected "
                f"({type(e).__name__}: {e}; {len(request)} bytes, starting {request[:24]!r}). "
                "Check that the build uses ML-Agents communication API 1.x.", self.peer.log_path) from None
        check_status(message, what, self.peer.log_path)
        return message

    def _reply(self, message: "pb.UnityMessageProto") -> None:
        self._server.answer(message.SerializeToString())

    # ---------------------------------------------------------------- handshake
    def connect(self, start_timeout: float, file_name: str) -> None:
        self._init_output = self._next_message("its initialisation message", start_timeout)
        self.connected = True

    def handshake(self) -> Handshake:
        log_path = self.peer.log_path
        output = self._init_output.unity_output
        if not output.HasField("rl_initialization_output"):
            raise UnityProtocolException(
                "The environment's first message has no initialisation output (expected "
                "unity_output.rl_initialization_output with its communication version).", log_path)
        init = output.rl_initialization_output
        version = init.communication_version
        self.package_version = init.package_version
        self.channels_last = not _before_package_3(init.package_version)
        reply = pb.UnityMessageProto()
        reply.header.status = _STATUS_OK
        ri = reply.unity_input.rl_initialization_input
        ri.seed = self.seed
        ri.communication_version = COMMUNICATION_VERSION
        ri.package_version = PACKAGE_VERSION
        caps = ri.capabilities
        caps.baseRLCapabilities = True
        caps.concatenatedPngObservations = True
        caps.compressedChannelMapping = True
        caps.hybridActions = True
        caps.trainingAnalytics = False  # we send no analytics
        caps.variableLengthObservation = True  # BufferSensors: wire/variable_length.py, trainers/attention.py
        caps.multiAgentGroups = True
        ri.num_areas = self.num_areas
        self._reply(reply)
        self._next_message("the second handshake message", self.peer.timeout)
        if not _compatible(version):
            bye = pb.UnityMessageProto()
            bye.header.status = _STATUS_CLOSE
            self._reply(bye)
            raise UnityProtocolException(
                f"The environment speaks ML-Agents communication API {version!r}; this trainer speaks 1.x "
                f"({COMMUNICATION_VERSION}: ML-Agents Release 19 and later, C# packages 2.x to 4.x). Use a build "
                "made with such a package (a 2018 build speaks API-2: use --protocol api2).", log_path)
        self.academy_capabilities = init.capabilities
        if not init.capabilities.baseRLCapabilities:
            logger.warning("The environment does not report base RL capabilities; it may be too old for this trainer.")
        logger.info("Connected to %s: package version %s, communication version %s (%s cameras)",
                    init.name or "a Unity environment", init.package_version, version,
                    "[C,H,W]" if self.channels_last else "[H,W,C]")
        # Behaviours are announced with their first agents, so reset once now to learn them: the
        # trainers are built from the brains before the first real reset.
        self.send_reset(True, {})
        first, _ = self.receive()
        self._handshaken = True
        return Handshake(init.name or "AcademySingleton", self.brains, list(self.brains), {},
                         init.log_path or None, first)

    # ---------------------------------------------------------------- sending
    def _input(self) -> "pb.UnityMessageProto":
        message = pb.UnityMessageProto()
        message.header.status = _STATUS_OK
        rl = message.unity_input.rl_input
        rl.SetInParent()  # an empty step is still an rl_input (its bytes: 0a 03 08 c8 01 1a 02 0a 00)
        outgoing = self._own.generate_side_channel_messages() + self._users.generate_side_channel_messages()
        if outgoing:
            rl.side_channel = bytes(outgoing)
        return message

    def send_reset(self, train_mode: bool, config: Dict[str, float]) -> None:
        for key, value in config.items():
            self._parameters.set_float_parameter(key, value)
        message = self._input()
        message.unity_input.rl_input.command = pb.RESET
        for behavior in self._behaviors.values():
            behavior.last_actions.clear()
            behavior.decision_ids = []
        self._reply(message)


    def send_step(self, actions: Dict[str, ActionTuple], memories: Dict[str, np.ndarray],
                  values: Dict[str, np.ndarray]) -> None:
        message = self._input()
        agent_actions = message.unity_input.rl_input.agent_actions
        for name, action in actions.items():
            behavior = self._behaviors.get(name)
            if behavior is None or not behavior.decision_ids:
                continue
            behavior.encode_actions(action, agent_actions)
        self._reply(message)

    # ---------------------------------------------------------------- receiving
    def receive(self) -> Tuple[Dict[str, BehaviorSteps], bool]:
        message = self._next_message("its next observations", self.peer.timeout)
        log = self.peer.log_path
        rl = rl_output_of(message, log)
        self.stats = {}
        if rl.side_channel:
            self._read_side_channels(rl.side_channel)
        lists = rl.agentInfos
        output = message.unity_output
        if output.HasField("rl_initialization_output"):
            for params in output.rl_initialization_output.brain_parameters:
                self._announce(params, lists, log)
        for name, entry in lists.items():
            if len(entry.value) and name not in self._behaviors:
                raise bad("agents of a behaviour that was never announced reported.", log, brain=name,
                          agent=entry.value[0].id, field="agentInfos", received=f"{len(entry.value)} infos",
                          expected="a behaviour announced in rl_initialization_output.brain_parameters in the "
                          f"message with its first agents (known: {sorted(self._behaviors)[:8]})")
        result = {}
        for name, behavior in self._behaviors.items():
            infos = lists[name].value if name in lists else ()
            result[name] = behavior.steps(infos, log)
        return result, False

    def _read_side_channels(self, data: bytes) -> None:
        log = self.peer.log_path
        for channel, payload in parse_side_channels(data, log):
            if channel == STATS_CHANNEL:
                if parse_stat(payload, log) is None:  # checked whole; a non-finite value is dropped
                    continue
                deliver(self._stats, payload)
                for key, values in self._stats.get_and_reset_stats().items():
                    self.stats.setdefault(key, []).extend(
                        (value, STATS_AGGREGATIONS[method.value]) for value, method in values)
                if channel in self._user_channels:  # a script's own StatsSideChannel sees them too
                    deliver(self._user_channels[channel], payload)
            elif channel in self._user_channels:
                deliver(self._user_channels[channel], payload)
            else:
                logger.info("Unknown side channel data received. Channel type: %s.", channel)

    def _announce(self, params: "pb.BrainParametersProto", lists: Any, log: Optional[str]) -> None:
        """A behaviour's announcement: a new brain, or the same spec again (anything else is refused)."""
        name = params.brain_name
        infos = lists[name].value if name in lists else ()
        if not len(infos):  # nothing to derive its observations from (ML-Agents ignores it too)
            logger.debug("Behaviour %r was announced without agents; ignored.", name)
            return
        spec = spec_of(name, params, infos[0], log)
        check_dimension_properties(name, infos[0], log)
        known = self._behaviors.get(name)
        if known is not None:
            check_same_spec(name, known.spec, spec, log)
            return
        if self._handshaken:
            logger.warning("Behaviour %r connected after the run started; no trainer was built for it, so its "
                           "agents get no actions.", name)
        self._add_behavior(name, spec, list(params.action_spec.action_descriptions),
                            [(o.name, int(o.observation_type)) for o in infos[0].observations])

    def _add_behavior(self, name: str, spec: Spec, descriptions: List[str],
                       sensor_names: Sequence[Tuple[str, int]] = ()) -> None:
        behavior = new_behavior(name, spec, descriptions, sensor_names, self.channels_last, self.package_version)
        self._behaviors[name] = behavior
        self.brains[name] = behavior.parameters


    # ---------------------------------------------------------------- closing
    def close(self) -> None:
        """Answer the pending call with status 400 (Unity quits), then stop the server."""
        if self._closed:
            return
        self._closed = True
        self._server.close()


def _compatible(version: str) -> bool:
    """ML-Agents' major/minor rule against our 1.5.0: any 1.x is compatible."""
    parts = version.split(".")
    try:
        major = int(parts[0])
        [int(p) for p in parts[1:3]]
    except (ValueError, IndexError):
        return False
    return major == 1 and 2 <= len(parts) <= 3


def _before_package_3(package_version: str) -> bool:
    """Whether a C# package version is older than 3.0 (cameras [H,W,C] on the wire)."""
    try:
        return int(package_version.split(".")[0]) < 3
    except ValueError:
        logger.warning("Unreadable Unity package version %r; assuming 3.x or later ([C,H,W] cameras).",
                       package_version)
        return False

