"""Issue 13, item 1: the client survives whatever an API-2 environment sends, and says why it stopped.

A scripted API-2 environment peer (written here from the protocol facts, sharing no code with
``unityagents``) runs in a thread and connects to a ``UnityEnvironment`` whose launch is replaced
by starting that thread. It plays AcademyParameters, the reset and two steps, with one thing
mutated per session: a field of the AcademyParameters or of a state message (hostile values at a
random place: null, strings, lists, objects, NaN, 1e39, deep nesting, wrong sizes, duplicate ids),
a PNG frame (wrong or huge dimensions, corrupt bytes), the done flag, a length prefix (lies, huge
values), a truncation, or a message trickled one byte at a time.

Each session must end before its deadline as its mutation's class requires (``expected_outcome``,
which restates API-2's rules independently of ``unityagents``): a size lie in a state message
raises ``UnityObservationException``, a NaN, an infinity or a float32 overflow
``UnityMessageException``, an absurd length prefix ``UnityMessageException`` from the prefix alone,
a trickle past the deadline ``UnityTimeOutException``, a frame of the wrong size or not a PNG
``UnityObservationException``; a change the rules allow (a grey PNG, a harmless field) must succeed,
and a session that succeeds must return exactly what was sent: states ``(n, stateSize)``, memories
``(n, memorySize)``, frames ``(n, H, W, C)``, the agents, rewards and done flags.
"""
from __future__ import annotations

import copy
import io
import json
import random
import socket
import struct
import threading
import time
import traceback
from collections import Counter
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import pytest
from PIL import Image

import unityagents.environment
from tests.api2_rules import INVALID, academy_problem, png_problem, state_problem, widths
from tests.api2_rules import parse as _parse_bytes
from tests.conftest import free_port
from tests.step_view import InfoView
from unityagents import UnityEnvironment, UnityException
from unityagents.exception import (
    UnityCommunicationException,
    UnityEnvironmentException,
    UnityMessageException,
    UnityObservationException,
    UnityTimeOutException,
)

SESSIONS = 320
TIMEOUT_WAIT = 0.3        # the client's per-message deadline in the fuzz
SESSION_DEADLINE = 2.0    # one session: handshake, reset, two steps, close (a trickle lasts 2.5 s)
PEER_TIMEOUT = 3.0        # how long the peer waits for the client before it hangs up
TRICKLE_SECONDS = 0.05    # one byte per this many seconds when trickling (a stand-in for 1 byte/s)
TRICKLE_LIMIT = 2.5       # the peer gives up trickling after this long (so an old client ends too)

ACADEMY: Dict[str, Any] = {
    "AcademyName": "FuzzAcademy",
    "apiNumber": "API-2",
    "logPath": "",
    "resetParameters": {"gravity": 9.81},
    "brainNames": ["Cam", "Grid"],
    "externalBrainNames": ["Cam", "Grid"],
    "brainParameters": [
        {"stateSize": 3, "actionSize": 2, "memorySize": 2,
         "cameraResolutions": [{"width": 4, "height": 4, "blackAndWhite": False}],
         "actionDescriptions": ["x", "z"], "actionSpaceType": 1, "stateSpaceType": 1},
        {"stateSize": 5, "actionSize": 3, "memorySize": 0, "cameraResolutions": [],
         "actionDescriptions": ["a", "b", "c"], "actionSpaceType": 0, "stateSpaceType": 0},
    ],
}
DEEP = "[" * 100000 + "]" * 100000  # deeper than any JSON parser's recursion
EVIL: List[Any] = [None, "x", "1.5", 7, -1, 0, 1e39, -1e39, 10 ** 30, True, [], {}, [1, 2], {"a": 1},
                   float("nan"), float("inf"), "DEEP", 2 ** 31, [None], ["x"], [[1, 2]]]


def png(width: int, height: int, seed: int = 0) -> bytes:
    pixels = (np.arange(width * height * 3).reshape(height, width, 3) * (7 + seed)) % 256
    out = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8), "RGB").save(out, format="PNG")
    return out.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A small valid 4x4 PNG whose IHDR says width x height (a decompression bomb's header)."""
    data = bytearray(png(4, 4))
    struct.pack_into(">II", data, 16, width, height)
    return bytes(data)


def dumps(value: Any) -> bytes:
    """JSON as a hostile environment may write it: NaN/Infinity literals, a deep-nesting marker."""
    return json.dumps(value).replace('"DEEP"', DEEP).encode()


def framed(payload: bytes) -> bytes:
    return struct.pack("<I", len(payload)) + payload


def state(brain: str, step: int) -> Dict[str, Any]:
    if brain == "Cam":
        return {"brain_name": "Cam", "agents": [3, 9], "states": [step, 1.5, 2, 3, 4, 5],
                "rewards": [0.5, -1], "actions": [0.0] * 4, "memories": [0.0] * 4, "dones": [False, step == 2]}
    return {"brain_name": "Grid", "agents": [1], "states": [step], "rewards": [0.0], "actions": [1],
            "memories": [], "dones": [False]}


class Hangup(Exception):
    """The client closed the connection or stopped answering: the peer's script ends here."""


class Peer:
    """The environment's end: it connects, sends, waits for commands; ``mutate`` may change one part.

    ``mutate(kind, step, value)`` gets each part before it is sent (kind ``academy``, ``state``,
    ``png``, ``done``; value a dict or bytes) and returns what to send: bytes, or a ``Send`` with
    special handling (no frame, a trickle, a hang-up after it).
    """

    def __init__(self, port: int, mutate: Callable[[str, int, Any], Any]):
        self.port, self.mutate = port, mutate
        self.buf = b""
        self.sock: Optional[socket.socket] = None
        self.error: Optional[BaseException] = None
        #: The state messages as sent, parsed (None when they do not parse): ``{(step, brain): dict}``.
        self.sent_states: Dict[tuple, Any] = {}
        self.sent_academy: Any = None

    def run(self) -> None:
        try:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=PEER_TIMEOUT)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            academy = self.emit(self.mutate("academy", 0, copy.deepcopy(ACADEMY)), framed_=False)
            self.sent_academy = _parse(academy)
            self.wait_for(b"RESET")
            self.sock.sendall(b"CONFIG_REQUEST")
            self.wait_for(b"}}")
            self.states(0)
            for step in (1, 2):
                self.wait_for(b"STEP")
                self.sock.sendall(b"STEPPING")
                (length,) = struct.unpack("<I", self.read(4))
                self.read(length)
                self.states(step)
            self.wait_for(b"EXIT")
        except (Hangup, OSError):
            pass
        except BaseException as e:  # a bug of the peer itself must fail the test, not pass silently
            self.error = e
        finally:
            if self.sock is not None:
                self.sock.close()

    def states(self, step: int) -> None:
        for brain in ("Cam", "Grid"):
            self.sent_states[(step, brain)] = _parse(self.emit(self.mutate("state", step, state(brain, step))))
            self.read_ack()
            if brain == "Cam":
                for agent in range(2):
                    self.emit(self.mutate("png", step, png(4, 4, agent)))
                    self.read_ack()
        self.emit(self.mutate("done", step, b"True" if step == 2 else b"False"), framed_=False)

    def emit(self, what: Any, framed_: bool = True) -> bytes:
        """Send one part; return its payload (without the length prefix)."""
        if isinstance(what, dict):
            what = dumps(what)
        if isinstance(what, Send):
            data, framed_ = what.data, what.framed
        else:
            data = what
        payload = data
        if framed_:
            data = framed(data)
        if isinstance(what, Send) and what.trickle:
            start = time.monotonic()
            for i in range(len(data)):
                if time.monotonic() - start > TRICKLE_LIMIT:
                    raise Hangup()
                self.sock.sendall(data[i:i + 1])
                time.sleep(TRICKLE_SECONDS)
        else:
            self.sock.sendall(data)
        if isinstance(what, Send) and what.hangup:
            raise Hangup()
        return payload

    def read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Hangup()
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_ack(self) -> None:
        if self.read(8) != b"RECEIVED":
            raise Hangup()

    def wait_for(self, token: bytes) -> None:
        while token not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Hangup()
            self.buf += chunk
        self.buf = self.buf[self.buf.index(token) + len(token):]


class Send:
    """Bytes to send with special handling; ``label`` names the byte-level mutation that made them."""

    def __init__(self, data: bytes, framed: bool = True, trickle: bool = False, hangup: bool = False,
                 label: str = "", lie: Optional[int] = None):
        self.data, self.framed, self.trickle, self.hangup = data, framed, trickle, hangup
        self.label, self.lie = label, lie


def _paths(value: Any, prefix=()) -> List[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


def _get(value: Any, path: tuple) -> Any:
    for p in path:
        value = value[p]
    return value


def _set(value: Any, path: tuple, new: Any, delete: bool = False) -> Any:
    if not path:
        return new
    target = _get(value, path[:-1])
    if delete and isinstance(target, dict):
        del target[path[-1]]
    elif delete:
        target.pop(path[-1])
    else:
        target[path[-1]] = new
    return value


def _mutate_json(rng: random.Random, value: Dict[str, Any], skip=()) -> tuple:
    """One hostile change at a random place of a JSON document: (the document, the change's class)."""
    paths = [p for p in _paths(value) if p and p[0] not in skip]
    path = rng.choice(paths)
    roll = rng.random()
    if roll < 0.15:
        return _set(value, path, None, delete=True), "deleted field"
    target = _get(value, path)
    if roll < 0.3 and isinstance(target, list):
        # A size lie: one element more (a copy of the last, a new id for agents) or one fewer,
        # never down to an empty list (which some fields allow).
        if rng.random() < 0.5 or len(target) < 2:
            extra = copy.deepcopy(target[-1]) if target else 1.0
            if path[-1] == "agents":
                extra = max(target) + 1
            return _set(value, path, target + [extra]), "size lie"
        return _set(value, path, target[:-1]), "size lie"
    return _set(value, path, copy.deepcopy(rng.choice(EVIL))), "hostile value"


def _mutate_bytes(rng: random.Random, data: bytes, framed_: bool) -> Send:
    roll = rng.random()
    if roll < 0.3:  # truncated, then the peer hangs up (or stalls, when it keeps the socket open)
        cut = rng.randrange(0, max(1, len(data)))
        return Send(data[:cut], framed=framed_, hangup=rng.random() < 0.7, label="truncated")
    if roll < 0.45 and framed_:  # a length prefix that lies (short or absurd), without a frame
        lie = rng.choice([len(data) + 10, 2 ** 31, 2 ** 32 - 1, 10 ** 8, max(0, len(data) - 3)])
        return Send(struct.pack("<I", lie) + data, framed=False, hangup=rng.random() < 0.5, label="length lie",
                    lie=lie)
    if roll < 0.65:  # flipped bytes
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            if flipped:
                flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        return Send(bytes(flipped), framed=framed_, label="flipped")
    if roll < 0.75:
        return Send(data, framed=framed_, trickle=True, label="trickled")
    return Send(bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))), framed=framed_, label="garbage")


class Mutation:
    """One mutation, at one place (a kind of part, a step and an occurrence), chosen by ``seed``.

    Called by the peer with each part before it is sent; once it fired, ``label`` names its class
    (``state: size lie``, ``png: flipped``, ...), ``sent`` holds what replaced the part, and
    ``brain`` the brain whose state message it was.
    """

    def __init__(self, seed: int):
        rng = self.rng = random.Random(seed)
        self.kind = rng.choice(["academy"] * 3 + ["state"] * 4 + ["png"] * 2 + ["done"])
        self.step = 0 if self.kind == "academy" else rng.randrange(3)
        self.occurrence = rng.randrange(2 if self.kind in ("state", "png") else 1)
        self.byte_level = rng.random() < 0.3
        self.choice = rng.choice(["dims", "bomb", "not png", "gray"]) if self.kind == "png" else None
        self.seen = Counter()
        self.label: Optional[str] = None
        self.sent: Any = None
        self.brain: Optional[str] = None

    def __call__(self, part: str, at_step: int, value: Any) -> Any:
        if part != self.kind or at_step != self.step:
            return value
        self.seen[part] += 1
        if self.seen[part] - 1 != self.occurrence:
            return value
        if part == "state":
            self.brain = value["brain_name"]
        self.sent = self._mutate(part, value)
        return self.sent

    def _mutate(self, part: str, value: Any) -> Any:
        rng = self.rng
        if self.byte_level:
            data = value if isinstance(value, bytes) else dumps(value)
            send = _mutate_bytes(rng, data, part in ("state", "png"))
            self.label = f"{part}: {send.label}"
            return send
        if part == "png":
            self.label = f"png: {self.choice}"
            if self.choice == "dims":
                return png(rng.choice([3, 5, 8]), rng.choice([4, 2, 9]))
            if self.choice == "bomb":
                return png_claiming(10000, 10000)
            if self.choice == "gray":
                out = io.BytesIO()
                Image.new("L", (4, 4)).save(out, format="PNG")
                return out.getvalue()
            return b"GIF89a" + value[6:]
        if part == "done":
            self.label = "done: not a flag"
            return Send(rng.choice([b"true", b"Tru", b"FALSE", b"null", b"1", b"Fals", b""]), framed=False,
                        hangup=rng.random() < 0.5)
        skip = ("apiNumber",) if part == "academy" else ()
        if part == "state" and rng.random() < 0.25:  # cross-field lies: duplicate ids, swapped brains
            special = rng.choice(["dup", "other", "unknown", "nan", "big"])
            self.label = f"state: {special}"
            if special == "dup":
                value["agents"] = [value["agents"][0]] * len(value["agents"])
                if len(value["agents"]) < 2:
                    value["agents"] = [value["agents"][0]] * 2  # a lone agent twice: still a repeated id
            elif special == "other":
                value["brain_name"] = "Grid" if value["brain_name"] == "Cam" else "Cam"
            elif special == "unknown":
                value["brain_name"] = "Nobody"
            elif special == "nan":
                field = rng.choice([f for f in ("states", "rewards", "memories", "actions") if value[f]])
                value[field][0] = rng.choice([float("nan"), float("inf"), -float("inf")])
            else:
                value["states"][0] = rng.choice([1e39, -3.5e38, 1e308])
            return value
        mutated, change = _mutate_json(rng, value, skip)
        self.label = f"{part}: {change}"
        return mutated


def make_mutation(seed: int) -> Mutation:
    return Mutation(seed)


# ------------------------------------------------------------------ the oracle
def _parse(payload: Any) -> Any:
    """A part as the client's JSON reader sees it (a dict is first written as the peer writes it)."""
    return _parse_bytes(dumps(payload) if isinstance(payload, dict) else payload)


def session_with(academy: Any) -> tuple:
    """What a session with these AcademyParameters (the rest unmutated) must end in."""
    if academy_problem(academy):
        return "error", UnityEnvironmentException
    if academy["brainNames"] != ["Cam", "Grid"]:
        return "error", UnityException  # the peer's messages name brains the client was not told of
    cam, grid = academy["brainParameters"]
    cameras = cam.get("cameraResolutions") or []
    if len(cameras) != 1 or (cameras[0]["width"], cameras[0]["height"]) != (4, 4) or grid.get("cameraResolutions"):
        return "error", UnityException  # the frames the peer sends are not the ones declared
    for step in range(3):
        for brain, bp in (("Cam", cam), ("Grid", grid)):
            problem = state_problem(state(brain, step), brain, bp)
            if problem:
                return "error", problem
    return "ok", None


#: Mutation classes whose outcome is fixed by their kind, whatever the oracle computes.
CLASS_RULES = {
    "state: size lie": UnityObservationException, "state: nan": UnityMessageException,
    "state: big": UnityMessageException, "state: dup": UnityMessageException,
    "state: unknown": UnityMessageException, "state: other": UnityMessageException,
    "png: dims": UnityObservationException, "png: bomb": UnityObservationException,
    "png: not png": UnityObservationException, "done: not a flag": UnityException,
}


def expected_outcome(m: Mutation, peer: "Peer") -> tuple:
    """``("ok", None)``, ``("error", exception class or classes)``, or ``("timing",
    UnityTimeOutException)`` when only the machine's speed decides between success and the deadline."""
    expected, cls = _expected(m)
    send = m.sent if isinstance(m.sent, Send) else None
    if send is not None and send.hangup and not (m.kind == "done" and m.step == 2):
        # The peer hangs up after this part: the session cannot complete. A message that is complete
        # and wrong fails as such, unless the client notices the closed connection first.
        return "error", (UnityException if expected == "ok" else (cls, UnityCommunicationException))
    return expected, cls


def _expected(m: Mutation) -> tuple:
    if m.label is None:
        return "ok", None
    send = m.sent if isinstance(m.sent, Send) else None
    payload = send.data if send is not None else m.sent
    byte_class = send.label if send is not None else ""
    if byte_class == "trickled":
        on_wire = len(payload) + (4 if send.framed else 0)
        if on_wire * TRICKLE_SECONDS >= 2 * TIMEOUT_WAIT:
            return "error", UnityTimeOutException
        return "timing", UnityTimeOutException
    if byte_class == "length lie":
        if send.lie >= 10 ** 8:  # more than any message of these brains can need: refused from the prefix
            return "error", UnityMessageException
        if send.lie > len(payload) - 4:  # the peer waits for the ack of a message the client still reads
            return "error", (UnityTimeOutException, UnityCommunicationException)
        return "error", (UnityMessageException if m.kind == "state" else UnityException)
    if m.kind == "academy":
        academy = _parse(payload)
        if byte_class in ("truncated", "garbage") or academy is INVALID:
            return "error", UnityException  # invalid, or incomplete JSON: the client may wait for the rest
        return session_with(academy)
    if m.kind == "done":
        return ("ok", None) if payload == (b"True" if m.step == 2 else b"False") else ("error", UnityException)
    if m.kind == "png":
        problem = png_problem(payload)
        return ("error", problem) if problem else ("ok", None)
    problem = state_problem(_parse(payload), m.brain, ACADEMY["brainParameters"][m.brain == "Grid"])
    if m.label in CLASS_RULES:
        assert problem is not None and issubclass(problem, CLASS_RULES[m.label]), (m.label, problem)
    return ("error", problem) if problem else ("ok", None)


def check_info(infos: Dict[str, Any], step: int, peer: "Peer") -> Optional[str]:
    """Why what the client returned is not exactly what the peer sent (None when it is)."""
    academy = peer.sent_academy
    if set(infos) != {"Cam", "Grid"}:
        return f"brains {sorted(infos)}"
    for b, bp in zip(academy["brainNames"], academy["brainParameters"]):
        info, sent = infos[b], peer.sent_states[(step, b)]
        n = len(sent["agents"])
        state_width, memory_size, _ = widths(bp)
        if info.agents != sent["agents"] or not all(type(a) is int for a in info.agents):
            return f"{b}: agents {info.agents!r}, sent {sent['agents']!r}"
        expected = np.asarray(sent["states"], np.float32).reshape(n, state_width)
        if info.states.dtype != np.float32 or info.states.shape != (n, state_width) \
                or not np.array_equal(info.states, expected):
            return f"{b}: states {info.states!r}, sent {expected!r}"
        if info.rewards != [float(r) for r in sent["rewards"]] or not all(type(r) is float for r in info.rewards):
            return f"{b}: rewards {info.rewards!r}, sent {sent['rewards']!r}"
        if info.local_done != sent["dones"]:
            return f"{b}: dones {info.local_done!r}, sent {sent['dones']!r}"
        if info.memories is None or info.memories.shape != (n, memory_size) \
                or not np.array_equal(info.memories, np.asarray(sent.get("memories") or np.zeros((n, memory_size)),
                                                                np.float32).reshape(n, memory_size)):
            return f"{b}: memories {info.memories!r}"
        cameras = bp.get("cameraResolutions") or []
        shapes = [(n, c["height"], c["width"], 1 if c.get("blackAndWhite") else 3) for c in cameras]
        if [o.shape for o in info.observations] != shapes:
            return f"{b}: observations {[o.shape for o in info.observations]}, expected {shapes}"
        for o in info.observations:
            if not (np.all(o >= 0) and np.all(o <= 1)):
                return f"{b}: observation values outside 0..1"
    return None


def run_session(monkeypatch: pytest.MonkeyPatch, port: int, mutate: Callable) -> tuple:
    """(outcome, detail, seconds, exception, peer): outcome is ``ok``, ``unity`` (a UnityException),
    ``crash``, ``bad data`` (success with data other than what was sent) or ``hang``."""
    peer = Peer(port, mutate)
    thread = threading.Thread(target=peer.run, daemon=True)

    def launch(*args):
        thread.start()
        return None, None  # no process to watch, no log

    monkeypatch.setattr(unityagents.environment, "launch", launch)
    t0 = time.monotonic()
    outcome, detail, env, error = "ok", "", None, None
    try:
        env = InfoView(UnityEnvironment("FuzzPeer", base_port=port, timeout_wait=TIMEOUT_WAIT, start_timeout=5))
        infos = env.reset()
        for step in range(3):
            bad = check_info(infos, step, peer)
            if bad:
                outcome, detail = "bad data", bad
                break
            if step < 2:
                actions = {b: np.zeros(len(infos[b].agents) * env.brains[b].action_width)
                           for b in env.external_brain_names}
                infos = env.step(actions)
    except UnityException as e:
        outcome, detail, error = "unity", f"{type(e).__name__}: {str(e)[:200]}", e
    except Exception as e:
        outcome, detail = "crash", "".join(traceback.format_exception_only(type(e), e))[:300]
    finally:
        if env is not None:
            env.close()
    seconds = time.monotonic() - t0
    thread.join(PEER_TIMEOUT + TRICKLE_LIMIT + 1)
    if peer.error is not None:
        raise peer.error
    if seconds > SESSION_DEADLINE:
        outcome, detail = "hang", f"{seconds:.1f} s ({outcome}: {detail})"
    return outcome, detail, seconds, error, peer


def test_an_unmutated_session_succeeds_with_exactly_what_was_sent(monkeypatch):
    outcome, detail, _, _, peer = run_session(monkeypatch, free_port(), lambda kind, step, value: value)
    assert outcome == "ok", detail
    assert sorted(peer.sent_states) == [(s, b) for s in range(3) for b in ("Cam", "Grid")]


@pytest.mark.slow
def test_seeded_mutations_end_as_their_class_requires_before_the_deadline(monkeypatch):
    """Each mutation's expected outcome comes from API-2's rules restated above (``expected_outcome``):
    a size lie raises UnityObservationException, a NaN or a float32 overflow UnityMessageException,
    a trickle UnityTimeOutException...; a session that may succeed must return exactly what was sent."""
    results, classes = Counter(), Counter()
    failures = []
    port = free_port()
    for seed in range(SESSIONS):
        mutation = make_mutation(seed)
        outcome, detail, seconds, error, peer = run_session(monkeypatch, port, mutation)
        expected, cls = expected_outcome(mutation, peer)
        if isinstance(error, UnityTimeOutException) and expected != "timing" and (
                expected == "ok" or not isinstance(error, cls)):
            # A 0.3 s deadline per message can pass on a loaded machine: the same mutation once more.
            mutation = make_mutation(seed)
            outcome, detail, seconds, error, peer = run_session(monkeypatch, port, mutation)
            expected, cls = expected_outcome(mutation, peer)
        results[outcome] += 1
        classes[mutation.label] += 1
        cls_name = getattr(cls, "__name__", cls)
        where = f"seed {seed} ({mutation.label}, step {mutation.step})"
        if outcome in ("crash", "bad data", "hang"):
            failures.append(f"{where}: {outcome}: {detail}")
        elif expected == "ok" and outcome != "ok":
            failures.append(f"{where}: expected success with what was sent, got {detail}")
        elif expected == "error" and not isinstance(error, cls):
            failures.append(f"{where}: expected {cls_name}, got {outcome}: {detail}")
        elif expected == "timing" and outcome != "ok" and not isinstance(error, cls):
            failures.append(f"{where}: expected success or {cls.__name__}, got {detail}")
    print(f"\nfuzz: {SESSIONS} sessions: {dict(results)}\nclasses: {dict(sorted(classes.items(), key=str))}")
    assert not failures, f"{len(failures)} of {SESSIONS} sessions failed:\n" + "\n".join(failures[:40])
    # The oracle's classes were all exercised, successes included.
    for label in ("state: size lie", "state: nan", "state: hostile value", "state: length lie", "png: flipped",
                  "academy: hostile value", "png: gray", "done: not a flag"):
        assert classes[label] > 0, (label, classes)
    assert results["unity"] > SESSIONS // 3 and results["ok"] > 0, results
