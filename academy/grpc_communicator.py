"""The Unity side of the modern ML-Agents protocol (communication API 1.5.0): the gRPC client.

``python -m academy <Scene> --mlagents-port N`` serves a built-in scene the way a Unity build
made with the C# package 3.0.0 would (the Python end and its messages are described in
``unityagents/wire/grpc.py`` and docs/getting-started.md's "Modern Unity builds (gRPC)"; the
``--package-version 2.3.0`` flag gives the 2.x camera layout [H,W,C] instead of [C,H,W]):

* handshake: call #1 carries the initialisation output ("AcademySingleton", "1.5.0", the
  package version, seven capabilities); call #2 is a bare header; its reply is the first command;
* every later call is the answer to Python's last reply: it runs the Academy until an agent has
  something to report (a decision request, or the end of its episode), then sends that;
* behaviours are the scene's External brains, named as in Unity's example project
  (``academy.UNITY_NAMES``: ``3DBall?team=0``, ``Basic?team=0``, ...; a brain Unity has no example for
  keeps its name), or the scene's ``behaviour_names`` (Tennis' two sides are ``Tennis?team=0`` and
  ``Tennis?team=1``, SoccerTwos' ``SoccerTwos?team=0`` and ``SoccerTwos?team=1``); each behaviour's
  ``BrainParameters`` go out once, with its first agents;
* observations per agent, sorted by sensor name like Unity's: a scene's declared sensors
  (``BrainSpec.sensors``: Pyramids' rays and its vector, GridWorld's goal and its camera), by
  default cameras (``CameraSensor_<k>``) and then one vector (``VectorSensor_size<n>``); each
  camera one RGB PNG, shape [C,H,W] or [H,W,C]; the discrete states of API-2 scenes such as
  Basic become one-hot vectors;
* a brain's ``decision_period`` (``BrainSpec``; ``--decision-period`` overrides it): agents ask
  for a decision every that many Academy steps and repeat their action in between; an episode's
  end is reported in the step it happens;
* a scene's ``action_mask`` (GridWorld: moves into a wall) goes out as ``action_mask`` (true =
  disabled); its ``group_ids`` and group rewards as ``group_id``/``group_reward``; its ``asleep``
  agents (members that left their group early) ask for no decision; its ``take_stats`` go to the
  stats channel;
* side channels: the engine configuration is accepted (and logged: a Python scene has no frame
  rate); environment parameters become the reset parameters of the next reset; one stat per
  finished episode, ``Academy/<brain> Episode Reward``, goes to the stats channel (frames read and
  written by ``side_channels.py``);
* status 400 or QUIT from Python ends the run (exit 0); on an error we send a status-400 call;
* SIGINT or SIGTERM (the Editor leaving play mode, a player quitting) sends a status-400 call, as
  Unity's ``RpcCommunicator.Dispose`` does, waits briefly for the answer, and exits 0.

Written independently of ``unityagents``: it shares only the message classes generated from the
same ``.proto`` (``unityagents.wire.protos``, which loads nothing else of ``unityagents``).
"""
from __future__ import annotations

import itertools
import logging
import os
import signal
import struct
import sys
import threading
from typing import Any, Callable

import numpy as np

from academy import UNITY_NAMES
from academy.academy import Academy
from academy.brain import BrainRuntime
from academy.buffer_sensor import BUFFER_DIMENSION_PROPERTIES, BufferSensor
from academy.checks import ActionError
from academy.communicator import encode_png
from academy.scene import CameraSensor, modern_observations
from academy.side_channels import TrainerProtocolError, read_side_channels, stat_frame
from unityagents.wire.protos import communicator_objects_pb2 as pb

log = logging.getLogger("academy.grpc")

API_VERSION = "1.5.0"
DEFAULT_PACKAGE_VERSION = "3.0.0"
_METHOD = "/communicator_objects.UnityToExternalProto/Exchange"
_OK, _BYE = 200, 400


def _read_only(rows: np.ndarray) -> np.ndarray:
    """``rows``, write-protected: one array is shared by every report that names those rows."""
    rows.flags.writeable = False
    return rows


#: No agent: the rows of a behaviour that reports nothing this step.
_NO_ROWS = _read_only(np.zeros(0, np.int64))


def import_grpc() -> Any:
    """grpcio, set up where this process imports it first to read and write on the calling thread.

    grpc core's default EventEngine client hands every read and write of a channel to a pool
    thread: four to five thread switches per call of the scene. The iomgr poller that core still
    ships (its experiment ``event_engine_client`` turned off) does the I/O on the thread that waits
    for the reply, as a blocking Unity call does: one switch per call, and less client CPU per bare
    call (on a whole 3DBall step the difference stays within a shared machine's noise).
    Core reads ``GRPC_EXPERIMENTS`` when grpcio is imported, so the variable is set only around that
    import (nothing else in the process sees it), and a user's own setting is left alone.
    """
    if "grpc" in sys.modules or "GRPC_EXPERIMENTS" in os.environ:
        import grpc
        return grpc
    os.environ["GRPC_EXPERIMENTS"] = "-event_engine_client"
    try:
        import grpc
    finally:
        del os.environ["GRPC_EXPERIMENTS"]
    return grpc


class TrainerGone(Exception):
    """The trainer refused a call, closed the channel, or was never there."""


class GrpcClient:
    """One channel to the trainer's gRPC server; ``exchange`` is one blocking unary call."""

    def __init__(self, port: int, host: str = "127.0.0.1", connect_timeout: float = 30.0) -> None:
        grpc = import_grpc()
        self._grpc = grpc
        self._target = f"{host}:{port}"
        self.connect_timeout = connect_timeout
        self._connect()
        self._first = True
        self.open = True

    def _connect(self) -> None:
        # No proxy: gRPC honours http_proxy, which would send a loopback call elsewhere.
        self._channel = self._grpc.insecure_channel(
            self._target, options=[("grpc.enable_http_proxy", 0), ("grpc.max_receive_message_length", -1),
                                   ("grpc.max_send_message_length", -1)])
        self._call = self._channel.unary_unary(_METHOD, request_serializer=pb.UnityMessageProto.SerializeToString,
                                               response_deserializer=pb.UnityMessageProto.FromString)
        self._cancelled = False

    def exchange(self, message: "pb.UnityMessageProto") -> "pb.UnityMessageProto":
        """Send ``message``; wait (without deadline after the first call, as Unity) for the reply.

        The first call polls its future (the trainer may still be starting its server). Every
        later call is gRPC's blocking call, which waits on this thread without starting one per
        call; a signal taken meanwhile (``serve_modern``'s handlers only record it) closes the
        channel from another thread (``_record_signal``), which ends the call with an error here,
        and ``KeyboardInterrupt`` is raised in plain Python: an exception raised inside gRPC's
        blocking call can abort the process.
        """
        global _waiting
        _raise_if_signalled()
        if self._first:
            self._first = False
            return self._first_exchange(message)
        _waiting = self
        try:
            _raise_if_signalled()  # a signal recorded before _waiting was set closed nothing
            return self._call(message)
        except (self._grpc.RpcError, ValueError) as exc:  # ValueError: the channel closed before the call
            _raise_if_signalled()
            self.open = False
            if isinstance(exc, ValueError):
                raise TrainerGone(f"the channel to the trainer is closed ({exc})") from None
            raise TrainerGone(f"the call to the trainer failed ({exc.code().name}: {exc.details()})") from None
        finally:
            _waiting = None

    def _first_exchange(self, message: "pb.UnityMessageProto") -> "pb.UnityMessageProto":
        call = self._call.future(message, timeout=self.connect_timeout, wait_for_ready=True)
        try:
            while True:
                try:
                    return call.result(timeout=_SIGNAL_POLL_S)
                except self._grpc.FutureTimeoutError:
                    if _signalled:
                        call.cancel()
                        _raise_if_signalled()
        except self._grpc.RpcError as exc:
            self.open = False
            raise TrainerGone(f"the call to the trainer failed ({exc.code().name}: {exc.details()})") from None

    def cancel(self) -> None:
        """End the call in flight (a signal was taken): close the channel; ``say_goodbye`` opens a new one."""
        self._cancelled = True
        self._channel.close()

    def say_goodbye(self) -> None:
        """Unity's ``Dispose``: a status-400 call if still connected (errors ignored)."""
        if not self.open:
            return
        self.open = False
        if self._cancelled:
            self._connect()
        bye = pb.UnityMessageProto()
        bye.header.status = _BYE
        try:
            self._call(bye, timeout=2.0)
        except self._grpc.RpcError:
            pass

    def close(self) -> None:
        self._channel.close()


class ModernUnity:
    """Runs an ``Academy`` behind the modern protocol (see the module docstring)."""

    def __init__(self, academy: Academy, client: GrpcClient, package_version: str = DEFAULT_PACKAGE_VERSION,
                 decision_period: int | None = None, log_path: str = "",
                 replicate: Callable[[int], Academy] | None = None) -> None:
        self.client = client
        self.package_version = package_version
        self.channels_first = int(package_version.split(".")[0]) >= 3
        self.log_path = log_path
        self.decision_period = decision_period
        #: Builds the Academy over ``num_areas`` copies of the scene's training area (TrainingAreaReplicator).
        self.replicate = replicate
        self._adopt(academy)

    def _adopt(self, academy: Academy) -> None:
        """Serve ``academy``: its External brains become the behaviours, its agents get Unity's ids."""
        decision_period = self.decision_period
        self.academy = academy
        self.brains = [b for b in academy.brains if b.config.kind == "external"]
        names = getattr(academy.scene, "behavior_names", {})
        self.names = {b.name: names.get(b.name, f"{UNITY_NAMES.get(b.name, b.name)}?team=0") for b in self.brains}
        academy.scene.modern_protocol = True
        self.period = {b.name: max(1, int(decision_period or b.spec.decision_period)) for b in self.brains}
        offsets, total = {}, 0
        for b in self.brains:  # Unity's episode ids: one global counter
            offsets[b.name] = total
            total += b.spec.n_agents
        self.ids = {b.name: np.arange(offsets[b.name], offsets[b.name] + b.spec.n_agents) for b in self.brains}
        #: Every row of a brain: who decides at a decision step when no agent is asleep.
        self.all_rows = {b.name: _read_only(np.arange(b.spec.n_agents)) for b in self.brains}
        self.announced: set[str] = set()
        self.deciding: dict[str, np.ndarray] = {b.name: _NO_ROWS for b in self.brains}
        #: Rows whose episode the Academy cut (its max step): reported as interrupted.
        self.forced = {b.name: np.zeros(b.spec.n_agents, bool) for b in self.brains}
        self.pending_parameters: dict[str, float] = {}
        self.stats: list[bytes] = []
        self.step_count = 0
        self._sensor_templates: dict[str, list[pb.ObservationProto]] = {}

    # --- the conversation -------------------------------------------------------------------------

    def run(self) -> str:
        """Handshake, then serve until the trainer ends the run; returns why it ended."""
        hello = pb.UnityMessageProto()
        hello.header.status = _OK
        init = hello.unity_output.rl_initialization_output
        init.name = "AcademySingleton"
        init.communication_version = API_VERSION
        init.package_version = self.package_version
        for flag in ("baseRLCapabilities", "concatenatedPngObservations", "compressedChannelMapping",
                     "hybridActions", "trainingAnalytics", "variableLengthObservation", "multiAgentGroups"):
            setattr(init.capabilities, flag, True)
        # log_path stays unset, as Unity sends it; the trainer knows the -logFile it passed.
        reply = self.client.exchange(hello)
        if reply.header.status != _OK or not reply.HasField("unity_input"):
            return f"the trainer refused the handshake (status {reply.header.status})"
        settings = reply.unity_input.rl_initialization_input
        log.info("trainer: communication version %r, package %r, seed %d", settings.communication_version,
                 settings.package_version, settings.seed)
        areas = settings.num_areas
        if areas > 1 and self.replicate is not None:  # TrainingAreaReplicator: the area, num_areas times
            self._adopt(self.replicate(areas))
            log.info("num_areas %d: the training area is replicated %d times (%s)", areas, areas,
                     ", ".join(f"{self.names[b.name]}: {b.spec.n_agents} agents" for b in self.brains))
        elif areas > 1:
            log.warning("num_areas %d asked for, but this scene has no area to replicate; it keeps its agents", areas)
        self.academy.scene.rng = np.random.default_rng(settings.seed)  # Random.InitState(seed)
        self._check_trainer_capabilities(settings)
        second = pb.UnityMessageProto()
        second.header.status = _OK
        reply = self.client.exchange(second)
        while True:
            if reply.header.status != _OK:
                self.client.open = False
                return f"the trainer closed the run (status {reply.header.status})"
            rl = reply.unity_input.rl_input
            self.pending_parameters.update(read_side_channels(rl.side_channel))
            if rl.command == pb.QUIT:
                return "QUIT"
            if rl.command == pb.RESET:
                output = self._reset()
            else:
                self._apply_actions(rl)
                output = self._run_until_report()
            reply = self.client.exchange(output)

    # --- the Academy ------------------------------------------------------------------------------

    def _reset(self) -> "pb.UnityMessageProto":
        """RESET: new parameters first, a full reset without done infos, then everyone decides."""
        parameters, self.pending_parameters = self.pending_parameters, {}
        if parameters:
            log.info("reset with environment parameters %s", parameters)
        self.academy.reset(parameters=parameters)
        self.step_count = 0
        for forced in self.forced.values():
            forced[:] = False
        return self._output({b.name: ([], self.all_rows[b.name]) for b in self.brains})

    def _apply_actions(self, rl: Any) -> None:
        for b in self.brains:
            rows = self.deciding[b.name]
            if not rows.size:
                continue
            name = self.names[b.name]
            listed = rl.agent_actions.get(name)  # one map lookup; None when the behaviour has no entry
            entries = listed.value if listed is not None else ()
            if not entries:  # Unity: no action → ActionBuffers.Empty
                b.action[rows] = 0.0
                continue
            if len(entries) < rows.size:
                raise ActionError(f"behaviour {name!r}: {len(entries)} actions for the {rows.size} agents that asked "
                                  "for a decision; send one AgentActionProto per agent, in decision order")
            spec = b.spec
            entries = entries[:rows.size]
            if spec.action_space == "discrete":
                # Checked in Python: a handful of ints, where each numpy call costs more than the loop.
                values = [list(e.discrete_actions) for e in entries]
                array = values  # stored as float64 by the assignment below
                if not all(len(v) == 1 and 0 <= v[0] < spec.action_size for v in values):
                    raise ActionError(f"behaviour {name!r}: discrete_actions {values[:4]}...; expected one action "
                                      f"in 0..{spec.action_size - 1} per agent")
            else:
                values = [e.continuous_actions for e in entries]
                ok = all(len(v) == spec.action_size for v in values)
                # One pass over every float (a list per agent first costs three times as much).
                array = np.fromiter(itertools.chain.from_iterable(values), np.float64,
                                    rows.size * spec.action_size).reshape(rows.size, -1) if ok else None
                if not ok or not np.isfinite(array).all():
                    raise ActionError(f"behaviour {name!r}: continuous_actions {[list(v) for v in values[:4]]}...; "
                                      f"expected {spec.action_size} finite floats per agent")
                if spec.discrete_branches:  # hybrid: the branch indices follow the continuous values
                    array = np.concatenate([array, self._branch_actions(name, spec.discrete_branches, entries)], 1)
            b.action[rows] = array

    @staticmethod
    def _branch_actions(name: str, branches: tuple[int, ...], entries: Any) -> np.ndarray:
        """The discrete part of hybrid actions: one index per branch per agent, each in its branch."""
        values = [list(e.discrete_actions) for e in entries]
        if not all(len(v) == len(branches) and all(0 <= x < n for x, n in zip(v, branches)) for v in values):
            raise ActionError(f"behaviour {name!r}: discrete_actions {values[:4]}...; expected one index per branch "
                              f"of {list(branches)} per agent, next to the continuous actions")
        return np.asarray(values, np.float64)

    def _run_until_report(self) -> "pb.UnityMessageProto":
        """Academy steps with the stored actions until some agent reports (Unity sends only then)."""
        academy = self.academy
        while True:
            academy.decide()  # non-External brains (heuristic, internal) act locally every step
            academy.advance()
            self.step_count += 1
            reports: dict[str, tuple[list[dict], np.ndarray]] = {}
            if academy.done:  # an Academy max step: every episode is interrupted, then a full reset
                for b in self.brains:
                    b.done[:] = True
                    self.forced[b.name][:] = True
            for b in self.brains:
                done_rows = b.done.nonzero()[0]
                ending = []
                if done_rows.size:
                    ending = self._terminal(b, done_rows)
                    academy.reset_agents(b, done_rows)
                    b.done[done_rows] = False
                reports[b.name] = (ending, _NO_ROWS)
            if academy.done:
                academy.reset()
                self.step_count = 0
            for b in self.brains:
                if self.step_count % self.period[b.name] == 0:
                    asleep = academy.scene.asleep(b.name)  # out until their group's next episode
                    rows = self.all_rows[b.name] if asleep is None else np.flatnonzero(~asleep)
                    reports[b.name] = (reports[b.name][0], rows)
            for b in academy.brains:
                if b.config.kind != "external":  # not behaviours: Unity would not send them
                    done_rows = b.done.nonzero()[0]
                    if done_rows.size:
                        academy.reset_agents(b, done_rows)
                    b.reward[:] = 0.0
                    b.group_reward[:] = 0.0
                    b.done[:] = False
            if any(ending or rows.size for ending, rows in reports.values()):
                return self._output(reports)

    def _terminal(self, b: BrainRuntime, rows: np.ndarray) -> list[dict]:
        """The done infos of ``rows``: last observation, last reward, and why the episode ended."""
        max_step = b.spec.max_step
        forced = self.forced[b.name]
        sensors = self._sensors(b, rows)
        infos = []
        for k, row in enumerate(rows):
            reward = float(b.reward[row])
            group_reward = float(b.group_reward[row])
            b.episode_reward[row] += reward
            interrupted = bool(forced[row]) or (max_step > 0 and b.steps[row] > max_step)
            infos.append({"row": int(row), "reward": reward, "done": True, "max_step_reached": interrupted,
                          "sensors": sensors, "k": k, "group_reward": group_reward})
            self.stats.append(stat_frame(f"Academy/{b.name} Episode Reward", float(b.episode_reward[row])))
            b.episode_reward[row] = 0.0
            b.reward[row] = 0.0
            b.group_reward[row] = 0.0
        forced[rows] = False
        return infos

    def _check_trainer_capabilities(self, settings: "pb.UnityRLInitializationInputProto") -> None:
        """Unity throws when a BufferSensor meets a trainer whose capabilities say it cannot read one
        (no capabilities at all count as every one)."""
        if not settings.HasField("capabilities") or settings.capabilities.variableLengthObservation:
            return
        buffers = [f"{s.name} of {b.name}" for b in self.brains for s in b.spec.modern_sensors()
                   if isinstance(s, BufferSensor)]
        if buffers:
            raise ValueError(f"Variable Length Observations are not supported by the trainer ({', '.join(buffers)}: "
                             "its capabilities say variableLengthObservation false)")

    def _sensors(self, b: BrainRuntime, rows: np.ndarray) -> list[list]:
        """The sensor data of ``rows``, per sensor in Unity's order: a camera's PNGs, a vector's float lists."""
        out = []
        if rows is self.all_rows.get(b.name):  # every agent: the sensors' arrays as they are, no selected copy
            rows = None
        for sensor, values in zip(b.spec.modern_sensors(), modern_observations(self.academy.scene, b.spec, rows)):
            if isinstance(sensor, CameraSensor):
                out.append([encode_png(image) for image in values])
            else:
                out.append(values.tolist())
        return out

    def _templates(self, b: BrainRuntime) -> list["pb.ObservationProto"]:
        """Per sensor an ObservationProto without data (shape, dimension properties, name, compression):
        copying one per agent is cheaper than setting those fields one by one."""
        cached = self._sensor_templates.get(b.name)
        if cached is None:
            cached = []
            for sensor in b.spec.modern_sensors():
                if isinstance(sensor, CameraSensor):
                    camera = b.spec.cameras[sensor.camera]
                    channels = 1 if camera.black_and_white else 3
                    if self.channels_first:
                        shape, dims = (channels, camera.height, camera.width), (1, 2, 2)
                    else:
                        shape, dims = (camera.height, camera.width, channels), (2, 2, 1)
                    cached.append(pb.ObservationProto(shape=shape, dimension_properties=dims,
                                                      compression_type=pb.PNG, name=sensor.name))
                elif isinstance(sensor, BufferSensor):  # [max_entities, entity_size], the first dim variable
                    cached.append(pb.ObservationProto(shape=sensor.shape, name=sensor.name,
                                                      dimension_properties=BUFFER_DIMENSION_PROPERTIES))
                else:
                    cached.append(pb.ObservationProto(shape=[sensor.size], dimension_properties=[1], name=sensor.name,
                                                      observation_type=pb.GOAL_SIGNAL if sensor.goal else pb.DEFAULT))
            self._sensor_templates[b.name] = cached
        return cached

    @staticmethod
    def _write_observations(info: "pb.AgentInfoProto", templates: list["pb.ObservationProto"], k: int,
                            sensors: list[list]) -> None:
        """Row ``k``'s observations, in Unity's sensor order (sorted by name)."""
        add = info.observations.add
        for template, data in zip(templates, sensors):
            obs = add()
            obs.CopyFrom(template)
            if template.compression_type == pb.PNG:
                obs.compressed_data = data[k]
            else:
                obs.float_data.data.extend(data[k])

    def _output(self, reports: dict[str, tuple[list[dict], np.ndarray]]) -> "pb.UnityMessageProto":
        """One Unity output: every behaviour's list (terminal infos, then decision requests)."""
        message = pb.UnityMessageProto()
        message.header.status = _OK
        rl = message.unity_output.rl_output
        for b in self.brains:
            name = self.names[b.name]
            ending, deciding = reports.get(b.name, ([], _NO_ROWS))
            infos = rl.agentInfos[name].value  # every known behaviour is listed, maybe empty
            ids = self.ids[b.name]
            groups = self.academy.scene.group_ids(b.name)
            templates = self._templates(b)
            for info in ending:
                proto = infos.add(reward=info["reward"], done=True, max_step_reached=info["max_step_reached"],
                                  id=int(ids[info["row"]]))
                if groups is not None:
                    proto.group_id, proto.group_reward = int(groups[info["row"]]), info["group_reward"]
                self._write_observations(proto, templates, info["k"], info["sensors"])
            if deciding.size:
                masks = self.academy.scene.action_mask(b.name)
                sensors = self._sensors(b, deciding)
                rewards = b.reward[deciding]
                group_rewards = None if groups is None else b.group_reward[deciding].tolist()
                b.episode_reward[deciding] += rewards
                b.reward[deciding] = 0.0
                b.group_reward[deciding] = 0.0
                # Plain ints and floats: iterating numpy arrays makes a numpy scalar per element.
                for k, (row, agent, reward) in enumerate(zip(deciding.tolist(), ids[deciding].tolist(),
                                                             rewards.tolist())):
                    info = infos.add(reward=reward, id=agent)
                    if groups is not None:
                        info.group_id, info.group_reward = int(groups[row]), group_rewards[k]
                    self._write_observations(info, templates, k, sensors)
                    if masks is not None:
                        info.action_mask.extend(bool(m) for m in masks[row])
            self.deciding[b.name] = deciding
            if len(infos) and name not in self.announced:
                self.announced.add(name)
                params = message.unity_output.rl_initialization_output.brain_parameters.add(
                    brain_name=name, is_training=True)
                if b.spec.action_space == "discrete":
                    params.action_spec.num_discrete_actions = 1
                    params.action_spec.discrete_branch_sizes.append(b.spec.action_size)
                else:
                    params.action_spec.num_continuous_actions = b.spec.action_size
                    params.action_spec.num_discrete_actions = len(b.spec.discrete_branches)
                    params.action_spec.discrete_branch_sizes.extend(b.spec.discrete_branches)
        self.stats += [stat_frame(key, value) for key, value in self.academy.scene.take_stats()]
        if self.stats:
            rl.side_channel = b"".join(self.stats)
            self.stats = []
        return message


def serve_modern(academy: Academy, port: int, package_version: str = DEFAULT_PACKAGE_VERSION,
                 decision_period: int | None = None, log_path: str = "",
                 replicate: Callable[[int], Academy] | None = None) -> int:
    """``python -m academy <Scene> --mlagents-port N``: connect, serve, return the exit status.

    0 when the trainer ends the run (status 400 or QUIT), 1 when the trainer is unreachable or the
    call fails, 3 when its reply breaks the protocol (after telling it with a status-400 call).
    """
    client = GrpcClient(port)
    handled = (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
    previous = {signum: signal.signal(signum, _record_signal) for signum in handled}
    _signalled.clear()
    try:
        reason = ModernUnity(academy, client, package_version, decision_period, log_path, replicate).run()
        log.info("%s: quitting", reason)
        return 0
    except KeyboardInterrupt:  # SIGINT or SIGTERM: the Editor leaving play mode, or the player quitting
        log.info("interrupted: closing the connection with a status-400 call (Unity's RpcCommunicator.Dispose)")
        client.say_goodbye()
        return 0
    except TrainerGone as exc:
        log.error("%s; exiting", exc)
        return 1
    except (TrainerProtocolError, ActionError, ValueError, struct.error) as exc:
        log.error("protocol error: %s; exiting", exc)
        client.say_goodbye()
        return 3
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        client.close()


#: The signals taken while ``serve_modern`` runs; the client raises ``KeyboardInterrupt`` for them at
#: its next exchange, or once the call it waits on is cancelled (within ``_SIGNAL_POLL_S`` on the first call).
_signalled: list = []
_SIGNAL_POLL_S = 0.1


#: The client whose blocking call is in flight, if any: a signal cancels that call.
_waiting: "GrpcClient | None" = None


def _record_signal(signum: int, frame: Any) -> None:
    """SIGINT and SIGTERM end the run with Unity's goodbye (``serve_modern``); the handler only
    records the signal, so that nothing raises inside gRPC's native code, and has the call in
    flight cancelled from another thread (the handler may run inside gRPC's wait)."""
    _signalled.append(signum)
    client = _waiting
    if client is not None:
        threading.Thread(target=client.cancel, name="academy-cancel", daemon=True).start()


def _raise_if_signalled() -> None:
    if _signalled:
        raise KeyboardInterrupt(signal.Signals(_signalled[0]).name)
