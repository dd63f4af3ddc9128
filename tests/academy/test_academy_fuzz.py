"""Issue 13, item 7: the academy survives whatever a trainer sends, and says why it stopped.

A scripted API-2 trainer peer (written here from the protocol facts, like the one in
test_academy_protocol.py) plays handshake, RESET, a few STEPs and EXIT, with one message mutated:
the reset configuration, an action message, its length prefix, a command or a RECEIVED ack, at the
JSON level (hostile values at a random place: null, strings, lists, objects, NaN, 1e400, deep
nesting, huge lists) or at the byte level (truncated, flipped, inserted, wrong or huge prefixes).

Each session must end before its deadline with the status that its mutated bytes require under
API-2's rules (``expected_status``, restated from the protocol facts): 0 when the bytes are no
command at all (the academy quits, as Unity does) or a message the Academy accepts, 1 when a message
never completes, 3 when it breaks the protocol or the Academy refuses its values; with an error
logged for 1 and 3 and no exception escaping (no traceback). The academy runs in-process on a
socketpair (a thread per session), so a few hundred seeded sessions take seconds; a handful of
cases also run through ``python -m academy`` over 127.0.0.1 to check its stderr.
"""
from __future__ import annotations

import copy
import json
import logging
import random
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter

import pytest

from academy import load_scene
from academy.__main__ import serve_trainer
from academy.academy import Academy
from academy.communicator import ExternalCommunicator
from tests.academy_wire_rules import expected_status

REPO = __file__.rsplit("/tests/", 1)[0]
SCENES = ["Basic", "3DBall", "Tennis", "3DBallHard", "GridWorld", "3DBallIL", "Hallway", "Push"]
SESSIONS = 300
SESSION_DEADLINE = 10.0   # seconds for one session, academy included
MESSAGE_TIMEOUT = 1.0     # the academy's deadline for a started message (default 60 s) ...
FUZZ_MESSAGE_TIMEOUT = 0.2  # ... and in the fuzz, where a stall after a truncated message ends with exit 1
PEER_TIMEOUT = 2.0        # how long the peer waits for a reply before it hangs up


class Hangup(Exception):
    """The academy closed the connection or stopped answering: the peer's script ends here."""


class Peer:
    """The trainer's end: exact reads, single writes, and one hook that may mutate what it sends."""

    def __init__(self, sock: socket.socket, hook=None) -> None:
        self.sock = sock
        self.sock.settimeout(PEER_TIMEOUT)
        self.buf = b""
        self.hook = hook or (lambda kind, data: data)
        self.agents: dict[str, int] = {}

    def send(self, kind: str, data: bytes) -> None:
        self.send_raw(self.hook(kind, data))

    def send_raw(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:  # the academy hung up first
            raise Hangup(exc) from None

    def _more(self) -> None:
        try:
            chunk = self.sock.recv(65536)
        except OSError as exc:
            raise Hangup(exc) from None
        if not chunk:
            raise Hangup("closed")
        self.buf += chunk

    def recv_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._more()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def expect(self, token: bytes) -> None:
        if self.recv_exact(len(token)) != token:
            raise Hangup(f"expected {token!r}")

    def recv_framed(self) -> bytes:
        (length,) = struct.unpack("<I", self.recv_exact(4))
        return self.recv_exact(length)

    def handshake(self) -> dict:
        decoder = json.JSONDecoder()
        while True:
            try:
                obj, end = decoder.raw_decode(self.buf.decode())
                self.buf = self.buf[end:]
                return obj
            except ValueError:
                self._more()

    def states(self, params: dict) -> bool:
        for name, brain in zip(params["brainNames"], params["brainParameters"]):
            message = json.loads(self.recv_framed())
            self.agents[name] = len(message["agents"])
            self.send("ack", b"RECEIVED")
            for _ in range(len(brain["cameraResolutions"]) * len(message["agents"])):
                self.recv_framed()
                self.send("ack", b"RECEIVED")
        flag = self.recv_exact(4)
        if flag == b"Fals":
            self.expect(b"e")
        return flag == b"True"

    def reset(self, params: dict, config: dict) -> None:
        self.send("command", b"RESET")
        self.expect(b"CONFIG_REQUEST")
        self.send("reset", json.dumps(config).encode())
        self.states(params)

    def step(self, params: dict, message: dict) -> None:
        self.send("command", b"STEP")
        self.expect(b"STEPPING")
        payload = json.dumps(message).encode()
        self.send("prefix+action", struct.pack("<I", len(payload)) + payload)
        self.states(params)


def legit_actions(params: dict, agents: dict, rng: random.Random) -> dict:
    """What a correct trainer sends: per External brain, n_agents x width numbers (+ memory, value)."""
    message = {"action": {}, "memory": {}, "value": {}}
    for name, brain in zip(params["brainNames"], params["brainParameters"]):
        if name not in params["externalBrainNames"]:
            continue
        n = agents[name]
        if brain["actionSpaceType"] == 0:
            message["action"][name] = [rng.randrange(brain["actionSize"]) for _ in range(n)]
        else:
            message["action"][name] = [rng.uniform(-1, 1) for _ in range(n * brain["actionSize"])]
        if brain["memorySize"]:
            message["memory"][name] = [0.0] * (n * brain["memorySize"])
        message["value"][name] = [0.0] * n
    return message


# ------------------------------------------------------------------------------------- mutations
def _deep(depth: int, leaf=1):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = [
    None, True, False, "x", "NaN", "", [], {}, [[]], {"a": 1}, [None], ["1.5"], [True, 1.0],
    "__NAN__", "__INF__", "__NEG_INF__", "__1E400__", 1e308, -1e308, 10 ** 30, -1, 0.5, 7, 2 ** 31,
    "__DEEP_50__", "__DEEP_5000__", "__HUGE_LIST__",
]
PLACEHOLDERS = {
    '"__NAN__"': "NaN", '"__INF__"': "Infinity", '"__NEG_INF__"': "-Infinity", '"__1E400__"': "1e400",
    '"__DEEP_50__"': json.dumps(_deep(50)), '"__DEEP_5000__"': "[" * 5000 + "]" * 5000,
    '"__HUGE_LIST__"': json.dumps([0.0] * 100000),
}


def encode(obj) -> bytes:
    text = json.dumps(obj)
    for placeholder, raw in PLACEHOLDERS.items():
        text = text.replace(placeholder, raw)
    return text.encode()


def mutate_tree(obj, rng: random.Random):
    """Replace, delete or add one node at a random place of a JSON tree (a deep copy)."""
    obj = copy.deepcopy(obj)
    if rng.random() < 0.1:
        return rng.choice(HOSTILE)
    parent, key = None, None
    node = obj
    while isinstance(node, (dict, list)) and node and (parent is None or rng.random() < 0.7):
        parent = node
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        node = node[key]
    if parent is None:
        return rng.choice(HOSTILE)
    roll = rng.random()
    if roll < 0.75:
        parent[key] = rng.choice(HOSTILE)
    elif roll < 0.9 and isinstance(parent, dict):
        del parent[key]
    elif isinstance(parent, dict):
        parent[rng.choice(["extra", "Ball3DBrain", "gravity", "train_model", "action"])] = rng.choice(HOSTILE)
    else:
        parent.append(rng.choice(HOSTILE))
    return obj


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    roll = rng.random()
    if not data:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    i = rng.randrange(len(data))
    if roll < 0.3:
        return data[:i]                                          # truncated
    if roll < 0.5:
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]   # one bit flipped
    if roll < 0.7:
        return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6))) + data[i:]
    if roll < 0.8:
        return data + data                                       # sent twice
    if roll < 0.9:
        return data[:i] + b"\x00" * 3 + data[i:]
    return bytes(rng.randrange(256) for _ in range(len(data)))   # garbage of the same length


def make_hook(rng: random.Random, kind: str, occurrence: int):
    """A hook that mutates the ``occurrence``-th message of ``kind`` and sends the rest unchanged.

    Once it fired, ``hook.fired`` holds ``(class, original bytes, bytes sent)``.
    """
    seen = Counter()

    def hook(sent_kind: str, data: bytes) -> bytes:
        seen[sent_kind] += 1
        if sent_kind != kind or seen[sent_kind] != occurrence:
            return data
        label, out = mutate(data)
        hook.fired = (label, data, out)
        return out

    def mutate(data: bytes) -> tuple:
        if kind in ("reset", "prefix+action") and rng.random() < 0.6:
            payload = data if kind == "reset" else data[4:]
            mutated = encode(mutate_tree(json.loads(payload), rng))
            if kind == "reset":
                return "json tree", mutated
            return "json tree", struct.pack("<I", len(mutated)) + mutated
        if kind == "prefix+action" and rng.random() < 0.3:
            length = struct.unpack("<I", data[:4])[0]
            wrong = rng.choice([0, 1, length - 1, length + 1, length + 100, 2 ** 31, 2 ** 32 - 1, 70 << 20])
            return "length lie", struct.pack("<I", max(0, wrong) % 2 ** 32) + data[4:]
        if kind == "reset" and rng.random() < 0.2:
            return "oversized", b'{"train_model": true, "parameters": {}, "pad": "' + b"x" * (2 << 20) + b'"}'
        return "bytes", mutate_bytes(data, rng)

    hook.fired = None
    return hook


# ---------------------------------------------------------------------------------- sessions
class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def academy_log():
    logger = logging.getLogger("academy")
    handler, level = Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def run_session(scene: str, seed: int, play, records: Records, message_timeout: float = MESSAGE_TIMEOUT) -> dict:
    """The academy in a thread on one end of a socketpair, ``play(peer)`` on the other."""
    ours, theirs = socket.socketpair()
    academy = Academy(load_scene(scene)(seed))
    comm = ExternalCommunicator.from_socket(theirs, message_timeout=message_timeout)
    result: dict = {}
    start = len(records.records)

    def serve() -> None:
        try:
            result["status"] = serve_trainer(academy, comm)
        except BaseException:  # what a traceback would be, for the test to report
            result["crash"] = traceback.format_exc()

    thread = threading.Thread(target=serve, daemon=True)
    began = time.monotonic()
    thread.start()
    try:
        play(Peer(ours))
    except Hangup:
        pass
    finally:
        ours.close()  # a well-behaved academy that waits for more bytes now sees the connection lost
    thread.join(SESSION_DEADLINE - (time.monotonic() - began))
    result["hang"] = thread.is_alive()
    result["log"] = records.records[start:]
    return result


def script(rng: random.Random, steps: int):
    def play(peer: Peer) -> None:
        params = peer.handshake()
        config = {"train_model": True, "parameters": {k: v for k, v in params["resetParameters"].items()
                                                      if rng.random() < 0.5}}
        peer.reset(params, config)
        for _ in range(steps):
            peer.step(params, legit_actions(params, peer.agents, rng))
        peer.send("command", b"EXIT")
        try:
            peer.recv_exact(1)  # the academy closes the connection after EXIT
        except Hangup:
            pass
    return play


def check(result: dict, what: str) -> None:
    assert "crash" not in result, f"{what}: an exception escaped the academy:\n{result['crash']}"
    assert not result["hang"], f"{what}: the academy did not finish within {SESSION_DEADLINE} s"
    status = result["status"]
    assert status in (0, 1, 3), f"{what}: exit status {status}"
    errors = [r for r in result["log"] if r.levelno >= logging.ERROR]
    assert not any(r.exc_info for r in result["log"]), f"{what}: a traceback was logged"
    if status == 3:
        assert any(r.getMessage().startswith("protocol error: ") for r in errors), f"{what}: no protocol error logged"
    if status == 1:
        assert errors, f"{what}: exit 1 without a logged error"


def test_unmutated_sessions_end_with_exit_0(academy_log):
    for scene in SCENES:
        result = run_session(scene, 0, script(random.Random(0), steps=3), academy_log)
        check(result, scene)
        assert result["status"] == 0, [r.getMessage() for r in result["log"]]


@pytest.mark.slow
def test_seeded_mutations_end_with_the_status_their_bytes_require(academy_log):
    """Each session's exit status is the one API-2's rules (restated above) give its mutated message:
    0 for a string that is no command or a message the Academy accepts, 1 for a message that never
    completes, 3 for one that breaks the protocol or that the Academy refuses."""
    outcomes, figures, classes = Counter(), Counter(), Counter()
    wrong = []
    started = time.monotonic()
    for i in range(SESSIONS):
        rng = random.Random(1000 + i)
        scene = SCENES[i % len(SCENES)]
        steps = rng.randint(1, 3)
        kind = rng.choices(["prefix+action", "reset", "command", "ack"], weights=[45, 30, 15, 10])[0]
        count = {"prefix+action": steps, "reset": 1, "command": steps + 2, "ack": 1}[kind]
        peer_script = script(rng, steps)
        hook = make_hook(rng, kind, rng.randint(1, count))

        def play(peer: Peer, _hook=hook, _script=peer_script) -> None:
            peer.hook = _hook
            _script(peer)

        result = run_session(scene, i, play, academy_log, FUZZ_MESSAGE_TIMEOUT)
        figures["sessions"] += 1
        figures["crashes"] += "crash" in result
        figures["hangs"] += result["hang"]
        check(result, f"session {i} ({scene}, {kind})")
        outcomes[result["status"]] += 1
        expected = expected_status(kind, hook.fired, scene, i)
        label = f"{kind}: {hook.fired[0] if hook.fired else 'not sent'}"
        classes[label, expected] += 1
        if expected != result["status"]:
            errors = [r.getMessage()[:160] for r in result["log"] if r.levelno >= logging.WARNING]
            wrong.append(f"session {i} ({scene}, {label}, sent {hook.fired[2][:60]!r}...): expected {expected}, "
                         f"got {result['status']}; {errors[-1:]}")
    elapsed = time.monotonic() - started
    print(f"\nacademy fuzz: {figures['sessions']} sessions, {figures['crashes']} crashes, {figures['hangs']} hangs; "
          f"exit statuses {dict(sorted(outcomes.items()))}; {elapsed:.1f} s\n"
          f"(class, expected status): {dict(sorted(classes.items(), key=str))}")
    assert not wrong, f"{len(wrong)} sessions ended otherwise than their mutation requires:\n" + "\n".join(wrong[:30])
    # Every status is required somewhere, and the mutations really reach the validation.
    assert outcomes[3] > SESSIONS // 3, outcomes
    assert outcomes[0] > 0 and outcomes[1] > 0, outcomes


# Known answers: (scene, what, where it goes, the message or bytes, expected status, log text).
ACTION = "prefix+action"
TARGETED = [
    ("3DBall", "string action", ACTION, {"action": {"Ball3DBrain": "left"}}, 3, "action must be a list of 24 floats"),
    ("3DBall", "dict action", ACTION, {"action": {"Ball3DBrain": {"a": 1}}}, 3, "action must be a list"),
    ("3DBall", "null action", ACTION, {"action": {"Ball3DBrain": None}}, 3,
     "has no action for External brain 'Ball3DBrain'"),
    ("3DBall", "action field a list", ACTION, {"action": [1, 2]}, 3,
     '"action" of the action message must be an object'),
    ("3DBall", "message a list", ACTION, [1, 2], 3, 'must be a JSON object with "action"'),
    ("3DBall", "strings in the action", ACTION, {"action": {"Ball3DBrain": ["0.5"] * 24}}, 3, "must hold numbers only"),
    ("3DBall", "nulls in the action", ACTION, {"action": {"Ball3DBrain": [None] * 24}}, 3, "must hold numbers only"),
    ("3DBall", "ragged action", ACTION, {"action": {"Ball3DBrain": [[0.0], [0.0, 1.0]]}}, 3, "ragged or mixed"),
    ("3DBall", "NaN action (literal)", ACTION, b'{"action": {"Ball3DBrain": [NaN]}}', 3, "not valid JSON"),
    ("3DBall", "1e400 action", ACTION, b'{"action": {"Ball3DBrain": [1e400]}}', 3, "not valid JSON"),
    ("3DBall", "wrong size", ACTION, {"action": {"Ball3DBrain": [0.0] * 5}}, 3, "action has 5 floats, expected 24"),
    ("3DBall", "deep action", ACTION, {"action": {"Ball3DBrain": _deep(40, 0.0)}}, 3, "nested 40 levels deep"),
    ("Basic", "discrete action out of range", ACTION, {"action": {"BasicBrain": [2]}}, 3,
     r"whole number in [0, 2), got 2.0"),
    ("Basic", "fractional discrete action", ACTION, {"action": {"BasicBrain": [0.5]}}, 3, "whole number in [0, 2)"),
    ("3DBallHard", "memory a string", ACTION, b'{"action": {"Ball3DHardBrain": [' + b",".join([b"0"] * 24)
     + b']}, "memory": {"Ball3DHardBrain": "x"}}', 3, "memory must be a list"),
    ("3DBall", "value a string", ACTION, {"action": {"Ball3DBrain": [0.0] * 24}, "value": {"Ball3DBrain": "v"}}, 3,
     "value must be a list of 12 floats"),
    ("3DBall", "huge length prefix", "raw-action", struct.pack("<I", 2 ** 32 - 1), 3,
     "length prefix says 4294967295 bytes, more than"),
    ("3DBall", "NaN gravity", "reset", b'{"train_model": true, "parameters": {"gravity": NaN}}', 3,
     "reset parameter 'gravity' must be a finite number, got nan"),
    ("3DBall", "1e400 gravity", "reset", b'{"train_model": true, "parameters": {"gravity": 1e400}}', 3,
     "must be a finite number, got inf"),
    ("3DBall", "-Infinity scale", "reset", b'{"parameters": {"ball_scale": -Infinity}}', 3, "must be a finite number"),
    ("3DBall", "deeply nested reset config", "reset", b'{"parameters": ' + b"[" * 100000 + b"]" * 100000 + b"}", 3,
     "nested deeper than 32 levels"),
    ("3DBall", "oversized reset config", "reset", b'{"pad": "' + b"x" * (2 << 20) + b'"}', 3,
     "longer than 1048576 bytes"),
    ("3DBall", "reset config a list", "reset", b"[1, 2]", 3, "expected the reset configuration (a JSON object)"),
    ("3DBall", "train_model a string", "reset", b'{"train_model": "yes"}', 3, '"train_model": bool'),
    ("3DBall", "parameters a list", "reset", b'{"parameters": [1]}', 3, '"parameters": {...}'),
    ("GridWorld", "grid too big for memory", "reset", b'{"parameters": {"gridSize": 1e30}}', 3,
     "GridAcademy cannot reset with the reset parameters"),
    ("3DBall", "bad RECEIVED", "ack", b"RECEIVEX", 3, "expected RECEIVED after the state of brain 'Ball3DBrain'"),
    # Accepted as Unity would: logged and ignored, or harmless.
    ("3DBall", "string reset parameter", "reset", b'{"parameters": {"gravity": "high"}}', 0, "must be a number"),
    ("3DBall", "unknown reset parameter", "reset", b'{"parameters": {"wind": 3}}', 0, "'wind' is not a parameter"),
    ("3DBall", "action for an unknown brain", ACTION, {"action": {"Ball3DBrain": [0.0] * 24, "Other": "x"}}, 0,
     "quitting"),
    ("3DBall", "per-agent action rows", ACTION, {"action": {"Ball3DBrain": [[0.5, -0.5]] * 12}}, 0, "quitting"),
    # A message begun and never finished: the deadline for the whole message ends the run.
    ("3DBall", "truncated action", "raw-action", struct.pack("<I", 100) + b'{"action"', 1,
     "did not complete it within 1 s"),
    ("3DBall", "truncated reset config", "reset", b'{"train_model": tr', 1, "did not complete it within 1 s"),
]


def targeted_script(where: str, data):
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()

    def play(peer: Peer) -> None:
        params = peer.handshake()
        if where == "reset":
            peer.send("command", b"RESET")
            peer.expect(b"CONFIG_REQUEST")
            peer.send_raw(raw)
            peer.states(params)
        else:
            peer.reset(params, {"train_model": True, "parameters": {}})
        if where in (ACTION, "raw-action"):
            peer.send("command", b"STEP")
            peer.expect(b"STEPPING")
            peer.send_raw(raw if where == "raw-action" else struct.pack("<I", len(raw)) + raw)
            peer.states(params)
        if where == "ack":
            peer.send("command", b"STEP")
            peer.expect(b"STEPPING")
            payload = json.dumps(legit_actions(params, peer.agents, random.Random(0))).encode()
            peer.send_raw(struct.pack("<I", len(payload)) + payload)
            peer.recv_framed()
            peer.send_raw(raw)
            peer.states(params)
        peer.send("command", b"EXIT")
        try:
            peer.recv_exact(1)
        except Hangup:
            pass
    return play


@pytest.mark.parametrize("scene, what, where, data, status, text", TARGETED, ids=[t[1] for t in TARGETED])
def test_known_hostile_messages(academy_log, scene, what, where, data, status, text):
    result = run_session(scene, 0, targeted_script(where, data), academy_log)
    check(result, what)
    messages = [r.getMessage() for r in result["log"]]
    assert result["status"] == status, messages
    assert any(text in m for m in messages), messages


def test_truncated_reset_config_waits_for_the_deadline_not_forever(academy_log):
    """The peer stays connected after half a message: only the academy's own deadline ends it."""
    def play(peer: Peer) -> None:
        peer.handshake()
        peer.send("command", b"RESET")
        peer.expect(b"CONFIG_REQUEST")
        peer.send_raw(b'{"parameters": {"gravity": 9')
        peer.recv_exact(1)  # blocks until the academy hangs up (or PEER_TIMEOUT: then the test fails)

    result = run_session("3DBall", 0, play, academy_log)
    check(result, "stalled reset config")
    assert result["status"] == 1
    assert any("began the reset configuration but did not complete it" in r.getMessage() for r in result["log"])


SUBPROCESS_CASES = [
    ("NaN gravity", "reset", b'{"train_model": true, "parameters": {"gravity": NaN}}', "must be a finite number"),
    ("string action", ACTION, {"action": {"Ball3DBrain": "left"}}, "action must be a list"),
    ("deep reset config", "reset", b'{"parameters": ' + b"[" * 100000 + b"]" * 100000 + b"}", "nested deeper"),
    ("huge length prefix", "raw-action", struct.pack("<I", 2 ** 32 - 1), "length prefix says"),
]


@pytest.mark.parametrize("what, where, data, text", SUBPROCESS_CASES, ids=[c[0] for c in SUBPROCESS_CASES])
def test_python_m_academy_exits_3_with_a_logged_error_and_no_traceback(what, where, data, text):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(30)
        proc = subprocess.Popen([sys.executable, "-m", "academy", "3DBall", "--port", str(server.getsockname()[1])],
                                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            conn, _ = server.accept()
            with conn:
                try:
                    targeted_script(where, data)(Peer(conn))
                except Hangup:
                    pass
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    stderr = err.decode()
    assert proc.returncode == 3, stderr
    assert "protocol error: " in stderr and text in stderr, stderr
    assert "Traceback" not in stderr, stderr


def test_deadline_is_per_message_not_per_recv_and_a_slow_start_is_fine(academy_log):
    """A trainer may pause between messages (and before an ack) for longer than the deadline; a
    message trickled one byte at a time, each within the deadline, still fails as a whole."""
    def patient(peer: Peer) -> None:
        params = peer.handshake()
        time.sleep(3 * FUZZ_MESSAGE_TIMEOUT)       # before the first command
        peer.reset(params, {"train_model": True, "parameters": {}})
        peer.send("command", b"STEP")
        peer.expect(b"STEPPING")
        time.sleep(3 * FUZZ_MESSAGE_TIMEOUT)       # before the action message
        payload = json.dumps(legit_actions(params, peer.agents, random.Random(0))).encode()
        peer.send_raw(struct.pack("<I", len(payload)) + payload)
        peer.recv_framed()
        time.sleep(3 * FUZZ_MESSAGE_TIMEOUT)       # before RECEIVED
        peer.send_raw(b"RECEIVED")
        peer.recv_exact(5)
        peer.send("command", b"EXIT")

    result = run_session("Basic", 0, patient, academy_log, FUZZ_MESSAGE_TIMEOUT)
    check(result, "patient trainer")
    assert result["status"] == 0, [r.getMessage() for r in result["log"]]

    def trickle(peer: Peer) -> None:
        peer.handshake()
        for byte in b"RESET":
            peer.send_raw(bytes([byte]))
            time.sleep(FUZZ_MESSAGE_TIMEOUT / 2)    # each recv returns in time; the message does not
        peer.recv_exact(1)

    result = run_session("Basic", 0, trickle, academy_log, FUZZ_MESSAGE_TIMEOUT)
    check(result, "trickling trainer")
    assert result["status"] == 1
    assert any("began a command (RESET, STEP or EXIT) but did not complete it" in r.getMessage() for r in result["log"])
