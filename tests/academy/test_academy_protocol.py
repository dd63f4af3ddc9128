"""The Unity side of API-2 (``python -m academy``) against a scripted trainer written here.

The peer below is written from the protocol (``unityagents/wire/api2.py``'s docstring), not from ``academy`` or
``unityagents`` code: it binds 127.0.0.1, launches the academy as a subprocess, and asserts the exact
bytes of the handshake, a reset and steps, for a plain brain (3DBall), a camera brain (GridWorld)
and a broadcasting Heuristic brain (3DBallIL). Every message's content is compared with the same
scene run in-process, so the wire is shown to carry exactly what the Academy computed.
"""
from __future__ import annotations

import io
import json
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from academy import load_scene
from academy.academy import Academy

REPO = __file__.rsplit("/tests/", 1)[0]
STATE_KEYS = ["brain_name", "agents", "states", "rewards", "actions", "memories", "dones"]


class Trainer:
    """The Python (server) end of the wire, reduced to exact reads and single writes."""

    def __init__(self, scene: str, *args: str, split: bool = False) -> None:
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(1)
        self.server.settimeout(30)
        port = self.server.getsockname()[1]
        self.proc = subprocess.Popen([sys.executable, "-m", "academy", scene, "--port", str(port), *args],
                                     cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        self.conn, _ = self.server.accept()
        self.conn.settimeout(30)
        self.conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.split = split  # send every message in small pieces to prove the reader is split-tolerant

    def send(self, data: bytes) -> None:
        if not self.split:
            self.conn.sendall(data)
            return
        for i in range(0, len(data), 3):
            self.conn.sendall(data[i:i + 3])
            time.sleep(0.002)

    def recv_exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.conn.recv(n - len(data))
            assert chunk, f"academy closed the connection after {data!r}, expected {n} bytes"
            data += chunk
        return data

    def expect(self, token: bytes) -> None:
        assert self.recv_exact(len(token)) == token

    def recv_framed(self) -> bytes:
        (length,) = struct.unpack("<I", self.recv_exact(4))
        return self.recv_exact(length)

    def recv_unframed_json(self) -> tuple[bytes, dict]:
        raw = b""
        while True:
            raw += self.conn.recv(65536)
            try:
                return raw, json.loads(raw)
            except ValueError:
                continue

    def recv_states(self, brains: list[dict]) -> tuple[list[dict], list[list[np.ndarray]], bool]:
        """One state block: per brain a framed JSON (+ its images), all acked; then True/False."""
        messages, images = [], []
        for params in brains:
            raw = self.recv_framed()
            message = json.loads(raw)
            assert list(message) == STATE_KEYS
            assert b" " not in raw and b"\n" not in raw, "state JSON must be compact"
            self.send(b"RECEIVED")
            frames = []
            for camera in params["cameraResolutions"]:
                for _ in message["agents"]:
                    png = self.recv_framed()
                    assert png[:8] == b"\x89PNG\r\n\x1a\n"
                    frame = np.asarray(Image.open(io.BytesIO(png)))
                    assert frame.shape == (camera["height"], camera["width"], 3)
                    frames.append(frame)
                    self.send(b"RECEIVED")
            messages.append(message)
            images.append(frames)
        flag = self.recv_exact(4)
        if flag == b"Fals":
            assert self.recv_exact(1) == b"e"
            return messages, images, False
        assert flag == b"True"
        return messages, images, True

    def reset(self, brains: list[dict], train_model: bool = True, parameters: dict | None = None):
        self.send(b"RESET")
        self.expect(b"CONFIG_REQUEST")
        self.send(json.dumps({"train_model": train_model, "parameters": parameters or {}}).encode())
        return self.recv_states(brains)

    def send_step(self, action: dict, memory: dict | None = None, value: dict | None = None) -> None:
        """STEP, then (once the academy answers STEPPING) the framed JSON of the actions."""
        self.send(b"STEP")
        self.expect(b"STEPPING")
        payload = json.dumps({"action": action, "memory": memory or {}, "value": value or {}}).encode()
        self.send(struct.pack("<I", len(payload)) + payload)

    def step(self, brains: list[dict], action: dict, memory: dict | None = None, value: dict | None = None):
        self.send_step(action, memory, value)
        return self.recv_states(brains)

    def finish(self, timeout: float = 10) -> tuple[int, str]:
        """Wait for the academy to exit; return its status and stderr."""
        try:
            _, err = self.proc.communicate(timeout=timeout)
        finally:
            self.conn.close()
            self.server.close()
        return self.proc.returncode, err.decode()

    def exits_with(self, status: int) -> str:
        """Wait for the academy to exit with ``status`` and no traceback; return its stderr."""
        code, err = self.finish()
        assert code == status, err
        assert "Traceback" not in err, err
        return err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        self.conn.close()
        self.server.close()


@pytest.fixture
def trainers():
    started = []

    def start(*args, **kwargs) -> Trainer:
        started.append(Trainer(*args, **kwargs))
        return started[-1]

    yield start
    for trainer in started:
        trainer.kill()


def in_process(scene: str, seed: int = 0) -> Academy:
    academy = Academy(load_scene(scene)(seed))
    academy.reset(train_mode=True)
    return academy


def expected_messages(academy: Academy) -> list[dict]:
    messages = []
    academy.finish_step(lambda brain: messages.append(academy.state_message(brain)))
    return messages


def test_3dball_handshake_reset_and_two_steps_byte_exact(trainers):
    trainer = trainers("3DBall", "--seed", "3")
    raw, params = trainer.recv_unframed_json()
    assert params == {
        "AcademyName": "Ball3DAcademy", "apiNumber": "API-2", "logPath": "",
        "resetParameters": {"gravity": 9.81, "ball_scale": 1.0},
        "brainNames": ["Ball3DBrain"],
        "brainParameters": [{"stateSize": 8, "actionSize": 2, "memorySize": 0, "cameraResolutions": [],
                             "actionDescriptions": ["rotate z", "rotate x"], "actionSpaceType": 1,
                             "stateSpaceType": 1}],
        "externalBrainNames": ["Ball3DBrain"],
    }
    assert list(params) == ["AcademyName", "apiNumber", "logPath", "resetParameters", "brainNames",
                            "brainParameters", "externalBrainNames"]
    assert raw == json.dumps(params, indent=2).encode(), "AcademyParameters: indented JSON, nothing else"
    brains = params["brainParameters"]

    reference = in_process("3DBall", seed=3)
    (message,), _, done = trainer.reset(brains)
    assert message == expected_messages(reference)[0]
    assert done is False
    assert len(message["agents"]) == 12 and len(set(message["agents"])) == 12
    assert len(message["states"]) == 12 * 8
    assert message["rewards"] == [0.0] * 12 and message["dones"] == [False] * 12
    assert message["memories"] == []

    for k in range(2):
        action = np.linspace(-1, 1, 24).round(3) * (-1) ** k
        (message,), _, done = trainer.step(brains, {"Ball3DBrain": action.tolist()})
        reference.set_external_actions({"action": {"Ball3DBrain": action.tolist()}})
        reference.advance()
        assert message == expected_messages(reference)[0]
        assert message["actions"] == action.tolist(), "actions carry the action just executed"
        assert all(r in (0.1, -1.0) for r in message["rewards"])
        assert done is False

    trainer.send(b"EXIT")
    trainer.exits_with(0)


def test_gridworld_camera_pngs_follow_each_state(trainers):
    trainer = trainers("GridWorld", "--seed", "5")
    _, params = trainer.recv_unframed_json()
    brains = params["brainParameters"]
    assert brains[0]["cameraResolutions"] == [{"width": 84, "height": 84, "blackAndWhite": False}]
    assert brains[0]["stateSize"] == 0 and brains[0]["actionSpaceType"] == 0

    reference = in_process("GridWorld", seed=5)
    (message,), (frames,), _ = trainer.reset(brains)
    assert message == expected_messages(reference)[0]
    assert message["states"] == []
    assert len(frames) == 1
    np.testing.assert_array_equal(frames[0], reference.scene.render("GridWorldBrain", 0)[0])
    for action in (3, 0):
        (message,), (frames,), _ = trainer.step(brains, {"GridWorldBrain": [action]})
        reference.set_external_actions({"action": {"GridWorldBrain": [action]}})
        reference.advance()
        assert message == expected_messages(reference)[0]
        assert message["actions"] == [float(action)]
        np.testing.assert_array_equal(frames[0], reference.scene.render("GridWorldBrain", 0)[0])
    trainer.send(b"EXIT")
    assert trainer.finish()[0] == 0


def test_broadcasting_heuristic_brain_is_sent_before_the_external_one(trainers):
    trainer = trainers("3DBallIL", "--seed", "7")
    _, params = trainer.recv_unframed_json()
    assert params["brainNames"] == ["Teacher", "Student"]
    assert params["externalBrainNames"] == ["Student"]
    brains = params["brainParameters"]

    reference = in_process("3DBallIL", seed=7)
    messages, _, _ = trainer.reset(brains)
    assert [m["brain_name"] for m in messages] == ["Teacher", "Student"]
    assert messages == expected_messages(reference)
    for _ in range(2):
        action = [0.5, -0.25] * 12
        messages, _, _ = trainer.step(brains, {"Student": action})
        reference.set_external_actions({"action": {"Student": action}})
        reference.decide()
        reference.advance()
        assert messages == expected_messages(reference)
        teacher = np.array(messages[0]["actions"])
        assert teacher.shape == (24,) and np.any(teacher != 0), "the teacher's own decisions are broadcast"
    trainer.send(b"EXIT")
    assert trainer.finish()[0] == 0


def test_no_broadcast_hides_the_heuristic_brain(trainers):
    trainer = trainers("3DBallIL", "--no-broadcast", "Teacher")
    _, params = trainer.recv_unframed_json()
    assert params["brainNames"] == ["Student"]
    messages, _, _ = trainer.reset(params["brainParameters"])
    assert [m["brain_name"] for m in messages] == ["Student"]
    trainer.send(b"EXIT")
    assert trainer.finish()[0] == 0


def test_messages_split_into_tiny_tcp_segments_are_reassembled(trainers):
    trainer = trainers("Basic", split=True)
    _, params = trainer.recv_unframed_json()
    brains = params["brainParameters"]
    (message,), _, _ = trainer.reset(brains, parameters={})
    assert message["states"] == [10.0]
    (message,), _, _ = trainer.step(brains, {"BasicBrain": [1]}, value={"BasicBrain": [0.5]})
    assert message["states"] == [11.0] and message["rewards"] == [-0.01]
    trainer.send(b"EXIT")
    assert trainer.finish()[0] == 0


def test_reset_parameters_apply_and_unknown_ones_are_logged(trainers, tmp_path):
    log_file = tmp_path / "academy.log"
    trainer = trainers("GridWorld", "--log-file", str(log_file))
    _, params = trainer.recv_unframed_json()
    assert params["logPath"] == str(log_file)
    assert params["resetParameters"] == {"gridSize": 5.0, "numObstacles": 1.0, "numGoals": 1.0}
    trainer.reset(params["brainParameters"], parameters={"gridSize": 3, "speed": 2})
    trainer.send(b"EXIT")
    assert trainer.finish()[0] == 0
    text = log_file.read_text()
    assert "'speed' is not a parameter of GridAcademy" in text
    assert "ERROR" in text


def test_done_agent_message_carries_terminal_reward_and_reset_state(trainers):
    trainer = trainers("Basic")
    _, params = trainer.recv_unframed_json()
    brains = params["brainParameters"]
    trainer.reset(brains)
    for _ in range(7):
        (message,), _, done = trainer.step(brains, {"BasicBrain": [1]})
        assert done is False
    assert message["dones"] == [True] and message["rewards"] == [1.0]
    assert message["states"] == [10.0], "a done agent's message already carries its post-reset state"
    trainer.send(b"EXIT")
    assert trainer.finish()[0] == 0


@pytest.mark.parametrize("vanish_at", ["command", "actions", "received"])
def test_academy_exits_cleanly_when_the_trainer_disappears(trainers, vanish_at):
    trainer = trainers("GridWorld")
    _, params = trainer.recv_unframed_json()
    brains = params["brainParameters"]
    trainer.reset(brains)
    if vanish_at == "actions":
        trainer.send(b"STEP")
        trainer.expect(b"STEPPING")
    if vanish_at == "received":
        trainer.send_step({"GridWorldBrain": [1]})
        trainer.recv_framed()
    trainer.conn.close()
    assert "closed the connection" in trainer.exits_with(1)


def test_wrong_action_size_ends_the_run_with_a_clear_error(trainers):
    trainer = trainers("3DBall")
    _, params = trainer.recv_unframed_json()
    trainer.reset(params["brainParameters"])
    trainer.send_step({"Ball3DBrain": [0.0] * 5})
    assert "'Ball3DBrain': action has 5 floats, expected 24" in trainer.exits_with(3)


def test_unknown_command_quits_like_unity(trainers):
    trainer = trainers("Basic")
    trainer.recv_unframed_json()
    trainer.send(b"QUIT")
    status, err = trainer.finish()
    assert status == 0
    assert "'QUIT'" in err


def test_no_trainer_listening_is_a_clear_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound but not listening: connection refused
        result = subprocess.run([sys.executable, "-m", "academy", "Basic", "--port", str(port)],
                                cwd=REPO, capture_output=True, timeout=30)
    assert result.returncode == 1
    assert b"could not connect to the trainer" in result.stderr
    assert b"Traceback" not in result.stderr


def test_global_done_is_sent_as_true_and_a_reset_starts_over(trainers):
    trainer = trainers("Push")
    _, params = trainer.recv_unframed_json()
    brains = params["brainParameters"]
    trainer.reset(brains)
    flags = [trainer.step(brains, {"PushBrain": [0] * 8})[2] for _ in range(3000)]
    assert flags == [False] * 2999 + [True]
    (message,), _, done = trainer.reset(brains)
    assert done is False and message["dones"] == [False] * 8
    trainer.send(b"EXIT")
    assert trainer.finish()[0] == 0


def test_two_external_brains_each_get_their_own_actions(trainers):
    trainer = trainers("Tennis")
    _, params = trainer.recv_unframed_json()
    assert params["externalBrainNames"] == ["TennisBrain", "ghost-TennisBrain"]
    brains = params["brainParameters"]
    trainer.reset(brains)
    left, right = trainer.step(brains, {"TennisBrain": [1.0, 0.0] * 8, "ghost-TennisBrain": [-1.0, 0.0] * 8})[0]
    assert left["actions"] == [1.0, 0.0] * 8 and right["actions"] == [-1.0, 0.0] * 8
    assert all(s > 0 for s in left["states"][2::8]), "left agents run towards the net (+x in their frame)"
    assert all(s < 0 for s in right["states"][2::8]), "right agents run away from it"
    trainer.send(b"EXIT")
    assert trainer.finish()[0] == 0
