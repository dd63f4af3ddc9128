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

from unityagents import (
    UnityActionException,
    UnityCommunicationException,
    UnityEnvironment,
    UnityEnvironmentException,
    UnityException,
    UnityTimeOutException,
)

HERE = os.path.dirname(os.path.abspath(__file__))


def framed(payload: bytes) -> bytes:
    return struct.pack("<I", len(payload)) + payload


def png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8), "RGB").save(out, format="PNG")
    return out.getvalue()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
            return UnityEnvironment("Fake", **kwargs)

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
    ({"action": {"Teacher": [1]}}, "broadcasting brain"),
    ({"action": {"Nope": [1]}}, "not a brain of this environment"),
    ({"action": [1.0, 2.0, 3.0]}, "expects 4 floats"),
    ({"action": [0.0] * 4, "memory": [1.0]}, "memory"),
    ({"action": [0.0] * 4, "value": [1.0, 2.0, 3.0]}, "value"),
    ({"action": ["a", "b", "c", "d"]}, "must be numbers"),
    ({"action": [float("nan")] * 4}, "NaN"),
    ({}, "You need to input an action for the brain 'Ext'"),
])
def test_bad_step_input_is_a_clear_error(fake, kwargs, match):
    config, ops = full_session_ops()
    env = fake.launch(ops[:4] + unity_sends_states(0, b"False"))
    env.reset(config={"gravity": 3.0})
    with pytest.raises(UnityActionException, match=match):
        env.step(**kwargs)
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
    assert env._proc.poll() is not None, "the process must be reaped"
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
