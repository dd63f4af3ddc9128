"""The modern ML-Agents protocol (gRPC, communication API 1.5.0), each end against a scripted peer.

* Python end: ``UnityEnvironment(..., protocol="grpc")`` launches a scripted "Unity build" (a
  Python script named ``Fake.x86_64``) that plays a worked example (M1..R3 below) and records
  every reply; the replies are compared byte for byte with hand-encoded messages.
* Unity end: ``python -m academy <Scene> --mlagents-port N`` against a scripted gRPC server in
  the test, which checks what the academy sends (M1 byte for byte, then the structure).
* Bad input, other protocols, and that nothing listens beyond loopback.

The hand encoder below is deliberately separate from both ends' generated code.
"""
import json
import os
import queue
import stat
import struct
import subprocess
import sys
import time
import uuid
from concurrent import futures

import grpc
import numpy as np
import pytest

from tests.conftest import free_port
from tests.step_view import InfoView
from unityagents import UnityEnvironment
from unityagents.base_env import ActionTuple
from unityagents.exception import (
    UnityActionException,
    UnityObservationException,
    UnityProtocolException,
    UnityTimeOutException,
)

ROOT = __file__.rsplit("/tests/", 1)[0]
METHOD = "/communicator_objects.UnityToExternalProto/Exchange"

# ------------------------------ the worked example: messages of a C# package 3.0.0 build, verbatim
M1 = bytes.fromhex(
    "0a 03 08 c8 01 12 32 12 30 0a 10 41 63 61 64 65 6d 79 53 69 6e 67 6c 65 74 6f 6e 12 05 31 2e 35 2e 30 "
    "3a 05 33 2e 30 2e 30 42 0e 08 01 10 01 18 01 20 01 28 01 30 01 38 01")
R1_FACTS = bytes.fromhex(
    "0a 03 08 c8 01 1a 22 12 20 12 05 31 2e 35 2e 30 1a 05 31 2e 31 2e 30 22 0e 08 01 10 01 18 01 20 01 28 01 "
    "30 01 38 01 28 01")
M2 = bytes.fromhex("0a 03 08 c8 01")
ENGINE_TIME_SCALE_20 = bytes.fromhex(
    "2c 34 51 e9 7e 4f ea 11 b2 38 78 4f 43 87 d1 f7 08 00 00 00 02 00 00 00 00 00 a0 41")
EMPTY_STEP = bytes.fromhex("0a 03 08 c8 01 1a 02 0a 00")
CLOSE = bytes.fromhex("0a 03 08 90 03")
PARAMETERS_UUID = uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")
STATS_UUID = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")


# ---------------------------------------------------------------------------- a tiny encoder
def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def packed_floats(number: int, values) -> bytes:
    return field(number, struct.pack(f"<{len(values)}f", *values))


def message(unity_input: bytes) -> bytes:
    return field(1, varint(1 << 3) + varint(200)) + field(3, unity_input)


def reset_input(side_channel: bytes) -> bytes:
    return message(field(1, varint(4 << 3) + varint(1) + field(5, side_channel)))


def frame(channel: uuid.UUID, payload: bytes) -> bytes:
    return channel.bytes_le + struct.pack("<i", len(payload)) + payload


# ---------------------------------------------------------------------------- the scripted Unity
FAKE_UNITY = r'''#!{python}
"""A scripted modern Unity build: plays $FAKE_SCENARIO, writes each reply (hex) to $FAKE_TRANSCRIPT."""
import json, os, struct, sys, time, uuid
import grpc
from unityagents.wire.protos import communicator_objects_pb2 as pb

flag = "--mlagents-port" if "--mlagents-port" in sys.argv else "--port"  # --port: launched as an API-2 build
port = int(sys.argv[sys.argv.index(flag) + 1])
with open(os.environ["FAKE_TRANSCRIPT"] + ".args", "w") as f:
    json.dump(sys.argv[1:], f)
scenario = os.environ["FAKE_SCENARIO"]
if scenario == "never-connects":
    time.sleep(60)
if scenario == "api2-build":  # a 2018 build: raw TCP, AcademyParameters JSON, then it fails on the reply
    import socket
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b'{{"AcademyName": "Ball3DAcademy", "apiNumber": "API-2"}}')
    sock.settimeout(5)
    try:
        sock.recv(100)
    except OSError:
        pass
    sys.exit(1)
channel = grpc.insecure_channel(f"127.0.0.1:{{port}}", options=[("grpc.enable_http_proxy", 0)])
raw = channel.unary_unary("/communicator_objects.UnityToExternalProto/Exchange")
replies = []

def call(data):
    reply = raw(data, timeout=30, wait_for_ready=True)
    replies.append(reply.hex())
    with open(os.environ["FAKE_TRANSCRIPT"], "w") as f:
        json.dump(replies, f)
    return reply

def obs(values, shape=None):
    return pb.ObservationProto(shape=shape or [len(values)], float_data=pb.ObservationProto.FloatData(data=values),
                               dimension_properties=[1], name="VectorSensor_size8")

def output(infos, params=False, side_channel=b""):
    m = pb.UnityMessageProto()
    m.header.status = 200
    lst = m.unity_output.rl_output.agentInfos["3DBall?team=0"].value
    for info in infos:
        lst.add().CopyFrom(info)
    if side_channel:
        m.unity_output.rl_output.side_channel = side_channel
    if params:
        bp = m.unity_output.rl_initialization_output.brain_parameters.add(brain_name="3DBall?team=0", is_training=True)
        bp.action_spec.num_continuous_actions = 2
    return m.SerializeToString()

A0 = [0.01, -0.02, 0.1, 4.0, -0.3, 0, 0, 0]
A1 = [-0.03, 0.02, 0.5, 4.0, 0.2, 0, 0, 0]
M1 = bytes.fromhex("{m1}")
if scenario == "version-2":
    M1 = M1.replace(b"1.5.0", b"2.0.0")
call(M1)
call(bytes.fromhex("0a 03 08 c8 01"))
if scenario == "version-2":
    sys.exit(0)
if scenario == "garbage":
    call(b"\x0a\xff\xff\xff\xff\x0f")
    sys.exit(0)  # the reply was the trainer's status 400: quit, as Unity does
first = [pb.AgentInfoProto(id=0, observations=[obs(A0)]), pb.AgentInfoProto(id=1, observations=[obs(A1)])]
if scenario == "wrong-size":
    call(output(first, params=True))
    call(output(first))
    call(output([first[0], pb.AgentInfoProto(id=1, observations=[obs(A1 + [0.0], shape=[8])])]))
    sys.exit(0)  # the reply was the trainer's status 400: quit, as Unity does
call(output(first, params=True))                       # M3: the reply to the handshake's reset
call(output(first))                                    # the reply to env.reset()
step = [pb.AgentInfoProto(id=i, reward=0.1, observations=[obs(A0)]) for i in (0, 1)]
call(output([pb.AgentInfoProto(id=1, reward=-1.0, done=True, observations=[obs(A1)])]))  # agent 1 falls
call(output(step))                                     # both decide again
stats = bytes.fromhex("{stats}")
ending = [pb.AgentInfoProto(id=0, reward=0.1, done=True, max_step_reached=True, observations=[obs(A1)]),
          pb.AgentInfoProto(id=0, observations=[obs(A0)]), pb.AgentInfoProto(id=1, reward=0.1, observations=[obs(A0)])]
call(output(ending, side_channel=stats))               # agent 0 interrupted, and already deciding again
'''


def stats_frame(key: str, value: float, method: int) -> bytes:
    return frame(STATS_UUID, struct.pack("<i", len(key)) + key.encode() + struct.pack("<fi", value, method))


@pytest.fixture
def fake_build(tmp_path, monkeypatch):
    """Returns ``make(scenario) -> transcript path``; the build is ``tmp_path/Fake.x86_64``."""
    script = tmp_path / "Fake.x86_64"
    stats = stats_frame("Ball/Height", 1.5, 0) + stats_frame("Ball/Height", 2.5, 0) + stats_frame("Hits", 3.0, 2)
    script.write_text(FAKE_UNITY.format(python=sys.executable, m1=M1.hex(), stats=stats.hex()))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", ROOT)

    def make(scenario: str):
        transcript = tmp_path / f"{scenario}.json"
        monkeypatch.setenv("FAKE_SCENARIO", scenario)
        monkeypatch.setenv("FAKE_TRANSCRIPT", str(transcript))
        return transcript

    return make


def replies(transcript):
    return [bytes.fromhex(h) for h in json.loads(transcript.read_text())]


def test_python_end_speaks_the_worked_example(fake_build, tmp_path):
    transcript = fake_build("worked")
    env = InfoView(UnityEnvironment("Fake", base_port=free_port(), protocol="grpc", log_dir=str(tmp_path / "logs"),
                                    no_graphics=True))
    try:
        # Launch arguments, as a Unity player gets them: graphics flags, the port, the log file.
        args = json.loads((tmp_path / "worked.json.args").read_text())
        assert args == ["-nographics", "-batchmode", "--mlagents-port", str(env.port), "-logFile",
                        str(tmp_path / "logs" / "Player-0.log")]
        assert env.logfile_path == str(tmp_path / "logs" / "Player-0.log")
        assert env.brain_names == ["3DBall?team=0"] and env.external_brain_names == ["3DBall?team=0"]
        params = env.brains["3DBall?team=0"]
        assert (params.state_space_size, params.action_space_type, params.action_space_size) == (8, "continuous", 2)
        assert params.number_observations == 0 and params.action_branches == []

        info = env.reset(config={"gravity": 9.81})["3DBall?team=0"]
        assert info.agents == [0, 1] and info.local_done == [False, False]
        np.testing.assert_allclose(info.states[1], [-0.03, 0.02, 0.5, 4.0, 0.2, 0, 0, 0], rtol=1e-6)

        info = env.step([[0.5, -0.25], [-1.0, 1.0]])["3DBall?team=0"]
        # Agent 1 reports the end of its episode, without asking for a decision.
        assert info.agents == [1] and info.local_done == [True] and info.rewards == [-1.0]
        assert info.decision_requested == [False] and info.max_reached == [False]
        np.testing.assert_allclose(info.terminal_info.states[0][:3], [-0.03, 0.02, 0.5], rtol=1e-6)

        info = env.step()["3DBall?team=0"]   # no decision asked: no actions needed, none sent
        assert info.agents == [0, 1] and info.rewards == pytest.approx([0.1, 0.1])
        assert info.previous_actions.tolist() == [[0.5, -0.25], [-1.0, 1.0]]

        info = env.step(np.array([[0.1, 0.2], [0.3, 0.4]]))["3DBall?team=0"]
        # Agent 0 was interrupted (max step) and asked for its next decision in the same message.
        assert info.agents == [0, 1] and info.local_done == [True, False] and info.max_reached == [True, False]
        assert info.decision_requested == [True, True]
        assert info.rewards == pytest.approx([0.1, 0.1])
        np.testing.assert_allclose(info.states[0][:3], [0.01, -0.02, 0.1], rtol=1e-6)   # the next episode's
        np.testing.assert_allclose(info.terminal_info.states[0][:3], [-0.03, 0.02, 0.5], rtol=1e-6)  # the last
        assert env.stats == {"Ball/Height": [(1.5, "average"), (2.5, "average")], "Hits": [(3.0, "sum")]}
    finally:
        env.close()
    assert env._peer.process.poll() is not None
    got = replies(transcript)
    r1 = message(field(2, field(2, b"1.5.0") + field(3, b"0.3.0")
                       + field(4, bytes.fromhex("08 01 10 01 18 01 20 01 30 01 38 01")) + varint(5 << 3) + varint(1)))
    assert r1[:5] == R1_FACTS[:5] and len(got) == 7
    assert got[0] == r1  # our capabilities: all but trainingAnalytics (we send no analytics)
    assert got[1] == reset_input(ENGINE_TIME_SCALE_20)
    gravity = struct.pack("<i", 7) + b"gravity" + bytes.fromhex("00 00 00 00 c3 f5 1c 41")
    assert got[2] == reset_input(frame(PARAMETERS_UUID, gravity))

    def action(row):
        return field(1, packed_floats(1, row) + packed_floats(6, row))

    r3 = message(field(1, field(1, field(1, b"3DBall?team=0") + field(2, action([0.5, -0.25]) + action([-1.0, 1.0])))))
    assert len(r3) == 72 and got[3] == r3   # the worked example's R3 is 72 bytes
    assert got[4] == EMPTY_STEP
    r5 = message(field(1, field(1, field(1, b"3DBall?team=0") + field(2, action([0.1, 0.2]) + action([0.3, 0.4])))))
    assert got[5] == r5
    assert got[6] == CLOSE


def test_a_version_other_than_1x_is_refused_with_status_400(fake_build, tmp_path):
    transcript = fake_build("version-2")
    with pytest.raises(UnityProtocolException) as e:
        UnityEnvironment("Fake", base_port=free_port(), protocol="grpc", log_dir=str(tmp_path))
    assert "'2.0.0'" in str(e.value) and "1.x" in str(e.value) and "1.5.0" in str(e.value)
    assert str(tmp_path / "Player-0.log") in str(e.value)
    assert replies(transcript)[-1] == CLOSE


def test_a_build_that_never_connects_times_out_naming_its_log(fake_build, tmp_path):
    fake_build("never-connects")
    start = time.monotonic()
    with pytest.raises(UnityTimeOutException) as e:
        UnityEnvironment("Fake", base_port=free_port(), protocol="grpc", log_dir=str(tmp_path), start_timeout=2)
    assert "--mlagents-port" in str(e.value) and str(tmp_path / "Player-0.log") in str(e.value)
    assert "--protocol api2" in str(e.value)
    assert time.monotonic() - start < 30


def test_a_malformed_message_is_a_protocol_error(fake_build, tmp_path):
    fake_build("garbage")
    with pytest.raises(UnityProtocolException) as e:
        UnityEnvironment("Fake", base_port=free_port(), protocol="grpc", log_dir=str(tmp_path))
    assert "malformed or truncated" in str(e.value)


def test_an_observation_of_the_wrong_size_and_actions_of_the_wrong_size(fake_build, tmp_path):
    fake_build("wrong-size")
    env = UnityEnvironment("Fake", base_port=free_port(), protocol="grpc", log_dir=str(tmp_path))
    try:
        env.reset()
        with pytest.raises(UnityActionException) as e:
            env.step_behaviors(ActionTuple([[0.5, 0.5, 0.5]]))
        assert "shape (1, 3)" in str(e.value) and "expects (2, 2)" in str(e.value)
        with pytest.raises(UnityObservationException) as e:
            env.step_behaviors(ActionTuple([[0.5, 0.5], [0.1, 0.1]]))
        assert "has 9 values; expected 8" in str(e.value)
    finally:
        env.close()
    assert env._peer.process.poll() is not None, "the process must be reaped"


@pytest.mark.slow
def test_an_api2_listener_names_a_modern_build(fake_build, tmp_path):
    fake_build("worked")
    with pytest.raises(UnityProtocolException) as e:
        UnityEnvironment("Fake", base_port=free_port(), protocol="api2", start_timeout=20)
    assert "this looks like a modern ML-Agents build; use --protocol grpc" in str(e.value)


def test_a_grpc_listener_names_an_api2_build(fake_build, tmp_path):
    fake_build("api2-build")
    with pytest.raises(UnityProtocolException) as e:
        UnityEnvironment("Fake", base_port=free_port(), protocol="grpc", log_dir=str(tmp_path), start_timeout=30)
    assert "this looks like an API-2 build; use --protocol api2" in str(e.value)
    assert "exited with code 1" in str(e.value)


def test_png_observations_decode_with_their_channel_rules():
    import io

    from PIL import Image

    from unityagents.wire.validate import decode_png_observation

    def png(array):
        out = io.BytesIO()
        Image.fromarray(array.astype(np.uint8)).save(out, format="PNG")
        return out.getvalue()

    rgb = np.arange(2 * 3 * 3).reshape(2, 3, 3) * 10
    np.testing.assert_allclose(decode_png_observation(png(rgb), (2, 3, 3), []), rgb / 255.0, atol=1e-6)
    grey = decode_png_observation(png(rgb), (2, 3, 1), [])
    np.testing.assert_allclose(grey[:, :, 0], rgb.mean(axis=2) / 255.0, atol=1e-6)
    # Two PNGs back to back, grayscale stacked twice: mapping [0,0,0,1,1,1].
    two = decode_png_observation(png(rgb) + png(255 - rgb), (2, 3, 2), [0, 0, 0, 1, 1, 1])
    np.testing.assert_allclose(two[:, :, 1], (255 - rgb).mean(axis=2) / 255.0, atol=1e-6)
    with pytest.raises(ValueError, match="PNG signature"):
        decode_png_observation(b"not a png", (2, 3, 3), [])
    with pytest.raises(ValueError, match="expected 4x4"):
        decode_png_observation(png(rgb), (4, 4, 3), [])


# ---------------------------------------------------------------------------- the scripted trainer
class ScriptedTrainer:
    """A gRPC server on 127.0.0.1 that hands each call to the test, which answers it."""

    def __init__(self):
        self.calls = queue.Queue()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        handler = grpc.method_handlers_generic_handler("communicator_objects.UnityToExternalProto", {
            "Exchange": grpc.unary_unary_rpc_method_handler(self._exchange)})
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.pending = None

    def _exchange(self, request, context):
        answer = queue.Queue()
        self.calls.put((request, answer))
        return answer.get(timeout=60)

    def next(self, timeout=30) -> bytes:
        request, self.pending = self.calls.get(timeout=timeout)
        return request

    def answer(self, data: bytes) -> None:
        self.pending.put(data)

    def close(self):
        self.server.stop(None)


def launch_academy(port, scene, *args, log=None):
    cmd = [sys.executable, "-m", "academy", scene, "--mlagents-port", str(port), "-batchmode", "-nographics", *args]
    if log:
        cmd += ["-logFile", str(log)]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def parse(data):
    from unityagents.wire.protos import communicator_objects_pb2 as pb  # only to read what the academy sent

    return pb.UnityMessageProto.FromString(data)


def actions(name, rows, discrete=False):
    body = b""
    for row in rows:
        if discrete:
            body += field(1, packed_floats(1, row) + field(7, b"".join(varint(int(v)) for v in row)))
        else:
            body += field(1, packed_floats(1, row) + packed_floats(6, row))
    return message(field(1, field(1, field(1, name.encode()) + field(2, body))))


@pytest.fixture
def trainer():
    t = ScriptedTrainer()
    yield t
    t.close()


def handshake(trainer, side_channel=ENGINE_TIME_SCALE_20):
    assert trainer.next() == M1, "call #1 must be the worked example's M1 byte for byte (package 3.0.0)"
    trainer.answer(R1_FACTS)
    assert trainer.next() == M2
    trainer.answer(reset_input(side_channel))
    return parse(trainer.next())


def test_academy_end_3dball_init_reset_step_done_close(trainer, tmp_path):
    log = tmp_path / "player.log"
    proc = launch_academy(trainer.port, "3DBall", log=log)
    try:
        m3 = handshake(trainer)
        assert m3.header.status == 200
        infos = m3.unity_output.rl_output.agentInfos
        assert list(infos) == ["3DBall?team=0"]
        agents = infos["3DBall?team=0"].value
        assert [a.id for a in agents] == list(range(12)) and not any(a.done for a in agents)
        o = agents[0].observations[0]
        assert (list(o.shape), list(o.dimension_properties), o.name, len(o.float_data.data)) == (
            [8], [1], "VectorSensor_size8", 8)
        (params,) = m3.unity_output.rl_initialization_output.brain_parameters
        assert (params.brain_name, params.is_training, params.action_spec.num_continuous_actions,
                params.action_spec.num_discrete_actions) == ("3DBall?team=0", True, 2, 0)

        trainer.answer(actions("3DBall?team=0", [[0.0, 0.0]] * 12))
        m4 = parse(trainer.next())
        agents = m4.unity_output.rl_output.agentInfos["3DBall?team=0"].value
        assert len(agents) == 12 and [a.reward for a in agents] == pytest.approx([0.1] * 12)
        assert not m4.unity_output.HasField("rl_initialization_output"), "parameters are sent once"

        for _ in range(200):  # tilt hard until a ball falls
            trainer.answer(actions("3DBall?team=0", [[1.0, 1.0]] * 12))
            agents = parse(trainer.next()).unity_output.rl_output.agentInfos["3DBall?team=0"].value
            done = [a for a in agents if a.done]
            if done:
                break
        assert done, "no ball fell in 200 steps of full tilt"
        assert all(a.reward == pytest.approx(-1.0) and not a.max_step_reached for a in done)
        deciding = [a.id for a in agents if not a.done]
        assert len(deciding) == 12 and {a.id for a in done} <= set(deciding), \
            "with decision period 1 a done agent decides again in the same message"
        assert all(len(a.observations) == 1 for a in done)
        trainer.answer(CLOSE)
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
        proc.wait()
    text = log.read_text()
    assert "time scale (20.0,) accepted" in text


def test_academy_end_basic_one_hot_masks_and_an_interrupted_episode(trainer):
    proc = launch_academy(trainer.port, "Basic")
    try:
        m3 = handshake(trainer)
        (agent,) = m3.unity_output.rl_output.agentInfos["Basic?team=0"].value
        assert list(agent.observations[0].shape) == [20]
        assert list(agent.observations[0].float_data.data) == [1.0 if i == 10 else 0.0 for i in range(20)]
        (params,) = m3.unity_output.rl_initialization_output.brain_parameters
        assert list(params.action_spec.discrete_branch_sizes) == [2] and params.action_spec.num_discrete_actions == 1
        ending = None
        for t in range(150):  # left, right, left, ...: never reaches a goal
            trainer.answer(actions("Basic?team=0", [[t % 2]], discrete=True))
            agents = parse(trainer.next()).unity_output.rl_output.agentInfos["Basic?team=0"].value
            ending = [a for a in agents if a.done]
            if ending:
                break
        assert ending and ending[0].max_step_reached, "the max step must end the episode as an interruption"
        assert t == 100  # max_step 100: done after 101 decisions
        trainer.answer(CLOSE)
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
        proc.wait()


def agent_cell(observation, size=5):
    """The GridWorld agent's (x, z), read from its camera frame: the blue cell of the walled grid."""
    import io

    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(observation.compressed_data)).convert("RGB"))
    rows, cols = np.nonzero((pixels == (40, 80, 230)).all(axis=2))
    cell = 84 // (size + 2)
    row, col = int(rows.mean()) // cell, int(cols.mean()) // cell
    return col - 1, size - row  # column 1 is x = 0; row 1 is z = size - 1 (+z at the top)


def wall_mask(x, z, size=5):
    """Up (+z), down, left (-x), right: disabled where the move would leave the grid."""
    return [z == size - 1, z == 0, x == 0, x == size - 1]


@pytest.mark.parametrize("package,shape,dims", [("3.0.0", [3, 84, 84], [1, 2, 2]), ("2.3.0", [84, 84, 3], [2, 2, 1])])
def test_academy_end_gridworld_camera_layout_and_wall_masks(trainer, package, shape, dims):
    proc = launch_academy(trainer.port, "GridWorld", "--package-version", package)
    try:
        assert b"\x3a\x05" + package.encode() in trainer.next()  # package_version (field 7) as given
        trainer.answer(R1_FACTS)
        assert trainer.next() == M2
        trainer.answer(reset_input(b""))
        (agent,) = parse(trainer.next()).unity_output.rl_output.agentInfos["GridWorld?team=0"].value
        goal, o = agent.observations  # sorted by name: the goal signal, then the camera
        assert (goal.name, list(goal.shape), goal.observation_type, list(goal.float_data.data)) == (
            "GoalSensor", [2], 1, [1.0, 0.0])
        assert (o.name, list(o.shape), list(o.dimension_properties), o.compression_type) == (
            "RenderTextureSensor", shape, dims, 1)
        assert o.compressed_data[:8] == b"\x89PNG\r\n\x1a\n"
        # The trainer's seed (0, in R1) puts the agent at (3, 4) on the top wall, the goal at (0, 4)
        # and the pit at (2, 0). Right into the corner, then down the right-hand wall to the other one.
        cells, masks = [agent_cell(o)], [list(agent.action_mask)]
        for move in (3, 1, 1, 1, 1):
            trainer.answer(actions("GridWorld?team=0", [[move]], discrete=True))
            (agent,) = parse(trainer.next()).unity_output.rl_output.agentInfos["GridWorld?team=0"].value
            assert not agent.done
            cells.append(agent_cell(agent.observations[1]))
            masks.append(list(agent.action_mask))
        assert cells == [(3, 4), (4, 4), (4, 3), (4, 2), (4, 1), (4, 0)]
        assert masks == [wall_mask(*c) for c in cells]
        F, T = False, True  # mask rows: up, down, left, right
        assert masks[0] == [T, F, F, F] and masks[1] == [T, F, F, T] and masks[-1] == [F, T, F, T]
        # Right once more, against the mask: the scene stays put, and counts and logs the masked action.
        trainer.answer(actions("GridWorld?team=0", [[3]], discrete=True))
        (agent,) = parse(trainer.next()).unity_output.rl_output.agentInfos["GridWorld?team=0"].value
        assert agent_cell(agent.observations[1]) == (4, 0) and list(agent.action_mask) == [F, T, F, T]
        trainer.answer(CLOSE)
        assert proc.wait(timeout=20) == 0
        out = proc.stdout.read().decode()
    finally:
        proc.kill()
        proc.wait()
    assert "the first wall mask went out (agent 0 at cell (3, 4): Up disabled)" in out, out
    assert out.count("took the masked action") == 1, out  # none of the moves along the walls was masked
    assert "agent 0 at cell (4, 0) took the masked action 3 (Right); 1 masked action(s) so far" in out, out


def test_academy_end_refuses_actions_of_the_wrong_size(trainer):
    proc = launch_academy(trainer.port, "3DBall")
    try:
        handshake(trainer)
        trainer.answer(actions("3DBall?team=0", [[0.0, 0.0, 0.0]] * 12))
        goodbye = parse(trainer.next())
        assert goodbye.header.status == 400, "an academy that gives up says so with a status-400 call"
        trainer.answer(CLOSE)
        assert proc.wait(timeout=20) == 3
        out = proc.stdout.read().decode()
        assert "expected 2 finite floats per agent" in out
    finally:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------------------- loopback only
def listening_ports(path):
    """Local (address hex, port) of the LISTEN sockets in /proc/net/tcp or tcp6."""
    out = []
    with open(path) as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            address, port = parts[1].split(":")
            if parts[3] == "0A":
                out.append((address, int(port, 16)))
    return out


def test_nothing_listens_beyond_loopback():
    env = UnityEnvironment("3DBall", base_port=free_port(), protocol="grpc", seed=0)
    try:
        v4 = [a for a, p in listening_ports("/proc/net/tcp") if p == env.port]
        v6 = ([a for a, p in listening_ports("/proc/net/tcp6") if p == env.port]
              if os.path.exists("/proc/net/tcp6") else [])
        # gRPC may listen on an IPv6 socket bound to the v4-mapped ::ffff:127.0.0.1: still loopback.
        loopback = {"0100007F", "0000000000000000FFFF00000100007F"}
        assert len(v4 + v6) == 1 and set(v4 + v6) <= loopback, (v4, v6)  # 0.0.0.0 or [::] would fail
    finally:
        env.close()


def test_the_first_spellings_of_the_behavior_names_still_import():
    from unityagents.wire import grpc_messages

    assert grpc_messages.Behaviour is grpc_messages.Behavior
    assert grpc_messages.new_behaviour is grpc_messages.new_behavior
