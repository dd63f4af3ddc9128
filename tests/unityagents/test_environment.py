"""UnityEnvironment against a scripted Unity peer: exact bytes both ways, and every failure mode.

The peer (``tests/fake_unity.py``) is launched by ``UnityEnvironment`` exactly like a Unity build
(``Fake.x86_64 --port N`` in the working directory), so these tests also cover the binary lookup.
"""
import io
import json
import os
import shutil
import socket
import struct
import time

import numpy as np
import pytest
from PIL import Image

from tests.conftest import free_port
from tests.step_view import InfoView
from unityagents import (
    UnityActionException,
    UnityCommunicationException,
    UnityEnvironment,
    UnityEnvironmentException,
    UnityException,
    UnityTimeOutException,
)
from unityagents.base_env import ActionTuple

HERE = os.path.join(__file__.rsplit("/tests/", 1)[0], "tests")  # the shared helpers (fake_unity.py)


def framed(payload: bytes) -> bytes:
    return struct.pack("<I", len(payload)) + payload


def png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8), "RGB").save(out, format="PNG")
    return out.getvalue()



ACADEMY = {
    "AcademyName": "FakeAcademy",
    "apiNumber": "API-2",
    "logPath": "",
    "resetParameters": {"gravity": 9.81, "size": 2.0},
    "brainNames": ["Ext", "Teacher"],
    "externalBrainNames": ["Ext"],
    "brainParameters": [
        {"stateSize": 3, "actionSize": 2, "memorySize": 2,
         "cameraResolutions": [{"width": 4, "height": 3, "blackAndWhite": False}],
         "actionDescriptions": ["x", "z"], "actionSpaceType": 1, "stateSpaceType": 1},
        {"stateSize": 5, "actionSize": 3, "memorySize": 0, "cameraResolutions": [],
         "actionDescriptions": ["a", "b", "c"], "actionSpaceType": 0, "stateSpaceType": 0},
    ],
}

# Newtonsoft's indented style, as a Unity build sends it.
ACADEMY_BYTES = json.dumps(ACADEMY, indent=2).encode()

FRAME_A = np.arange(36).reshape(3, 4, 3) * 7
FRAME_B = 255 - FRAME_A


def ext_state(step: int, done=(False, False)) -> bytes:
    msg = {"brain_name": "Ext", "agents": [-12, 40],
           "states": [step + 0.5, 1, 2, step + 10.5, 11, 12],
           "rewards": [0.1 * step, -1.0], "actions": [0.5, -0.5, 1, 1] if step else [0, 0, 0, 0],
           "memories": [step, step, 0, 0], "dones": list(done)}
    return json.dumps(msg, separators=(",", ":")).encode()


def teacher_state(step: int) -> bytes:
    msg = {"brain_name": "Teacher", "agents": [7], "states": [3], "rewards": [0.0],
           "actions": [2], "memories": [], "dones": [False]}
    return json.dumps(msg).encode()


def unity_sends_states(step: int, done_flag: bytes, ext_done=(False, False)):
    """The ops of one Unity state block: each message followed by the client's RECEIVED."""
    return [
        {"send": framed(ext_state(step, ext_done)).decode("latin-1")}, {"recv": 8},
        {"send": framed(png(FRAME_A)).decode("latin-1")}, {"recv": 8},
        {"send": framed(png(FRAME_B)).decode("latin-1")}, {"recv": 8},
        {"send": framed(teacher_state(step)).decode("latin-1")}, {"recv": 8},
        {"send": done_flag.decode(), "chunks": 2},
    ]


def action_message(actions, memories=None, values=None) -> bytes:
    msg = {"action": {"Ext": actions}, "memory": {"Ext": memories or [0.0] * 4},
           "value": {"Ext": values or [0.0, 0.0]}}
    return framed(json.dumps(msg, separators=(",", ":")).encode())


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Write a script for the fake Unity build; return (launch, transcript) helpers."""
    shutil.copy(os.path.join(HERE, "fake_unity.py"), tmp_path / "Fake.x86_64")
    os.chmod(tmp_path / "Fake.x86_64", 0o755)
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "script.json"
    monkeypatch.setenv("FAKE_UNITY_SCRIPT", str(script))

    class Fake:
        port = free_port()

        def launch(self, ops, **kwargs):
            script.write_text(json.dumps(ops))
            kwargs.setdefault("base_port", self.port)
            kwargs.setdefault("timeout_wait", 5)
            kwargs.setdefault("start_timeout", 10)
            return InfoView(UnityEnvironment("Fake", **kwargs))

        def transcript(self, timeout=10.0) -> bytes:
            path = str(script) + ".transcript"
            deadline = time.time() + timeout
            while not os.path.exists(path) and time.time() < deadline:
                time.sleep(0.02)
            time.sleep(0.05)
            return open(path, "rb").read()

    return Fake()


def full_session_ops():
    config = json.dumps({"train_model": True, "parameters": {"gravity": 3.0}}).encode()
    return config, (
        [{"send": ACADEMY_BYTES.decode(), "chunks": 5},
         {"recv": 5}, {"send": "CONFIG_REQUEST", "chunks": 3}, {"recv": len(config)}]
        + unity_sends_states(0, b"False")
        + [{"recv": 4}, {"send": "STEPPING"}, {"recv": len(action_message([0.25, -1.0, 1.0, 0.5]))}]
        + unity_sends_states(1, b"False", ext_done=(True, False))
        + [{"recv": 4}, {"send": "STEPPING"}, {"recv": len(action_message([0.0] * 4, [1, 2, 3, 4], [5, 6]))}]
        + unity_sends_states(2, b"True")
    )


def test_reset_and_two_steps_exact_bytes(fake):
    config, ops = full_session_ops()
    env = fake.launch(ops)
    assert env.academy_name == "FakeAcademy"
    assert env.brain_names == ["Ext", "Teacher"]
    assert env.external_brain_names == ["Ext"]
    assert env.number_brains == 2 and env.number_external_brains == 1
    assert env.brains["Teacher"].state_space_type == "discrete"

    info = env.reset(train_mode=True, config={"gravity": 3})
    assert env.global_done is False
    ext = info["Ext"]
    assert ext.agents == [-12, 40]
    assert ext.states.shape == (2, 3) and ext.states.dtype == np.float32
    np.testing.assert_allclose(ext.states[1], [10.5, 11, 12])
    assert ext.observations[0].shape == (2, 3, 4, 3)
    np.testing.assert_allclose(ext.observations[0][0], FRAME_A / 255.0, atol=1e-6)
    np.testing.assert_allclose(ext.observations[0][1], FRAME_B / 255.0, atol=1e-6)
    assert ext.memories.shape == (2, 2)
    teacher = info["Teacher"]
    assert teacher.states.shape == (1, 1) and teacher.previous_actions.tolist() == [[2.0]]

    info = env.step(np.array([[0.25, -1.0], [1.0, 0.5]]))
    assert info["Ext"].local_done == [True, False]
    np.testing.assert_allclose(info["Ext"].rewards, [0.1, -1.0])
    np.testing.assert_allclose(info["Ext"].previous_actions, [[0.5, -0.5], [1, 1]])
    np.testing.assert_allclose(info["Ext"].memories, [[1, 1], [0, 0]])

    info = env.step({"Ext": [0.0] * 4}, memory={"Ext": [[1, 2], [3, 4]]}, value=[5, 6])
    assert env.global_done is True
    with pytest.raises(UnityActionException, match="Reset the environment"):
        env.step([0.0] * 4)
    env.close()
    env.close()  # idempotent

    expected = (b"RESET" + config + b"RECEIVED" * 4
                + b"STEP" + action_message([0.25, -1.0, 1.0, 0.5]) + b"RECEIVED" * 4
                + b"STEP" + action_message([0.0] * 4, [1.0, 2.0, 3.0, 4.0], [5.0, 6.0]) + b"RECEIVED" * 4
                + b"EXIT")
    assert fake.transcript() == expected


def test_large_academy_parameters_are_read_whole(fake):
    big = dict(ACADEMY, resetParameters={f"param_{i:05d}": float(i) for i in range(2000)})
    payload = json.dumps(big, indent=2)
    assert len(payload) > 12000
    env = fake.launch([{"send": payload, "chunks": 7}])
    assert len(env.reset_parameters) == 2000
    env.close()


def test_str_lists_brains_and_parameters(fake):
    env = fake.launch([{"send": ACADEMY_BYTES.decode()}])
    text = str(env)
    assert "FakeAcademy" in text and "Number of External Brains : 1" in text
    assert "gravity -> 9.81" in text and "Unity brain name: Teacher" in text
    env.close()


@pytest.mark.parametrize("kwargs, match", [
    ({"action": {"Teacher": ActionTuple(np.zeros((2, 1)))}}, "broadcasting brain"),
    ({"action": {"Nope": ActionTuple(np.zeros((2, 1)))}}, "not a brain of this environment"),
    ({"action": ActionTuple(np.zeros((1, 2)))}, r"shape \(1, 2\).*expects \(2, 2\)"),
    ({"action": ActionTuple(np.zeros((2, 2))), "memory": [1.0]}, "memory"),
    ({"action": ActionTuple(np.zeros((2, 2))), "value": [1.0, 2.0, 3.0]}, "value"),
    ({"action": ActionTuple(np.zeros((2, 2))), "memory": ["a"] * 4}, "must be numbers"),
    ({"action": [0.0] * 4}, "must be an ActionTuple"),
    ({"action": ActionTuple(np.full((2, 2), np.nan))}, "NaN"),
    ({}, "You need to input an action for the brain 'Ext'"),
])
def test_bad_step_input_is_a_clear_error(fake, kwargs, match):
    config, ops = full_session_ops()
    env = fake.launch(ops[:4] + unity_sends_states(0, b"False"))
    env.reset(config={"gravity": 3.0})
    with pytest.raises(UnityActionException, match=match):
        env.env.step_behaviors(**kwargs)  # the environment's own checks, not the test view's
    env.close()


def test_step_before_reset(fake):
    env = fake.launch([{"send": ACADEMY_BYTES.decode()}])
    with pytest.raises(UnityActionException, match="without first calling reset"):
        env.step([0.0] * 4)
    env.close()
    with pytest.raises(UnityEnvironmentException, match="No Unity environment is loaded"):
        env.reset()


@pytest.mark.parametrize("config, match", [
    ({"wind": 1.0}, "not a parameter of this environment"),
    ({"gravity": "high"}, "must be an integer or a float"),
    ({"gravity": True}, "must be an integer or a float"),
])
def test_bad_reset_parameters(fake, config, match):
    env = fake.launch([{"send": ACADEMY_BYTES.decode()}])
    with pytest.raises(UnityEnvironmentException, match=match):
        env.reset(config=config)
    env.close()


def test_api_mismatch(fake):
    with pytest.raises(UnityEnvironmentException, match="Unity API: API-3"):
        fake.launch([{"send": json.dumps(dict(ACADEMY, apiNumber="API-3"))}])


def test_missing_api_number_means_api_1(fake):
    params = dict(ACADEMY)
    del params["apiNumber"]
    with pytest.raises(UnityEnvironmentException, match="Unity API: API-1"):
        fake.launch([{"send": json.dumps(params)}])


def test_malformed_academy_parameters(fake):
    with pytest.raises(UnityCommunicationException, match="malformed"):
        fake.launch([{"send": json.dumps({"AcademyName": "x", "apiNumber": "API-2"})}])
    with pytest.raises(UnityCommunicationException, match="expected the AcademyParameters as JSON"):
        fake.launch([{"send": "hello"}])


def test_environment_that_dies_at_start(fake):
    t0 = time.time()
    with pytest.raises(UnityCommunicationException, match="exited with code 3"):
        fake.launch([{"exit": 3}], start_timeout=30)
    assert time.time() - t0 < 10, "a dead process must be noticed without waiting for the timeout"


def test_environment_that_closes_mid_step(fake):
    config, ops = full_session_ops()
    env = fake.launch(ops[:4] + unity_sends_states(0, b"False") + [{"recv": 4}, {"close": True}])
    env.reset(config={"gravity": 3.0})
    with pytest.raises(UnityCommunicationException, match="Lost the environment while waiting for STEPPING"):
        env.step([0.0] * 4)
    assert env._peer.process.poll() is not None, "the process must be reaped"
    env.close()


def test_truncated_state_message(fake):
    config, ops = full_session_ops()
    truncated = framed(ext_state(0))[:20].decode("latin-1")
    env = fake.launch(ops[:4] + [{"send": truncated}, {"close": True}])
    with pytest.raises(UnityCommunicationException, match="closed the connection"):
        env.reset(config={"gravity": 3.0})
    env.close()


def test_malformed_state_message(fake):
    config, ops = full_session_ops()
    env = fake.launch(ops[:4] + [{"send": framed(b"{not json").decode("latin-1")}])
    with pytest.raises(UnityCommunicationException, match="could not read it"):
        env.reset(config={"gravity": 3.0})
    env.close()


def test_state_of_the_wrong_size(fake):
    config, ops = full_session_ops()
    bad = json.dumps({"brain_name": "Ext", "agents": [1, 2], "states": [1.0, 2.0], "rewards": [0, 0],
                      "actions": [], "memories": [], "dones": [False, False]}).encode()
    env = fake.launch(ops[:4] + [{"send": framed(bad).decode("latin-1")}, {"recv": 8}])
    with pytest.raises(UnityEnvironmentException, match="invalid states field: expected 6 values"):
        env.reset(config={"gravity": 3.0})
    env.close()


def test_wrong_token(fake):
    env = fake.launch([{"send": ACADEMY_BYTES.decode()}, {"recv": 5}, {"send": "CONFIG_REQUESX"}])
    with pytest.raises(UnityCommunicationException, match="expected b'CONFIG_REQUEST'"):
        env.reset()
    env.close()


def test_timeout(fake):
    env = fake.launch([{"send": ACADEMY_BYTES.decode()}, {"recv": 5}, {"sleep": 5}], timeout_wait=0.5)
    t0 = time.time()
    with pytest.raises(UnityTimeOutException, match="longer than 0 s to send CONFIG_REQUEST|longer than 1 s"):
        env.reset()
    assert time.time() - t0 < 3
    env.close()


def test_start_timeout_kills_the_process(fake):
    t0 = time.time()
    with pytest.raises(UnityTimeOutException, match="did not connect"):
        fake.launch([{"sleep": 30}], start_timeout=1)
    assert time.time() - t0 < 5
    pid = int(open(os.environ["FAKE_UNITY_SCRIPT"] + ".pid").read())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped
    with socket.socket() as s:
        s.bind(("127.0.0.1", fake.port))  # and the port is free again


def test_port_in_use(fake):
    with socket.socket() as s:
        s.bind(("127.0.0.1", fake.port))
        s.listen(1)
        with pytest.raises(UnityEnvironmentException, match=f"127.0.0.1:{fake.port}.*--worker-id"):
            fake.launch([])


def test_unknown_environment_lists_builtin_scenes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnityEnvironmentException, match="Built-in scenes: .*3DBall"):
        UnityEnvironment("NoSuchGame", base_port=free_port())


def test_exceptions_share_a_root():
    for cls in (UnityActionException, UnityCommunicationException, UnityEnvironmentException,
                UnityTimeOutException):
        assert issubclass(cls, UnityException)


# The seed's test_unityagents.py initialises UnityEnvironment on this AcademyParameters message.
SEED_ACADEMY = b'''{
  "AcademyName": "RealFakeAcademy",
  "resetParameters": {},
  "brainNames": ["RealFakeBrain"],
  "externalBrainNames": ["RealFakeBrain"],
  "logPath":"RealFakePath",
  "apiNumber":"API-2",
  "brainParameters": [{
      "stateSize": 3,
      "actionSize": 2,
      "memorySize": 0,
      "cameraResolutions": [],
      "actionDescriptions": ["",""],
      "actionSpaceType": 1,
      "stateSpaceType": 1
      }]
}'''


def test_initialization_with_the_seeds_academy_parameters(fake):
    env = fake.launch([{"send": SEED_ACADEMY.decode()}])
    assert env.brain_names == ["RealFakeBrain"]
    assert env.external_brain_names == ["RealFakeBrain"]
    assert env.academy_name == "RealFakeAcademy"
    brain = env.brains["RealFakeBrain"]
    assert (brain.state_space_size, brain.action_space_size, brain.memory_space_size) == (3, 2, 0)
    assert (brain.state_space_type, brain.action_space_type) == ("continuous", "continuous")
    assert env.logfile_path == "RealFakePath"
    env.close()


def test_black_and_white_camera_frames_have_one_channel(fake):
    params = json.loads(json.dumps(ACADEMY))
    params["brainParameters"][0]["cameraResolutions"][0]["blackAndWhite"] = True
    config, ops = full_session_ops()
    env = fake.launch([{"send": json.dumps(params)}] + ops[1:4] + unity_sends_states(0, b"False"))
    frames = env.reset(config={"gravity": 3.0})["Ext"].observations[0]
    assert frames.shape == (2, 3, 4, 1)
    np.testing.assert_allclose(frames[0, :, :, 0], FRAME_A.mean(axis=2) / 255.0, atol=1e-6)
    env.close()


# ------------------------------------------------------------------------------ issue 13: hostile environments
from unityagents.exception import UnityMessageException, UnityObservationException, _log_hint, register_own_log  # noqa: E402,E501
from unityagents.launcher import find_unity_binary  # noqa: E402
from unityagents.wire.api2_stream import Connection  # noqa: E402
from unityagents.wire.base import Peer  # noqa: E402


def png_claiming(width: int, height: int) -> bytes:
    """A valid 4x3 PNG whose IHDR claims width x height: what a decompression bomb's header says."""
    data = bytearray(png(FRAME_A))
    struct.pack_into(">II", data, 16, width, height)
    return bytes(data)


def test_a_huge_png_is_refused_from_its_header_without_decoding(fake, monkeypatch):
    import PIL.Image

    opened = []
    real_open = PIL.Image.open

    def spy(fp, *args, **kwargs):
        head = fp.getvalue()[:24] if isinstance(fp, io.BytesIO) else b""
        opened.append(head)
        if struct.unpack(">II", head[16:24]) == (10000, 10000):
            pytest.fail("the 10000x10000 frame was handed to the PNG decoder")
        return real_open(fp, *args, **kwargs)

    monkeypatch.setattr(PIL.Image, "open", spy)
    config, ops = full_session_ops()
    bomb = [{"send": framed(ext_state(0)).decode("latin-1")}, {"recv": 8},
            {"send": framed(png(FRAME_A)).decode("latin-1")}, {"recv": 8},
            {"send": framed(png_claiming(10000, 10000)).decode("latin-1")}, {"recv": 8}]
    env = fake.launch(ops[:4] + bomb)
    with pytest.raises(UnityObservationException, match=r"10000x10000 frame .* camera of 4x3 \(refused from the "
                                                        r"PNG header, before decoding\)") as err:
        env.reset(config={"gravity": 3.0})
    assert err.value.brain == "Ext" and err.value.expected == "4x3" and err.value.received == "10000x10000"
    assert len(opened) == 1, "only the good first frame is decoded"
    assert env._peer.process.poll() is not None, "the environment is reaped after the malformed message"
    env.close()


def test_a_peer_trickling_bytes_hits_the_message_deadline(fake):
    """One byte every 0.1 s never lets a recv time out; the message's own deadline must."""
    config, ops = full_session_ops()
    slow = [{"send": framed(ext_state(0)).decode("latin-1"), "trickle": 0.1}]  # 15 s of bytes
    env = fake.launch(ops[:4] + slow, timeout_wait=0.5)
    with pytest.raises(UnityTimeOutException, match="longer than 0 s to send a brain's state message|longer "
                                                    "than 1 s to send a brain's state message"):
        env.reset(config={"gravity": 3.0})  # a per-recv timeout would wait the 15 s and succeed
    assert env._peer.process.poll() is not None
    env.close()


def _read_unframed_seconds(payload: bytes, check) -> float:
    """Seconds to read ``payload`` as the AcademyParameters over a socket pair, in 64 kB writes."""
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)

    def feed():
        for i in range(0, len(payload), 1 << 16):
            a.sendall(payload[i:i + (1 << 16)])

    import threading

    writer = threading.Thread(target=feed, daemon=True)
    conn = Connection(b, Peer(300), timeout=300)
    t0 = time.perf_counter()
    writer.start()
    value = conn.read_json_unframed("AcademyParameters")
    seconds = time.perf_counter() - t0
    writer.join()
    a.close()
    b.close()
    check(value)
    return seconds


def _academy_of_size(size: int):
    """AcademyParameters of about ``size`` bytes in many reset parameters (keys with brackets and
    escaped quotes), and a check of what was read."""
    n = size // 32
    entries = b",\n".join(b'    "p_%08d_{\\"[x": %d.5' % (i, i) for i in range(n))
    head = json.dumps(dict(ACADEMY, resetParameters={}), indent=2).encode()
    payload = head.replace(b'"resetParameters": {}', b'"resetParameters": {\n' + entries + b"\n  }")

    def check(value):
        assert value["brainNames"] == ACADEMY["brainNames"] and len(value["resetParameters"]) == n
        assert value["resetParameters"][f'p_{n - 1:08d}_{{"[x'] == n - 1 + 0.5

    return payload, check


def _academy_with_a_long_string(size: int):
    text = "\\x{}[]" * (size // 7 + 1)  # 7 bytes of JSON each
    payload = json.dumps(dict(ACADEMY, AcademyName=text), indent=2).encode()

    def check(value):
        assert value["AcademyName"] == text and value["brainNames"] == ACADEMY["brainNames"]

    return payload, check


class _CountingPattern:
    """A compiled pattern that adds up the bytes each of its calls is handed to look at."""

    def __init__(self, pattern, counter):
        self.pattern, self.counter = pattern, counter

    def sub(self, repl, region):
        self.counter["bytes"] += len(region)
        return self.pattern.sub(repl, region)

    def finditer(self, region):
        self.counter["bytes"] += len(region)
        return self.pattern.finditer(region)

    def match(self, buf, pos):
        m = self.pattern.match(buf, pos)
        self.counter["bytes"] += m.end() - pos
        return m


@pytest.mark.parametrize("make", [_academy_of_size, _academy_with_a_long_string], ids=["many keys", "one string"])
def test_unframed_academy_parameters_are_read_in_linear_time(make, monkeypatch):
    """The reader's work is counted, not timed: the bytes its patterns scan and the bytes it parses.
    Linear is about twice the payload (each byte scanned once, then parsed once); scanning the
    whole buffer again after each of the ~50 reads of 64 kB would be ~25 times the payload."""
    import orjson

    from unityagents.wire import api2_stream as communicator

    counter = {"bytes": 0}
    for name in ("_JSON_STRING", "_JSON_TOKENS", "_STRING_PART"):
        monkeypatch.setattr(communicator, name, _CountingPattern(getattr(communicator, name), counter))

    class CountingOrjson:
        JSONDecodeError = orjson.JSONDecodeError

        @staticmethod
        def loads(raw):
            counter["bytes"] += len(raw)
            return orjson.loads(raw)

    monkeypatch.setattr(communicator, "orjson", CountingOrjson)
    payload, check = make(3 << 20)
    _read_unframed_seconds(payload, check)
    assert counter["bytes"] <= 3 * len(payload), (counter["bytes"], len(payload))


def test_unframed_json_reader_keeps_strings_escapes_and_a_following_token(fake):
    """Brackets and escaped quotes inside strings do not end the value; what follows stays unread."""
    params = dict(ACADEMY, AcademyName='Fake}"]Academy\\', logPath="")
    text = json.dumps(params, indent=2)
    config, ops = full_session_ops()
    env = fake.launch([{"send": text, "chunks": 41}] + ops[1:4] + unity_sends_states(0, b"False"))
    assert env.academy_name == 'Fake}"]Academy\\'
    assert env.reset(config={"gravity": 3.0})["Ext"].agents == [-12, 40]
    env.close()


def test_deeply_nested_academy_parameters_are_a_unity_exception(fake):
    deep = json.dumps(dict(ACADEMY, resetParameters={"x": "DEEP"})).replace('"DEEP"', "[" * 50000 + "]" * 50000)
    with pytest.raises(UnityMessageException, match="nested more than 64 levels"):
        fake.launch([{"send": deep}])


@pytest.mark.parametrize("path, value, match", [
    (("brainParameters", 0, "memorySize"), -1, r"brainParameters\[0\] \(brain 'Ext'\)\.memorySize must be an "
                                               r"integer from 0 to \d+; received int -1"),
    (("brainParameters", 0, "cameraResolutions"), "4x3", r"cameraResolutions must be a list of at most 64 cameras; "
                                                         r"received str '4x3'"),
    (("brainParameters", 1, "stateSize"), 1e39, r"stateSize must be an integer .* received float 1e\+39"),
    (("resetParameters", "gravity"), None, r"resetParameters\['gravity'\] must be a finite number; received "
                                           r"NoneType None"),
    (("brainNames",), ["Ext", "Ext"], r"brainNames must be distinct names"),
    (("logPath",), 7, r"logPath must be a string"),
])
def test_malformed_academy_parameters_name_field_expected_and_received(fake, path, value, match):
    params = json.loads(json.dumps(ACADEMY))
    target = params
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = value
    with pytest.raises(UnityMessageException, match=match):
        fake.launch([{"send": json.dumps(params)}])


@pytest.mark.parametrize("field, value, match", [
    ("rewards", ["1", -1], r"invalid rewards: expected a flat list of numbers"),
    ("states", 7, r"invalid states: expected a list of numbers"),
    ("states", [None, 1, 2, 3, 4, 5], r"invalid states: expected a flat list of numbers"),
    ("states", [1e39, 1, 2, 3, 4, 5], r"invalid states\[0\]: expected a finite number within float32's range"),
    ("memories", [0, float("nan"), 0, 0], r"not JSON|invalid memories\[1\]"),
    ("rewards", [0, 1e300], r"invalid rewards\[1\]: expected a finite number"),
    ("actions", [1, 2, 3], r"invalid actions field: expected 4 values"),
    ("agents", {"a": 1}, r"invalid agents: expected a list of integer agent ids"),
    ("agents", [5, 5], r"invalid agents: expected distinct agent ids \(repeated: \[5\]\), received list \[5, 5\]"),
    ("dones", ["false", False], r"invalid dones: expected a list of true/false"),
])
def test_malformed_state_messages_name_brain_field_expected_and_received(fake, field, value, match):
    msg = json.loads(ext_state(0))
    msg[field] = value
    config, ops = full_session_ops()
    env = fake.launch(ops[:4] + [{"send": framed(json.dumps(msg).encode()).decode("latin-1")}, {"recv": 8}])
    with pytest.raises(UnityMessageException, match=match) as err:
        env.reset(config={"gravity": 3.0})
    if "not JSON" not in str(err.value):
        assert err.value.brain == "Ext" and err.value.field.startswith(field), (err.value.brain, err.value.field)
        assert "'Ext'" in str(err.value)
    assert env._peer.process.poll() is not None
    env.close()


def test_an_absurd_length_prefix_is_refused_before_reading(fake):
    config, ops = full_session_ops()
    env = fake.launch(ops[:4] + [{"send": struct.pack("<I", 2 ** 32 - 1).decode("latin-1")}, {"sleep": 3}])
    with pytest.raises(UnityMessageException, match=r"announces 4294967295 bytes, but no message of this brain "
                                                    r"can need more than \d+"):
        env.reset(config={"gravity": 3.0})
    env.close()


def test_env_name_is_matched_literally_not_as_a_glob(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "launched"
    build = tmp_path / "a.x86_64"
    build.write_text(f"#!/bin/sh\ntouch {marker}\n")
    build.chmod(0o755)
    assert find_unity_binary("a") == str(build)
    for pattern in ("*", "?", "[a]", "*.x86_64", "a*"):
        assert find_unity_binary(pattern) is None, pattern
        assert find_unity_binary(pattern, "grpc") is None, pattern
    with pytest.raises(UnityEnvironmentException, match="no Unity build matches it"):
        UnityEnvironment("*", base_port=free_port())
    assert not marker.exists(), "'*' launched a.x86_64"


def test_a_build_that_is_not_executable_is_a_clear_error_before_launch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    build = tmp_path / "Locked.x86_64"
    shutil.copy(os.path.join(HERE, "fake_unity.py"), build)
    build.chmod(0o644)
    with pytest.raises(UnityEnvironmentException, match=r"Locked.x86_64: it is not executable\. Make it executable "
                                                        r"\(chmod -R 755 "):
        UnityEnvironment("Locked", base_port=free_port())


@pytest.mark.parametrize("content, match", [
    ("#!/no/such/interpreter\n", r"the file or its interpreter does not exist .*bad interpreter"),
    ("\x7fELF garbage, not a program\n", r"it is not a program this system can run \(exec format error\)"),
])
def test_a_build_with_a_bad_interpreter_is_a_clear_error(tmp_path, monkeypatch, content, match):
    monkeypatch.chdir(tmp_path)
    build = tmp_path / "Broken.x86_64"
    build.write_text(content)
    build.chmod(0o755)
    with pytest.raises(UnityEnvironmentException, match=rf"Couldn't launch the Unity build .*Broken.x86_64: {match}"):
        UnityEnvironment("Broken", base_port=free_port())


def test_a_symlink_planted_at_the_log_path_is_not_followed(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("precious")
    logs = tmp_path / "logs"
    logs.mkdir()
    os.symlink(target, logs / "Basic-worker0.log")
    with pytest.raises(UnityEnvironmentException, match="is a symbolic link .* never followed"):
        UnityEnvironment("Basic", base_port=free_port(), log_dir=str(logs))
    assert target.read_text() == "precious"


def test_the_default_log_folder_is_private_to_the_environment():
    import stat
    import tempfile

    env = UnityEnvironment("Basic", base_port=free_port())
    try:
        folder = os.path.dirname(env.logfile_path)
        assert os.path.dirname(folder) == tempfile.gettempdir() and folder != os.path.join(tempfile.gettempdir(),
                                                                                           "unityagents")
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        env.reset()
    finally:
        env.close()
    other = UnityEnvironment("Basic", base_port=free_port())
    other.close()
    assert os.path.dirname(other.logfile_path) != folder


def test_a_log_path_sent_by_the_environment_is_shown_but_never_read(fake, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("Exception\nTOPSECRET key material\n")
    params = dict(ACADEMY, logPath=str(secret))
    config, ops = full_session_ops()
    env = fake.launch([{"send": json.dumps(params)}] + ops[1:4] + [{"send": framed(b"{not json").decode("latin-1")}])
    assert env.logfile_path == str(secret)
    with pytest.raises(UnityCommunicationException) as err:
        env.reset(config={"gravity": 3.0})
    assert str(secret) in str(err.value) and "TOPSECRET" not in str(err.value)
    env.close()
    # A log we created ourselves is still quoted.
    own = tmp_path / "own.log"
    own.write_text("Exception\nthe scene failed here\n")
    register_own_log(str(own))
    assert "the scene failed here" in _log_hint(str(own))
    assert "TOPSECRET" not in _log_hint(str(secret))


NAN_BUILD = '''
import sys
import academy.academy as a
from academy.__main__ import main

original, count = a.Academy.state_message, [0]


def poisoned(self, brain):
    message = original(self, brain)
    count[0] += 1
    if count[0] > {after}:
        message["states"][0] = 1e39  # beyond float32: as non-finite as NaN
    return message


a.Academy.state_message = poisoned
sys.exit(main(sys.argv[1:]))
'''


@pytest.mark.slow
def test_learn_stops_on_an_environment_sending_non_finite_states_with_a_finite_checkpoint(tmp_path):
    """The environment is named as the cause, it is not restarted past --max-lifetime-restarts 0,
    and the latest checkpoint (saved before the bad state) holds only finite numbers."""
    import subprocess
    import sys

    root = os.path.dirname(HERE)
    (tmp_path / "nan_build.py").write_text(NAN_BUILD.replace("{after}", "1300"))
    build = tmp_path / "NaNBasic.x86_64"
    wrapper = tmp_path / "nan_build.py"
    build.write_text(f'#!/bin/sh\nPYTHONPATH="{root}" exec "{sys.executable}" "{wrapper}" Basic "$@"\n')
    build.chmod(0o755)
    (tmp_path / "config.yaml").write_text(
        "BasicBrain:\n    max_steps: 1.0e6\n    summary_freq: 1000\n    batch_size: 32\n    buffer_size: 256\n"
        "    time_horizon: 3\n    hidden_units: 16\n    num_layers: 1\n    normalize: true\n")
    proc = subprocess.run([sys.executable, os.path.join(root, "learn.py"), "NaNBasic", "--train", "--trainer-config",
                           "config.yaml", "--save-freq", "500", "--base-port", str(free_port()),
                           "--max-lifetime-restarts", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "UnityMessageException" in out and "brain 'BasicBrain'" in out and "invalid states[0]" in out, out
    assert "float32's range" in out and "cannot be restarted" in out, out
    assert "Traceback" not in out, out
    from trainers.tf_utils import tf

    latest = tf.train.latest_checkpoint(str(tmp_path / "models" / "ppo"))
    assert latest is not None, out
    reader = tf.train.load_checkpoint(latest)
    for name in reader.get_variable_to_shape_map():
        value = np.asarray(reader.get_tensor(name))
        if value.dtype.kind == "f":
            assert np.all(np.isfinite(value)), name


# ------------------------------------------------------------------------------ the gRPC path, same classes
def _grpc_behavior():
    from unityagents.brain import BrainParameters
    from unityagents.wire.grpc_messages import Behavior, SensorLayout

    params = BrainParameters("Ball", {"stateSize": 3, "actionSize": 2, "memorySize": 0, "cameraResolutions": [],
                                      "actionDescriptions": [], "actionSpaceType": 1, "stateSpaceType": 1})
    return Behavior("Ball", [SensorLayout((3,), False, size=3)], 2, [], params, channels_last=False,
                     package_version="2.0.0")


@pytest.mark.parametrize("bad", ["nan-observation", "inf-reward", "duplicate-id"])
def test_grpc_non_finite_values_and_duplicate_ids_are_environment_errors(bad):
    from unityagents.wire.protos import communicator_objects_pb2 as pb

    behavior = _grpc_behavior()

    def agent(i, values=(0.1, 0.2, 0.3), reward=0.0):
        return pb.AgentInfoProto(id=i, reward=reward, observations=[pb.ObservationProto(
            shape=[3], float_data=pb.ObservationProto.FloatData(data=list(values)))])

    good = [agent(0), agent(1)]
    assert behavior.steps(good, None)[0].obs[0].shape == (2, 3)
    infos = {"nan-observation": [agent(0), agent(1, (0.1, float("nan"), 0.3))],
             "inf-reward": [agent(0, reward=float("inf")), agent(1)],
             "duplicate-id": [agent(0), agent(0)]}[bad]
    match = {"nan-observation": r"field observations \(vector\).*received nan", "inf-reward": r"field reward\).*inf",
             "duplicate-id": "the same agent sent two infos of the same kind"}[bad]
    with pytest.raises(UnityMessageException, match=match) as err:
        behavior.steps(infos, None)
    assert err.value.brain == "Ball" and err.value.agent == (0 if bad != "nan-observation" else 1)


def test_grpc_png_observation_is_refused_from_its_header_without_decoding(monkeypatch):
    import PIL.Image

    from unityagents.wire.validate import decode_png_observation

    monkeypatch.setattr(PIL.Image, "open", lambda *a, **k: pytest.fail("the frame was handed to the decoder"))
    with pytest.raises(ValueError, match=r"PNG header says 10000x10000 \(refused before decoding\), expected 4x3"):
        decode_png_observation(png_claiming(10000, 10000), (3, 4, 3), [])
