"""The Python end of the modern ML-Agents protocol (communication API 1.5.0), over gRPC.

Python is the gRPC **server** and Unity the
client; the one unary RPC ``/communicator_objects.UnityToExternalProto/Exchange`` carries
Unity's outputs in its requests and Python's inputs in its replies, so the reply to call N is
whatever the trainer sends next:

* call #1 (initialisation output) → reply with our initialisation input;
* call #2 (header only) → left pending: the reply is the first RESET (or, after a version
  mismatch, status 400);
* then every call is the environment's answer to the previous reply (a RESET or STEP).

How behaviours become brains: a behaviour is a brain named by its fully-qualified name
(``"3DBall?team=0"``); its vector observations are concatenated, in wire order, into one
continuous state; its rank-3 observations are cameras, delivered as ``[N, H, W, C]`` floats in
0..1 whatever the wire layout ([H,W,C] before C# package 3.0, [C,H,W] from 3.0, chosen from the
package version in call #1); continuous actions and discrete branches map onto
``BrainParameters``, whose ``continuousActionContract`` is ``"unit"``: a trainer sends Unity
``clamp(a, -3, 3) / 3`` as the ONNX export does (``BrainParameters.environment_actions``), while
``send_step`` itself sends the floats it is given, so a gymnasium or PettingZoo user's actions
arrive as they chose them. A ``BrainInfo`` row is an agent that reported in this step: one that asks
for a decision, or one whose episode ended (``local_done``; ``max_reached`` when interrupted).
An agent that ended its episode and asks for its next decision in the same step has one row, as
with API-2: the terminal reward and done flag, and the first observation of its next episode; its
last observation is kept in ``BrainInfo.terminal_info``.

A hybrid behaviour (continuous actions and discrete branches) is one continuous brain with
``action_branches``: its action rows are the continuous values then one index per branch, sent as
both ``continuous_actions`` and ``discrete_actions`` of one ``AgentActionProto`` (ML-Agents'
``ActionTuple``). A variable-length observation (a BufferSensor's ``[N_max, F]``, dimension
properties ``[VariableSize, None]``; we announce ``variableLengthObservation``) joins the state
row after row as its own sensor (``Sensor.variable_length``); any other rank-2 observation is
refused when its behaviour is announced (``wire/variable_length.py``).

``BrainParameters.sensors`` keeps what the state folds together: each sensor's name, shape and
place, in the wire order, which the ONNX export's ``obs_k`` inputs follow.

The server binds 127.0.0.1 only (Unity's own binds all interfaces). Requests are handed to the
caller's thread as raw bytes and parsed there, so a malformed message is an exception in the
trainer, not a log line in a gRPC worker thread.
"""
from __future__ import annotations

import dataclasses
import logging
import queue
import socket
import struct
import threading
import time
import uuid
from concurrent import futures
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from unityagents.brain import BrainInfo, BrainParameters
from unityagents.exception import (
    UnityActionException,
    UnityCommunicationException,
    UnityEnvironmentException,
    UnityObservationException,
    UnityProtocolException,
    UnityTimeOutException,
)
from unityagents.wire.api2 import Communicator, Handshake, Peer
from unityagents.wire.protos import communicator_objects_pb2 as pb
from unityagents.wire.side_channels import (  # noqa: F401 (the channel ids: API)
    ENGINE_CONFIGURATION_CHANNEL,
    ENVIRONMENT_PARAMETERS_CHANNEL,
    STATS_CHANNEL,
    IncomingMessage,
    check_side_channels,
)
from unityagents.wire.validate import (  # noqa: F401 (parse_side_channels, split_pngs, decode_png_observation: API)
    Spec,
    bad,
    check_agents,
    check_finite,
    check_mask,
    check_same_spec,
    check_status,
    decode_png_observation,
    observation_error,
    parse_side_channels,
    parse_stat,
    rl_output_of,
    spec_of,
    split_pngs,
)
from unityagents.wire.variable_length import check_dimension_properties

logger = logging.getLogger("unityagents")

COMMUNICATION_VERSION = "1.5.0"
#: What we tell Unity as our "Python library version" (Unity 2.x+ does not check it).
PACKAGE_VERSION = "0.3.0"
METHOD = "/communicator_objects.UnityToExternalProto/Exchange"
SERVICE, RPC = "communicator_objects.UnityToExternalProto", "Exchange"

_POLL_SECONDS = 0.2
_STATUS_OK, _STATUS_CLOSE = 200, 400


@dataclasses.dataclass
class EngineConfig:
    """Engine settings sent through the engine-configuration side channel (ML-Agents' EngineConfigurationChannel).

    Only the settings that are not None are sent, in the channel's order (resolution, quality,
    time scale, target frame rate, capture frame rate). ``width`` and ``height`` go together.
    """

    width: Optional[int] = None
    height: Optional[int] = None
    quality_level: Optional[int] = None
    time_scale: Optional[float] = 20.0
    target_frame_rate: Optional[int] = None
    capture_frame_rate: Optional[int] = None

    def messages(self) -> List[bytes]:
        """One payload per setting, as ``EngineConfigurationChannel`` reads them."""
        if (self.width is None) != (self.height is None):
            raise UnityEnvironmentException(
                f"The engine configuration needs width and height together (got width={self.width}, "
                f"height={self.height}); pass both --width and --height, or neither.")
        out = []
        if self.width is not None:
            out.append(struct.pack("<iii", 0, int(self.width), int(self.height)))
        if self.quality_level is not None:
            out.append(struct.pack("<ii", 1, int(self.quality_level)))
        if self.time_scale is not None:
            out.append(struct.pack("<if", 2, float(self.time_scale)))
        if self.target_frame_rate is not None:
            out.append(struct.pack("<ii", 3, int(self.target_frame_rate)))
        if self.capture_frame_rate is not None:
            out.append(struct.pack("<ii", 4, int(self.capture_frame_rate)))
        return out


# ------------------------------------------------------------------------------- side channels
def side_channel_frame(channel: uuid.UUID, payload: bytes) -> bytes:
    """One frame: the channel id in .NET ``Guid.ToByteArray`` order, int32 LE length, payload."""
    return channel.bytes_le + struct.pack("<i", len(payload)) + payload


def _string(text: str) -> bytes:
    data = text.encode("ascii")
    return struct.pack("<i", len(data)) + data


def float_parameter_payload(key: str, value: float) -> bytes:
    """An environment-parameters message setting ``key`` to the constant ``value`` (FLOAT = 0)."""
    try:
        return _string(key) + struct.pack("<if", 0, float(value))
    except UnicodeEncodeError:
        raise UnityEnvironmentException(
            f"The environment parameter name {key!r} is not ASCII; the side channel carries ASCII only.") from None


#: The largest message an environment may send (ML-Agents' trainer: 532,000,000 bytes).
MAX_MESSAGE_BYTES = 532_000_000


@dataclasses.dataclass
class _ObservationSpec:
    shape: Tuple[int, ...]          # as on the wire
    visual: bool
    hwc: Tuple[int, ...] = ()       # visual: (H, W, C) whatever the wire layout
    size: int = 0                   # vector: number of floats
    name: str = ""                  # the sensor's name, for errors


@dataclasses.dataclass
class _Behaviour:
    name: str
    observations: List[_ObservationSpec]
    continuous: int
    branches: List[int]
    parameters: BrainParameters
    last_actions: Dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    decision_ids: List[int] = dataclasses.field(default_factory=list)
    spec: Optional[Spec] = None  # as announced: an announcement mid-run must repeat it


class _Call:
    """One pending ``Exchange`` call: the request bytes and where its reply goes."""

    __slots__ = ("request", "_reply", "_answered")

    def __init__(self, request: bytes):
        self.request = request
        self._reply: "queue.SimpleQueue[bytes]" = queue.SimpleQueue()
        self._answered = False

    def answer(self, reply: bytes) -> None:
        if not self._answered:
            self._answered = True
            self._reply.put(reply)

    def wait(self, closed: threading.Event, bye: bytes) -> bytes:
        """The reply, or ``bye`` once the communicator is closed (a worker thread never hangs:
        interpreter exit joins the pool's threads)."""
        while True:
            try:
                return self._reply.get(timeout=0.5)
            except queue.Empty:
                if closed.is_set():
                    return bye


# ------------------------------------------------------------------------------- communicator
class GrpcCommunicator(Communicator):
    """The gRPC server end of one environment (see the module docstring).

    :param env: the owning environment (its process checks, timeouts and log path).
    :param port: listened on at 127.0.0.1 only.
    :param seed: sent in the initialisation input (Unity seeds its ``Random`` with it).
    :param engine_config: the engine settings sent with the first reset (time scale 20 by default).
    :param side_channels: the user's ``side_channels.SideChannel`` instances: frames on their ids are
        handed to them, their queued messages ride on the next step or reset.
    """

    protocol = "grpc"

    def __init__(self, peer: Peer, port: int, worker_id: int, seed: Optional[int] = None,
                 engine_config: Optional[EngineConfig] = None, side_channels: Sequence[Any] = ()):
        super().__init__(peer)
        self._user_channels = check_side_channels(side_channels)
        import grpc  # only a gRPC environment needs grpcio

        self.port = port
        self.seed = int(seed or 0)
        self._calls: "queue.SimpleQueue[_Call]" = queue.SimpleQueue()
        self._pending: Optional[_Call] = None
        self._behaviours: Dict[str, _Behaviour] = {}
        self.brains: Dict[str, BrainParameters] = {}
        self._outgoing: List[bytes] = [side_channel_frame(ENGINE_CONFIGURATION_CHANNEL, m)
                                       for m in (engine_config or EngineConfig()).messages()]
        self._channels_first = True  # engine messages ride on the first reset
        self.channels_last = True  # the layout: [C,H,W] from C# package 3.0, set in the handshake
        self.package_version = ""
        self.connected = False
        self._handshaken = False  # behaviours announced later have no trainer
        self._closed = False
        self._closing = threading.Event()
        bye = pb.UnityMessageProto()
        bye.header.status = _STATUS_CLOSE
        self._bye = bye.SerializeToString()
        self._probe_port(port, worker_id)
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="unityagents-grpc"),
            # A cap on one message of the environment (the figure ML-Agents' own trainer uses): a
            # larger one is refused by gRPC itself instead of being buffered whole.
            options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                     ("grpc.max_send_message_length", -1)],
        )
        handler = grpc.method_handlers_generic_handler(SERVICE, {
            RPC: grpc.unary_unary_rpc_method_handler(self._exchange)})  # raw bytes both ways
        self._server.add_generic_rpc_handlers((handler,))
        try:
            bound = self._server.add_insecure_port(f"127.0.0.1:{port}")
        except RuntimeError:
            bound = 0
        if bound != port:
            self._server.stop(None)
            raise self._port_in_use(port, worker_id, "gRPC could not bind it")
        self._server.start()

    @staticmethod
    def _port_in_use(port: int, worker_id: int, why: str) -> UnityEnvironmentException:
        return UnityEnvironmentException(
            f"Couldn't listen on 127.0.0.1:{port} (base port {port - worker_id} + worker id {worker_id}): "
            f"{why}. Another environment or training run probably uses that port. Close it, or pick a "
            "free port with a different --worker-id (or --base-port).")

    def _probe_port(self, port: int, worker_id: int) -> None:
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed run's TIME_WAIT is no owner
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as e:
            raise self._port_in_use(port, worker_id, e.strerror or str(e)) from None
        finally:
            probe.close()

    def _exchange(self, request: bytes, context: Any) -> bytes:
        """gRPC worker thread: hand the call to the trainer's thread, block until it answers."""
        if self._closing.is_set():
            return self._bye
        call = _Call(request)
        self._calls.put(call)
        return call.wait(self._closing, self._bye)

    # ---------------------------------------------------------------- waiting for Unity
    def _next_message(self, what: str, timeout: float) -> "pb.UnityMessageProto":
        """Wait for Unity's next call (it becomes the pending one) and parse it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                call = self._calls.get(timeout=_POLL_SECONDS)
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
        self._pending = call
        try:
            message = pb.UnityMessageProto.FromString(call.request)
        except Exception as e:  # protobuf's DecodeError, or worse for garbage
            raise UnityProtocolException(
                f"The environment sent a malformed or truncated message when {what} was expected "
                f"({type(e).__name__}: {e}; {len(call.request)} bytes, starting {call.request[:24]!r}). "
                "Check that the build uses ML-Agents communication API 1.x.", self.peer.log_path) from None
        check_status(message, what, self.peer.log_path)
        return message

    def _reply(self, message: "pb.UnityMessageProto") -> None:
        call, self._pending = self._pending, None
        if call is None:
            raise UnityEnvironmentException("No call of the environment is pending; receive() its answer first.")
        call.answer(message.SerializeToString())

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
        ri.num_areas = 1
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
        for channel_id, channel in self._user_channels.items():
            self._outgoing.extend(side_channel_frame(channel_id, m) for m in channel.take_queued())
        if self._outgoing:
            rl.side_channel = b"".join(self._outgoing)
            self._outgoing = []
        return message

    def send_reset(self, train_mode: bool, config: Dict[str, float]) -> None:
        for key, value in config.items():
            frame = side_channel_frame(ENVIRONMENT_PARAMETERS_CHANNEL, float_parameter_payload(key, value))
            self._outgoing.append(frame)
        message = self._input()
        message.unity_input.rl_input.command = pb.RESET
        for behaviour in self._behaviours.values():
            behaviour.last_actions.clear()
            behaviour.decision_ids = []
        self._reply(message)

    def send_step(self, actions: Dict[str, np.ndarray], memories: Dict[str, np.ndarray],
                  values: Dict[str, np.ndarray]) -> None:
        message = self._input()
        agent_actions = message.unity_input.rl_input.agent_actions
        for name, flat in actions.items():
            behaviour = self._behaviours.get(name)
            if behaviour is None or not behaviour.decision_ids:
                continue
            ids = behaviour.decision_ids
            rows = self._action_rows(behaviour, flat, len(ids))
            entry = agent_actions[name].value
            n_continuous = behaviour.continuous
            if behaviour.branches:
                picks = rows[:, n_continuous:]
                ints = picks.astype(np.int64)
                bad = (ints < 0) | (ints >= np.asarray(behaviour.branches)) | (ints != picks)
                if bad.any():
                    i, k = map(int, np.argwhere(bad)[0])
                    raise UnityActionException(
                        f"Brain {name!r}: agent {ids[i]} chose {picks[i, k]!r} on discrete branch {k}, which has "
                        f"{behaviour.branches[k]} actions: expected an integer in 0..{behaviour.branches[k] - 1}.")
            if behaviour.branches and n_continuous:  # hybrid: ActionTuple(continuous, discrete) per agent
                continuous = rows[:, :n_continuous].astype(np.float32)
                for agent, floats, row in zip(ids, continuous.tolist(), ints.tolist()):
                    entry.add(continuous_actions=floats, discrete_actions=row)
                    behaviour.last_actions[agent] = np.asarray(floats + row, np.float32)
            elif behaviour.branches:
                for agent, row in zip(ids, ints.tolist()):
                    entry.add(discrete_actions=row, vector_actions_deprecated=row)
                    behaviour.last_actions[agent] = np.asarray(row, np.float32)
            else:
                for agent, row in zip(ids, rows.astype(np.float32)):
                    as_list = row.tolist()
                    entry.add(continuous_actions=as_list, vector_actions_deprecated=as_list)
                    behaviour.last_actions[agent] = row
        self._reply(message)

    @staticmethod
    def _action_rows(behaviour: _Behaviour, flat: Any, n_agents: int) -> np.ndarray:
        """``[n_agents, action_width]`` float64 actions, or an error naming the width the spec asks for.

        A row is the continuous actions then one index per discrete branch (hybrid: both).
        """
        width = behaviour.parameters.action_width
        array = np.asarray(flat, dtype=np.float64)
        given = array.shape[-1] if array.ndim >= 2 else None
        if (given is not None and given != width) or array.size < n_agents * width or array.size % max(width, 1):
            parts = ([f"{behaviour.continuous} continuous"] if behaviour.continuous else []) + (
                [f"{len(behaviour.branches)} discrete branches {behaviour.branches}"] if behaviour.branches else [])
            received = f"rows of {given} values" if given is not None else f"{array.size} values"
            raise UnityActionException(
                f"Brain {behaviour.name!r}: the actions for its {n_agents} deciding agents are {received} "
                f"(shape {array.shape}), but its action spec is {' + '.join(parts) or 'empty'} = {width} values "
                f"per agent. Send an array of shape ({n_agents}, {width}): the continuous actions first, then one "
                "action index per discrete branch.")
        return array.reshape(-1, width)[:n_agents]

    # ---------------------------------------------------------------- receiving
    def receive(self) -> Tuple[Dict[str, BrainInfo], bool]:
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
            if len(entry.value) and name not in self._behaviours:
                raise bad("agents of a behaviour that was never announced reported.", log, brain=name,
                          agent=entry.value[0].id, field="agentInfos", received=f"{len(entry.value)} infos",
                          expected="a behaviour announced in rl_initialization_output.brain_parameters in the "
                          f"message with its first agents (known: {sorted(self._behaviours)[:8]})")
        result = {}
        for name, behaviour in self._behaviours.items():
            infos = lists[name].value if name in lists else ()
            result[name] = self._brain_info(behaviour, infos)
        return result, False

    def _read_side_channels(self, data: bytes) -> None:
        log = self.peer.log_path
        for channel, payload in parse_side_channels(data, log):
            if channel == STATS_CHANNEL:
                stat = parse_stat(payload, log)
                if stat is not None:
                    key, value, aggregation = stat
                    self.stats.setdefault(key, []).append((value, aggregation))
            elif channel in self._user_channels:
                self._user_channels[channel].on_message_received(IncomingMessage(payload))
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
        known = self._behaviours.get(name)
        if known is not None:
            check_same_spec(name, known.spec, spec, log)
            return
        if self._handshaken:
            logger.warning("Behaviour %r connected after the run started; no trainer was built for it, so its "
                           "agents get no actions.", name)
        self._add_behaviour(name, spec, list(params.action_spec.action_descriptions),
                            [(o.name, int(o.observation_type)) for o in infos[0].observations])

    def _add_behaviour(self, name: str, spec: Spec, descriptions: List[str],
                       sensor_names: Sequence[Tuple[str, int]] = ()) -> None:
        """A new brain: vector sensors concatenated into its state, cameras in order, and its
        ``sensors`` list keeping each one's name, shape and place, in the wire order."""
        continuous, branches, shapes = spec
        observations, cameras, state_size, sensors = [], [], 0, []
        for k, shape in enumerate(shapes):
            sensor_name, observation_type = sensor_names[k] if k < len(sensor_names) else ("", 0)
            sensor_name = sensor_name or f"sensor_{k}"
            if len(shape) == 3:
                hwc = (shape[1], shape[2], shape[0]) if self.channels_last else shape
                observations.append(_ObservationSpec(shape, True, hwc, name=sensor_name))
                sensors.append({"name": sensor_name, "shape": [hwc[2], hwc[0], hwc[1]], "camera": len(cameras),
                                "observationType": observation_type})
                cameras.append({"width": hwc[1], "height": hwc[0], "blackAndWhite": hwc[2] == 1,
                                "channels": hwc[2]})
            else:
                size = int(np.prod(shape))
                observations.append(_ObservationSpec(shape, False, size=size, name=sensor_name))
                sensors.append({"name": sensor_name, "shape": list(shape), "offset": state_size,
                                "observationType": observation_type,
                                "variableLength": len(shape) == 2})  # rank 2: variable-length once announced
                state_size += size
        if branches and not continuous:
            action_type, action_size = 0, int(sum(branches))
        else:  # continuous, or hybrid: a continuous brain with branches (BrainParameters.is_hybrid)
            action_type, action_size = 1, continuous
        parameters = BrainParameters(name, {
            "stateSize": state_size, "actionSize": action_size, "memorySize": 0,
            "cameraResolutions": cameras, "actionDescriptions": descriptions,
            "actionSpaceType": action_type, "stateSpaceType": 1, "actionBranches": list(branches),
            "actionMasks": bool(branches), "continuousActionContract": "unit", "sensors": sensors})
        self._behaviours[name] = _Behaviour(name, observations, continuous, list(branches), parameters, spec=spec)
        self.brains[name] = parameters
        logger.info("Connected new brain: %s (state %d, cameras %s, %s)", name, state_size,
                    [tuple(o.hwc) for o in observations if o.visual],
                    ", ".join(([f"{continuous} continuous actions"] if continuous else [])
                              + ([f"discrete branches {list(branches)}"] if branches else [])))

    def _decode(self, behaviour: _Behaviour, info: "pb.AgentInfoProto") -> Tuple[List[float], List[np.ndarray]]:
        """One agent's observations: its vector values (concatenated) and its camera frames."""
        specs = behaviour.observations
        observations = info.observations
        log, name, agent = self.peer.log_path, behaviour.name, info.id
        if len(observations) != len(specs):
            raise bad("every agent of a behaviour must have the sensors it was announced with.", log, brain=name,
                      agent=agent, field="observations", expected=f"{len(specs)} observations (shapes "
                      f"{[s.shape for s in specs]})", received=f"{len(observations)} observations",
                      kind=UnityObservationException)
        vector: List[float] = []
        frames = []
        for k, (spec, obs) in enumerate(zip(specs, observations)):
            sensor = f"sensor {spec.name!r}: "
            if tuple(obs.shape) != spec.shape:
                raise observation_error(sensor + "the shape differs from its ObservationSpec.", log, name, agent, k,
                                        spec.shape, tuple(obs.shape)[:8], ".shape")
            if obs.compression_type == pb.NONE:
                data = obs.float_data.data
                expected = spec.size if not spec.visual else int(np.prod(spec.shape))
                if len(data) != expected:
                    raise observation_error(sensor + f"it has {len(data)} values; expected {expected}.", log, name,
                                            agent, k, f"{expected} values (shape {spec.shape})", f"{len(data)} values",
                                            ".float_data")
                if spec.visual:
                    array = np.asarray(data, dtype=np.float32).reshape(spec.shape)
                    frames.append(array.transpose(1, 2, 0) if self.channels_last else array)
                else:
                    vector.extend(data)
            elif obs.compression_type != pb.PNG:
                raise observation_error(sensor + "the compression type is unknown.", log, name, agent, k,
                                        "0 (none) or 1 (PNG)", obs.compression_type, ".compression_type")
            elif not spec.visual:
                raise observation_error(sensor + "only rank-3 (visual) observations may be PNG.", log, name, agent, k,
                                        "float_data for a vector observation", f"PNG data for shape {spec.shape}",
                                        ".compression_type")
            else:
                try:
                    frames.append(decode_png_observation(obs.compressed_data, spec.hwc,
                                                         list(obs.compressed_channel_mapping)))
                except Exception as e:  # Pillow raises several types for bad images
                    raise observation_error(
                        sensor + "it is not a readable PNG observation. Check the camera sensor's compression, and "
                        f"the layout: a C# 2.x build sends [H,W,C], 3.x [C,H,W] (package version "
                        f"{self.package_version!r}).", log, name, agent, k, f"PNG images of shape {spec.shape}",
                        f"{type(e).__name__}: {e}", ".compressed_data") from None
        return vector, frames

    def _observations(self, behaviour: _Behaviour,
                      rows: Sequence["pb.AgentInfoProto"]) -> Tuple[np.ndarray, List[np.ndarray]]:
        """``[n, state]`` and the ``[n, H, W, C]`` cameras of ``rows``, validated against the spec."""
        specs = behaviour.observations
        n = len(rows)
        if len(specs) == 1 and not specs[0].visual:  # one vector sensor (most scenes): the fast path
            size, shape = specs[0].size, list(specs[0].shape)
            values = []
            for info in rows:
                observations = info.observations
                obs = observations[0] if len(observations) == 1 else None
                if obs is None or obs.compression_type or obs.shape != shape:
                    self._decode(behaviour, info)  # raises the precise error
                data = list(obs.float_data.data)
                if len(data) != size:
                    self._decode(behaviour, info)
                values.append(data)
            state = np.asarray(values, np.float32) if n else np.zeros((0, size), np.float32)
        else:
            state = np.zeros((n, behaviour.parameters.state_space_size), np.float32)
            cameras = [np.zeros((n,) + tuple(s.hwc), np.float32) for s in specs if s.visual]
            for r, info in enumerate(rows):
                vector, frames = self._decode(behaviour, info)
                if vector:
                    state[r] = vector
                for c, frame in enumerate(frames):
                    cameras[c][r] = frame
        log, ids = self.peer.log_path, [int(i.id) for i in rows]
        check_finite(behaviour.name, "observations (vector)", state, log, ids)
        if len(specs) == 1 and not specs[0].visual:
            return state, []
        for c, frames in enumerate(cameras):
            check_finite(behaviour.name, f"observations (camera {c})", frames, log, ids)
        return state, cameras

    def _brain_info(self, behaviour: _Behaviour, infos: Sequence["pb.AgentInfoProto"]) -> BrainInfo:
        params = behaviour.parameters
        log = self.peer.log_path
        check_agents(behaviour.name, infos, log)
        total = int(sum(behaviour.branches))
        for info in infos:
            check_mask(behaviour.name, info, total, log)
        every = [int(i.id) for i in infos]
        check_finite(behaviour.name, "reward", np.asarray([i.reward for i in infos], np.float32), log, every)
        check_finite(behaviour.name, "group_reward", np.asarray([i.group_reward for i in infos], np.float32),
                     log, every)
        deciding = [i for i in infos if not i.done]
        ending = [i for i in infos if i.done]
        row_of = {info.id: r for r, info in enumerate(deciding)}
        rows = deciding + [i for i in ending if i.id not in row_of]
        n = len(rows)
        state, cameras = self._observations(behaviour, rows)
        rewards = [float(i.reward) for i in rows]
        done = [False] * len(deciding) + [True] * (n - len(deciding))
        interrupted = [False] * n
        group_rewards = [float(i.group_reward) for i in rows]
        for info in ending:
            r = row_of.get(info.id)
            if r is None:
                r = len(deciding) + [i.id for i in rows[len(deciding):]].index(info.id)
                interrupted[r] = bool(info.max_step_reached)
                continue
            rewards[r] += float(info.reward)  # the last reward of the episode that just ended
            group_rewards[r] += float(info.group_reward)
            done[r] = True
            interrupted[r] = bool(info.max_step_reached)
        ids = [int(i.id) for i in rows]
        with np.errstate(over="ignore"):  # two float32 maxima add up to infinity: refused below
            check_finite(behaviour.name, "reward (episode end + next decision)", np.asarray(rewards, np.float32),
                         log, ids)
            check_finite(behaviour.name, "group_reward (episode end + next decision)",
                         np.asarray(group_rewards, np.float32), log, ids)
        masks = None
        if behaviour.branches:
            masks = np.ones((n, total), np.float32)
            for r, info in enumerate(rows):
                if len(info.action_mask):  # True = disabled; its length was checked above
                    masks[r] = 1.0 - np.asarray(info.action_mask, np.float32)
        width = params.action_width
        previous = np.zeros((n, width), np.float32)
        for r, info in enumerate(rows):
            last = behaviour.last_actions.get(info.id)
            if last is not None:
                previous[r] = last
        terminal = self._terminal_info(behaviour, ending) if ending else None
        behaviour.decision_ids = [i.id for i in deciding]
        return BrainInfo(
            cameras, state, np.zeros((n, 0), np.float32), rewards, ids, done, previous,
            max_reached=interrupted, action_masks=masks, group_id=[int(i.group_id) for i in rows],
            group_rewards=group_rewards, decision_requested=[True] * len(deciding) + [False] * (n - len(deciding)),
            terminal_info=terminal)

    def _terminal_info(self, behaviour: _Behaviour, ending: Sequence["pb.AgentInfoProto"]) -> BrainInfo:
        """The last observations of the agents whose episodes ended (for bootstrapping)."""
        params = behaviour.parameters
        n = len(ending)
        state, cameras = self._observations(behaviour, ending)
        return BrainInfo(
            cameras, state, np.zeros((n, 0), np.float32), [float(i.reward) for i in ending],
            [int(i.id) for i in ending], [True] * n, np.zeros((n, params.action_width), np.float32),
            max_reached=[bool(i.max_step_reached) for i in ending],
            action_masks=None if not behaviour.branches else np.ones((n, int(sum(behaviour.branches))), np.float32),
            group_id=[int(i.group_id) for i in ending], group_rewards=[float(i.group_reward) for i in ending],
            decision_requested=[False] * n)

    # ---------------------------------------------------------------- closing
    def close(self) -> None:
        """Answer the pending call with status 400 (Unity quits), then stop the server."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        data = self._bye
        if self._pending is not None:
            self._pending.answer(data)
            self._pending = None
        while True:  # calls that arrived but were never read
            try:
                self._calls.get_nowait().answer(data)
            except queue.Empty:
                break
        self._server.stop(grace=1.0).wait(5.0)


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
