"""The gRPC end survives whatever a modern build sends, and says exactly why it stopped.

A scripted modern Unity (a gRPC client in a thread, built here from the protocol facts with the
messages of unityagents.wire.protos) plays the handshake, the reset and two steps of a scene with two
behaviours: "Ball?team=0" (two agents, 8 floats, 2 continuous actions; one agent ends its
episode and asks again in the same step) and "Grid?team=0" (one agent, 4 floats and an 8x8 RGB
camera as PNG, discrete branches [3, 2] with a mask, a stats side channel). One message per
session is mutated, one class of mutation per session, at a seeded place.

Every class has its expected outcome: a size lie, a NaN, a mask of the wrong length, a spec
changed mid-run... must raise the named ``UnityMessageException`` subclass with the field it
names; byte-level damage must end in a ``UnityException``; only the classes that are valid on
the wire (a NaN stat is dropped) may succeed, and what they return must be finite. A crash (any
other exception) or a session longer than its deadline fails the test.
"""
from __future__ import annotations

import io
import random
import struct
import threading
import time
import traceback
import uuid
from collections import Counter
from typing import Callable, Dict, List, Optional, Tuple

import grpc
import numpy as np
import pytest
from PIL import Image

import unityagents.environment
from tests.conftest import free_port
from tests.step_view import InfoView
from unityagents import UnityEnvironment, UnityException
from unityagents.exception import (
    UnityCommunicationException,
    UnityEnvironmentException,
    UnityMessageException,
    UnityObservationException,
    UnityProtocolException,
    UnityTimeOutException,
)
from unityagents.vector.environment_set import EnvironmentSet
from unityagents.vector.restart import RestartPolicy
from unityagents.wire.protos import communicator_objects_pb2 as pb

METHOD = "/communicator_objects.UnityToExternalProto/Exchange"
STATS = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")
TIMEOUT_WAIT = 0.5
SESSION_DEADLINE = 4.0
SESSIONS_PER_CLASS = 6
BALL, GRID = "Ball?team=0", "Grid?team=0"


def png(width: int, height: int, seed: int = 0) -> bytes:
    pixels = (np.arange(width * height * 3).reshape(height, width, 3) * (7 + seed)) % 256
    out = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8), "RGB").save(out, format="PNG")
    return out.getvalue()


PNG8 = png(8, 8)


def stat(key: str, value: float, method: int = 0) -> bytes:
    payload = struct.pack("<i", len(key)) + key.encode() + struct.pack("<fi", value, method)
    return STATS.bytes_le + struct.pack("<i", len(payload)) + payload


def vector(values: List[float]) -> "pb.ObservationProto":
    return pb.ObservationProto(shape=[len(values)], float_data=pb.ObservationProto.FloatData(data=values),
                               dimension_properties=[1])


def camera() -> "pb.ObservationProto":
    return pb.ObservationProto(shape=[3, 8, 8], compression_type=pb.PNG, compressed_data=PNG8,
                               dimension_properties=[1, 2, 2])


def output(k: int) -> "pb.UnityMessageProto":
    """The valid k-th answer: 0 the handshake's reset (with the announcements), 1 reset, 2-3 steps."""
    m = pb.UnityMessageProto()
    m.header.status = 200
    rl = m.unity_output.rl_output
    ball = rl.agentInfos[BALL].value
    for agent in (0, 1):
        if k == 3 and agent == 1:  # ends its episode and asks for its next decision in the same step
            ball.add(id=1, reward=-1.0, done=True, observations=[vector([0.5 * k] * 8)])
        ball.add(id=agent, reward=0.1 * k, observations=[vector([0.1 * agent + k] * 8)])
    grid = rl.agentInfos[GRID].value
    grid.add(id=7, reward=0.5, action_mask=[False, True, False, False, True],
             observations=[vector([1.0, 2.0, 3.0, float(k)]), camera()])
    rl.side_channel = stat("Grid/Goals", 1.0) + stat("Ball/Height", 2.5, 2)
    if k == 0:
        init = m.unity_output.rl_initialization_output
        init.brain_parameters.add(brain_name=BALL, is_training=True).action_spec.num_continuous_actions = 2
        grid_spec = init.brain_parameters.add(brain_name=GRID, is_training=True).action_spec
        grid_spec.num_discrete_actions = 2
        grid_spec.discrete_branch_sizes.extend([3, 2])
    return m


def init_messages() -> Tuple[bytes, bytes]:
    m1 = pb.UnityMessageProto()
    m1.header.status = 200
    init = m1.unity_output.rl_initialization_output
    init.name, init.communication_version, init.package_version = "FuzzAcademy", "1.5.0", "3.0.0"
    init.capabilities.baseRLCapabilities = True
    m2 = pb.UnityMessageProto()
    m2.header.status = 200
    return m1.SerializeToString(), m2.SerializeToString()


# ---------------------------------------------------------------------------- mutations
Mutation = Callable[[random.Random, "pb.UnityMessageProto"], object]  # returns bytes, "hang" or None (in place)


def _info(rng: random.Random, m, behavior: Optional[str] = None):
    name = behavior or rng.choice([BALL, GRID])
    infos = m.unity_output.rl_output.agentInfos[name].value
    return infos[rng.randrange(len(infos))]


def _vector_obs(rng, m):
    return _info(rng, m, BALL).observations[0] if rng.random() < 0.5 else _info(rng, m, GRID).observations[0]


def nan_reward(rng, m):
    _info(rng, m).reward = rng.choice([float("nan"), float("inf"), -float("inf")])


def nan_group_reward(rng, m):
    _info(rng, m).group_reward = rng.choice([float("nan"), float("inf")])


def nan_observation(rng, m):
    data = _vector_obs(rng, m).float_data.data
    data[rng.randrange(len(data))] = rng.choice([float("nan"), float("inf"), -float("inf")])


def size_lie(rng, m):
    data = _vector_obs(rng, m).float_data.data
    if rng.random() < 0.5:
        data.append(0.0)
    else:
        del data[rng.randrange(len(data))]


def shape_lie(rng, m):
    obs = _vector_obs(rng, m)
    obs.shape[0] += rng.choice([1, -1, 1000])


def camera_shape_lie(rng, m):
    obs = _info(rng, m, GRID).observations[1]
    obs.shape[rng.randrange(3)] += 1


def png_size_lie(rng, m):
    data = bytearray(PNG8)
    struct.pack_into(">II", data, 16, rng.choice([60000, 9, 8]), rng.choice([60000, 7]))
    _info(rng, m, GRID).observations[1].compressed_data = bytes(data)


def png_garbage(rng, m):
    data = bytearray(PNG8)
    for _ in range(8):
        data[rng.randrange(33, len(data))] ^= 0xFF  # past the header: the size is right, the data is not
    _info(rng, m, GRID).observations[1].compressed_data = bytes(data)


def compression_type(rng, m):
    _info(rng, m, GRID).observations[1].compression_type = rng.choice([2, 7, 100])


def sensor_dropped(rng, m):
    del _info(rng, m, GRID).observations[rng.randrange(2)]


def mask_length(rng, m):
    mask = _info(rng, m, GRID).action_mask
    if rng.random() < 0.5:
        mask.append(False)  # one entry too long
    else:
        del mask[rng.randrange(len(mask))]


def mask_on_continuous(rng, m):
    _info(rng, m, BALL).action_mask.extend([False, True])


def duplicate_id(rng, m):
    ball = m.unity_output.rl_output.agentInfos[BALL].value
    deciding = [i for i in ball if not i.done]
    deciding[1].id = deciding[0].id


def spec_change(rng, m):
    bp = m.unity_output.rl_initialization_output.brain_parameters.add(brain_name=BALL, is_training=True)
    if rng.random() < 0.5:
        bp.action_spec.num_continuous_actions = rng.choice([5, 1, 3])
    else:
        bp.action_spec.num_discrete_actions = 1
        bp.action_spec.discrete_branch_sizes.append(4)


def spec_reannounced_same(rng, m):  # valid: the same spec again is allowed
    m.unity_output.rl_initialization_output.brain_parameters.add(
        brain_name=BALL, is_training=True).action_spec.num_continuous_actions = 2


def bad_announcement(rng, m):  # only on message 0
    bp = m.unity_output.rl_initialization_output.brain_parameters[rng.randrange(2)]
    choice = rng.randrange(4)
    if choice == 0:
        bp.action_spec.num_continuous_actions = -3
    elif choice == 1:
        bp.action_spec.num_continuous_actions = 1 << 30
    elif choice == 2:
        bp.action_spec.num_discrete_actions = 3  # says 3 branches, lists 2 (or none for Ball)
    else:
        _info(rng, m, BALL).observations[0].shape[0] = -8


def unknown_behavior(rng, m):
    m.unity_output.rl_output.agentInfos["Ghost?team=0"].value.add(id=3, observations=[vector([0.0] * 8)])


def empty_output(rng, m):
    m.ClearField("unity_output")


def status(rng, m):
    m.header.status = rng.choice([500, 0, 201, -1])


def status_400(rng, m):
    m.header.status = 400


def side_channel_lie(rng, m):
    data = bytearray(m.unity_output.rl_output.side_channel)
    choice = rng.randrange(3)
    if choice == 0:
        struct.pack_into("<i", data, 16, rng.choice([1 << 30, -5, len(data)]))  # the first frame's length
    elif choice == 1:
        del data[rng.randrange(len(data) - 19, len(data))]  # cut inside the last frame
    else:
        data += b"\x01\x02\x03"  # a header shorter than 20 bytes
    m.unity_output.rl_output.side_channel = bytes(data)


def stat_lie(rng, m):
    key = b"Grid/Goals"
    payload = bytearray(struct.pack("<i", len(key)) + key + struct.pack("<fi", 1.0, 0))
    choice = rng.randrange(3)
    if choice == 0:
        struct.pack_into("<i", payload, 0, rng.choice([1000, -4]))
    elif choice == 1:
        payload = payload[:-3]
    else:
        struct.pack_into("<i", payload, len(payload) - 4, 9)  # aggregation 9
    m.unity_output.rl_output.side_channel = STATS.bytes_le + struct.pack("<i", len(payload)) + bytes(payload)


def stat_nan(rng, m):  # valid on the wire; dropped
    m.unity_output.rl_output.side_channel = stat("Grid/Goals", rng.choice([float("nan"), float("inf")]))


def truncated(rng, m):
    data = m.SerializeToString()
    return data[: rng.randrange(3, len(data) - 1)]


def garbage(rng, m):
    return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))


def bit_flips(rng, m):
    data = bytearray(m.SerializeToString())
    for _ in range(rng.randrange(1, 6)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


def hang(rng, m):
    return "hang"


def unmutated(rng, m):
    return None


# class -> (mutation, where it may apply (message indices), expected outcome, field substring)
# expected: an exception class that must be raised; "ok" (must succeed); "any" (ok or a UnityException).
CLASSES: Dict[str, Tuple[Mutation, Tuple[int, ...], object, Optional[str]]] = {
    "unmutated": (unmutated, (0,), "ok", None),
    "nan reward": (nan_reward, (0, 1, 2, 3), UnityMessageException, "reward"),
    "nan group reward": (nan_group_reward, (0, 1, 2, 3), UnityMessageException, "group_reward"),
    "nan observation": (nan_observation, (0, 1, 2, 3), UnityMessageException, "observations"),
    "size lie": (size_lie, (1, 2, 3), UnityObservationException, "observations[0]"),
    "shape lie": (shape_lie, (1, 2, 3), UnityObservationException, "observations[0].shape"),
    "camera shape lie": (camera_shape_lie, (1, 2, 3), UnityObservationException, "observations[1].shape"),
    "png size lie": (png_size_lie, (0, 1, 2, 3), UnityObservationException, "compressed_data"),
    "png garbage": (png_garbage, (0, 1, 2, 3), UnityObservationException, "compressed_data"),
    "compression type": (compression_type, (0, 1, 2, 3), UnityObservationException, "compression_type"),
    "sensor dropped": (sensor_dropped, (1, 2, 3), UnityObservationException, "observations"),
    "mask length": (mask_length, (0, 1, 2, 3), UnityMessageException, "action_mask"),
    "mask on continuous": (mask_on_continuous, (0, 1, 2, 3), UnityMessageException, "action_mask"),
    "duplicate id": (duplicate_id, (0, 1, 2, 3), UnityMessageException, "id"),
    "spec change": (spec_change, (1, 2, 3), UnityMessageException, "action_spec"),
    "same spec again": (spec_reannounced_same, (1, 2, 3), "ok", None),
    "bad announcement": (bad_announcement, (0,), UnityMessageException, ""),
    "unknown behaviour": (unknown_behavior, (0, 1, 2, 3), UnityMessageException, "agentInfos"),
    "empty output": (empty_output, (0, 1, 2, 3), UnityMessageException, "unity_output"),
    "status": (status, (0, 1, 2, 3), UnityMessageException, "header.status"),
    "status 400": (status_400, (0, 1, 2, 3), UnityCommunicationException, None),
    "side channel lie": (side_channel_lie, (0, 1, 2, 3), UnityMessageException, "side_channel"),
    "stat lie": (stat_lie, (0, 1, 2, 3), UnityMessageException, "side_channel"),
    "nan stat": (stat_nan, (1, 2, 3), "ok", None),
    "truncated": (truncated, (0, 1, 2, 3), UnityProtocolException, None),
    "garbage": (garbage, (0, 1, 2, 3), UnityException, None),
    "bit flips": (bit_flips, (0, 1, 2, 3), "any", None),
    "hang": (hang, (0, 1, 2, 3), UnityTimeOutException, None),
}


# ---------------------------------------------------------------------------- the scripted build
class Peer:
    """Plays the messages over gRPC; ``mutate(k, message)`` may change message k or replace it."""

    def __init__(self, port: int, mutate: Callable[[int, "pb.UnityMessageProto"], object], n: int = 4):
        self.port, self.mutate, self.n = port, mutate, n
        self.error: Optional[BaseException] = None
        self.stop = threading.Event()

    def run(self) -> None:
        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}", options=[("grpc.enable_http_proxy", 0)])
        call = channel.unary_unary(METHOD)
        try:
            m1, m2 = init_messages()
            for data in (m1, m2):
                if not self._send(call, data, ready=True):
                    return
            for k in range(self.n):
                message = output(k)
                replaced = self.mutate(k, message)
                if replaced == "hang":
                    self.stop.wait(SESSION_DEADLINE + 1)
                    return
                data = replaced if isinstance(replaced, bytes) else message.SerializeToString()
                if not self._send(call, data):
                    return
        except Exception as e:  # the peer's own bug: fails the test
            self.error = e
        finally:
            channel.close()

    def _send(self, call, data: bytes, ready: bool = False) -> bool:
        """Whether the trainer answered with status 200 (anything else: it closed; quit as Unity does)."""
        try:
            reply = pb.UnityMessageProto.FromString(call(data, timeout=SESSION_DEADLINE, wait_for_ready=ready))
        except grpc.RpcError:
            return False
        return reply.header.status == 200


def start_thread(thread: threading.Thread):
    thread.start()
    return None, None


def check_info(env: UnityEnvironment, infos) -> Optional[str]:
    """What is wrong with data a session accepted (None when it is finite and well shaped)."""
    for name, whole in infos.items():
        for info in (whole, whole.terminal_info) if whole.terminal_info is not None else (whole,):
            bad = _check_arrays(name, info)
            if bad:
                return bad
    for key, entries in env.stats.items():
        if not all(np.isfinite(v) for v, _ in entries):
            return f"stat {key}: {entries}"
    return None


def _check_arrays(name: str, info) -> Optional[str]:
    n = len(info.agents)
    arrays = [np.asarray(info.states), np.asarray(info.rewards, np.float64),
              np.asarray(info.group_rewards, np.float64)] + [np.asarray(o) for o in info.observations]
    if info.action_masks is not None:
        arrays.append(np.asarray(info.action_masks))
    for a in arrays:
        if a.shape[:1] != (n,) or not np.all(np.isfinite(a)):
            return f"{name}: an array of shape {a.shape} for {n} agents, finite={np.all(np.isfinite(a))}"
    return None


def run_session(monkeypatch, mutate: Callable[[int, "pb.UnityMessageProto"], object]) -> Tuple[str, object, float]:
    """(outcome, the exception or detail, seconds): ``ok``, ``unity``, ``crash``, ``bad data`` or ``hang``."""
    port = free_port()  # a fresh port: a hung peer of an earlier session can never reach this one
    peer = Peer(port, mutate)
    thread = threading.Thread(target=peer.run, daemon=True)
    monkeypatch.setattr(unityagents.environment, "launch", lambda *a: start_thread(thread))
    t0 = time.monotonic()
    outcome, detail, env = "ok", None, None
    try:
        env = InfoView(UnityEnvironment("FuzzPeer", base_port=port, protocol="grpc", timeout_wait=TIMEOUT_WAIT,
                                        start_timeout=5))
        infos = env.reset()
        for _ in range(2):
            detail = check_info(env, infos)
            if detail:
                break
            infos = env.step({b: np.zeros(len(infos[b].agents) * env.brains[b].action_width)
                              for b in env.external_brain_names})
        detail = detail or check_info(env, infos)
        outcome = "bad data" if detail else "ok"
    except UnityException as e:
        outcome, detail = "unity", e
    except Exception as e:
        outcome, detail = "crash", "".join(traceback.format_exception(type(e), e, e.__traceback__))[-1500:]
    finally:
        if env is not None:
            env.close()
    seconds = time.monotonic() - t0
    peer.stop.set()
    thread.join(SESSION_DEADLINE + 2)
    if peer.error is not None:
        raise peer.error
    if seconds > SESSION_DEADLINE:
        outcome, detail = "hang", f"{seconds:.1f} s ({outcome}: {detail})"
    return outcome, detail, seconds


def judge(name: str, outcome: str, detail: object) -> Optional[str]:
    """Why a session's outcome is not its class's expected one (None when it is)."""
    _, _, expected, field = CLASSES[name]
    if outcome in ("crash", "hang", "bad data"):
        return f"{outcome}: {detail}"
    if expected == "any":
        return None
    if expected == "ok":
        return None if outcome == "ok" else f"expected success, got {type(detail).__name__}: {detail}"
    if outcome != "unity" or not isinstance(detail, expected):
        return f"expected {expected.__name__}, got {outcome}: {type(detail).__name__}: {detail}"
    if field is not None and issubclass(expected, UnityMessageException):
        if detail.field is None or field not in detail.field or not detail.expected or detail.received is None:
            return f"expected a UnityMessageException naming field {field!r}, got field {detail.field!r}: {detail}"
    return None


def mutation(name: str, seed: int) -> Callable[[int, "pb.UnityMessageProto"], object]:
    mutate, where, _, _ = CLASSES[name]
    rng = random.Random(f"{name}/{seed}")
    at = rng.choice(where)
    return lambda k, message: mutate(rng, message) if k == at else None


def test_an_unmutated_session_succeeds_with_both_behaviors(monkeypatch):
    seen = {}

    def keep(k, message):
        seen[k] = message

    outcome, detail, _ = run_session(monkeypatch, keep)
    assert outcome == "ok", detail
    assert sorted(seen) == [0, 1, 2, 3]


@pytest.mark.slow
def test_seeded_mutations_end_as_each_class_expects(monkeypatch):
    results: Dict[str, Counter] = {}
    failures = []
    t0 = time.monotonic()
    for name in CLASSES:
        for seed in range(SESSIONS_PER_CLASS):
            outcome, detail, _ = run_session(monkeypatch, mutation(name, seed))
            results.setdefault(name, Counter())[outcome] += 1
            why = judge(name, outcome, detail)
            if why:
                failures.append(f"{name} seed {seed}: {why}")
    totals = sum((c for c in results.values()), Counter())
    sessions = sum(totals.values())
    print(f"\ngrpc fuzz: {sessions} sessions in {time.monotonic() - t0:.1f} s over {len(CLASSES)} classes: "
          f"crashes {totals['crash']}, hangs {totals['hang']}, non-finite or ill-shaped accepted "
          f"{totals['bad data']}, named errors {totals['unity']}, ok {totals['ok']}; wrong outcomes "
          f"{len(failures)}")
    assert not failures, f"{len(failures)} of {sessions} sessions failed:\n" + "\n".join(failures[:30])


# ---------------------------------------------------------------------------- an environment that goes quiet
def start(peer: Peer):
    """In place of launching a build: the peer runs in a thread; no process to watch, no log."""
    threading.Thread(target=peer.run, daemon=True).start()
    return None, None


class QuietAfter(Peer):
    """Answers with done-free outputs that hold no agent at all from message ``quiet_from`` on."""

    def __init__(self, port: int, quiet_from: int):
        def mutate(k, message):
            if k >= quiet_from:
                for name in (BALL, GRID):
                    del message.unity_output.rl_output.agentInfos[name].value[:]
            return None

        super().__init__(port, mutate, n=10_000)


def test_an_environment_whose_agents_stop_asking_is_a_named_fault_through_the_restart_policy(monkeypatch):
    made: List[int] = []

    def launch(i):
        port = free_port()
        peer = QuietAfter(port, quiet_from=3)
        monkeypatch.setattr(unityagents.environment, "launch", lambda *a: start(peer))
        made.append(port)
        return UnityEnvironment("QuietPeer", base_port=port, protocol="grpc", timeout_wait=2, start_timeout=5)

    envs = InfoView(EnvironmentSet(launch, 1, restart_policy=RestartPolicy(max_lifetime_restarts=1, rate_limit_n=-1),
                                   no_decision_steps=20))
    try:
        info = envs.reset()
        with pytest.raises(UnityEnvironmentException) as e:
            for _ in range(200):
                if envs.needs_reset:
                    info, _ = envs.reset_finished()
                info = envs.step({b: np.zeros((len(info[b].agents), envs.brains[b].action_width))
                                  for b in envs.external_brain_names})
    finally:
        envs.close()
    text = str(e.value)
    assert "cannot be restarted" in text and "no agent asked for a decision in 20 consecutive environment steps" in text
    assert "is the scene running, are its agents enabled?" in text
    assert len(made) == 2  # the first launch and one restart, then the policy's limit


def test_a_restarted_environment_with_other_brains_is_refused(monkeypatch):
    """Reacher re-launched with 5 continuous actions: the trainers were built for 2."""
    sizes = iter([2, 5, 5])

    def launch(i):
        port, size = free_port(), next(sizes)

        def mutate(k, message):
            if k == 0:
                message.unity_output.rl_initialization_output.brain_parameters[0].action_spec \
                    .num_continuous_actions = size
            if k == 2 and size == 2:
                message.header.status = 500  # the first one fails after the reset
            return None

        peer = Peer(port, mutate)
        monkeypatch.setattr(unityagents.environment, "launch", lambda *a: start(peer))
        return UnityEnvironment("Reacher", base_port=port, protocol="grpc", timeout_wait=2, start_timeout=5)

    envs = InfoView(EnvironmentSet(launch, 1, restart_policy=RestartPolicy(max_lifetime_restarts=1, rate_limit_n=-1)))
    try:
        info = envs.reset()
        envs.step({b: np.zeros((len(info[b].agents), envs.brains[b].action_width)) for b in envs.external_brain_names})
        with pytest.raises(UnityEnvironmentException) as e:
            envs.reset_finished()
    finally:
        envs.close()
    assert "came back with other brains" in str(e.value) and "cannot be restarted" in str(e.value)
