"""Issue 13, item 1: the client survives whatever an API-2 environment sends, and says why it stopped.

A scripted API-2 environment peer (written here from the protocol facts, sharing no code with
``unityagents``) runs in a thread and connects to a ``UnityEnvironment`` whose launch is replaced
by starting that thread. It plays AcademyParameters, the reset and two steps, with one thing
mutated per session: a field of the AcademyParameters or of a state message (hostile values at a
random place: null, strings, lists, objects, NaN, 1e39, deep nesting, wrong sizes, duplicate ids),
a PNG frame (wrong or huge dimensions, corrupt bytes), the done flag, a length prefix (lies, huge
values), a truncation, or a message trickled one byte at a time.

Each session must end in success or a ``UnityException`` subclass before its deadline, never in
another exception; a session that succeeds must have returned only finite, well-typed data.
"""
from __future__ import annotations

import copy
import io
import json
import math
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
from conftest import free_port
from PIL import Image

import unityagents.environment
from unityagents import UnityEnvironment, UnityException

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

    def run(self) -> None:
        try:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=PEER_TIMEOUT)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.emit(self.mutate("academy", 0, copy.deepcopy(ACADEMY)), framed_=False)
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
            self.emit(self.mutate("state", step, state(brain, step)))
            self.read_ack()
            if brain == "Cam":
                for agent in range(2):
                    self.emit(self.mutate("png", step, png(4, 4, agent)))
                    self.read_ack()
        self.emit(self.mutate("done", step, b"True" if step == 2 else b"False"), framed_=False)

    def emit(self, what: Any, framed_: bool = True) -> None:
        if isinstance(what, dict):
            what = dumps(what)
        if isinstance(what, Send):
            data, framed_ = what.data, what.framed
        else:
            data = what
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
    """Bytes to send with special handling."""

    def __init__(self, data: bytes, framed: bool = True, trickle: bool = False, hangup: bool = False):
        self.data, self.framed, self.trickle, self.hangup = data, framed, trickle, hangup


def _paths(value: Any, prefix=()) -> List[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


def _set(value: Any, path: tuple, new: Any, delete: bool = False) -> Any:
    if not path:
        return new
    target = value
    for p in path[:-1]:
        target = target[p]
    if delete and isinstance(target, dict):
        del target[path[-1]]
    elif delete:
        target.pop(path[-1])
    else:
        target[path[-1]] = new
    return value


def _mutate_json(rng: random.Random, value: Dict[str, Any], skip=()) -> Any:
    """One hostile change at a random place of a JSON document."""
    paths = [p for p in _paths(value) if p and p[0] not in skip]
    path = rng.choice(paths)
    roll = rng.random()
    if roll < 0.15:
        return _set(value, path, None, delete=True)
    if roll < 0.3:
        target = value
        for p in path:
            target = target[p]
        if isinstance(target, list):  # a size lie: one more or one less
            return _set(value, path, target + [1.0] if rng.random() < 0.5 or not target else target[:-1])
    return _set(value, path, copy.deepcopy(rng.choice(EVIL)))


def _mutate_bytes(rng: random.Random, data: bytes, framed_: bool) -> Send:
    roll = rng.random()
    if roll < 0.3:  # truncated, then the peer hangs up (or stalls, when it keeps the socket open)
        cut = rng.randrange(0, max(1, len(data)))
        return Send(data[:cut], framed=framed_, hangup=rng.random() < 0.7)
    if roll < 0.45 and framed_:  # a length prefix that lies (short or absurd), without a frame
        lie = rng.choice([len(data) + 10, 2 ** 31, 2 ** 32 - 1, 10 ** 8, max(0, len(data) - 3)])
        return Send(struct.pack("<I", lie) + data, framed=False, hangup=rng.random() < 0.5)
    if roll < 0.65:  # flipped bytes
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            if flipped:
                flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        return Send(bytes(flipped), framed=framed_)
    if roll < 0.75:
        return Send(data, framed=framed_, trickle=True)
    return Send(bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))), framed=framed_)


def make_mutation(seed: int) -> Callable[[str, int, Any], Any]:
    """One mutation, at one place (a kind of part, a step and an occurrence), chosen by ``seed``."""
    rng = random.Random(seed)
    kind = rng.choice(["academy"] * 3 + ["state"] * 4 + ["png"] * 2 + ["done"])
    step = 0 if kind == "academy" else rng.randrange(3)
    occurrence = rng.randrange(2 if kind in ("state", "png") else 1)
    byte_level = rng.random() < 0.3
    if kind == "png" and not byte_level:
        choice = rng.choice(["dims", "bomb", "not png", "gray"])
    else:
        choice = None
    seen = Counter()

    def mutate(part: str, at_step: int, value: Any) -> Any:
        if part != kind or at_step != step:
            return value
        seen[part] += 1
        if seen[part] - 1 != occurrence:
            return value
        if part == "png":
            if byte_level:
                return _mutate_bytes(rng, value, True)
            if choice == "dims":
                return png(rng.choice([3, 5, 8]), rng.choice([4, 2, 9]))
            if choice == "bomb":
                return png_claiming(10000, 10000)
            if choice == "gray":
                out = io.BytesIO()
                Image.new("L", (4, 4)).save(out, format="PNG")
                return out.getvalue()
            return b"GIF89a" + value[6:]
        if part == "done":
            if byte_level:
                return _mutate_bytes(rng, value, False)
            return Send(rng.choice([b"true", b"Tru", b"FALSE", b"null", b"1", b"Fals", b""]), framed=False,
                        hangup=rng.random() < 0.5)
        if byte_level:
            return _mutate_bytes(rng, dumps(value), part != "academy")
        skip = ("apiNumber",) if part == "academy" else ()
        if part == "state" and rng.random() < 0.25:  # cross-field lies: duplicate ids, swapped brains
            special = rng.choice(["dup", "other", "unknown", "nan", "big"])
            if special == "dup":
                value["agents"] = [value["agents"][0]] * len(value["agents"])
            elif special == "other":
                value["brain_name"] = "Grid" if value["brain_name"] == "Cam" else "Cam"
            elif special == "unknown":
                value["brain_name"] = "Nobody"
            elif special == "nan":
                field = rng.choice(["states", "rewards", "memories", "actions"])
                if value[field]:
                    value[field][0] = rng.choice([float("nan"), float("inf"), -float("inf")])
            else:
                value["states"][0] = rng.choice([1e39, -3.5e38, 1e308])
            return value
        return _mutate_json(rng, value, skip)

    return mutate


def check_info(infos: Dict[str, Any]) -> Optional[str]:
    """Why what the client returned is not finite, well-typed data (None when it is)."""
    for b, info in infos.items():
        n = len(info.agents)
        if len(set(info.agents)) != n or not all(type(a) is int for a in info.agents):
            return f"{b}: agents {info.agents!r}"
        if info.states.dtype != np.float32 or info.states.shape[0] != n or not np.all(np.isfinite(info.states)):
            return f"{b}: states {info.states!r}"
        if len(info.rewards) != n or not all(isinstance(r, float) and math.isfinite(r) for r in info.rewards):
            return f"{b}: rewards {info.rewards!r}"
        if len(info.local_done) != n or not all(type(d) is bool for d in info.local_done):
            return f"{b}: dones {info.local_done!r}"
        if info.memories is not None and not np.all(np.isfinite(info.memories)):
            return f"{b}: memories {info.memories!r}"
        for o in info.observations:
            if o.shape[0] != n or not np.all(np.isfinite(o)):
                return f"{b}: observation {o.shape}"
    if set(infos) != {"Cam", "Grid"}:
        return f"brains {sorted(infos)}"
    return None


def run_session(monkeypatch: pytest.MonkeyPatch, port: int, mutate: Callable) -> tuple:
    """(outcome, detail, seconds): outcome is ``ok``, ``unity`` (a UnityException), ``crash``,
    ``bad data`` (success with non-finite or ill-typed data) or ``hang``."""
    peer = Peer(port, mutate)
    thread = threading.Thread(target=peer.run, daemon=True)

    def launch(*args):
        thread.start()
        return None, None  # no process to watch, no log

    monkeypatch.setattr(unityagents.environment, "launch", launch)
    t0 = time.monotonic()
    outcome, detail, env = "ok", "", None
    try:
        env = UnityEnvironment("FuzzPeer", base_port=port, timeout_wait=TIMEOUT_WAIT, start_timeout=5)
        infos = env.reset()
        for _ in range(2):
            bad = check_info(infos)
            if bad:
                outcome, detail = "bad data", bad
                break
            actions = {b: np.zeros(len(infos[b].agents) * env.brains[b].action_width) for b in env.external_brain_names}
            infos = env.step(actions)
        else:
            bad = check_info(infos)
            if bad:
                outcome, detail = "bad data", bad
    except UnityException as e:
        outcome, detail = "unity", f"{type(e).__name__}: {str(e)[:200]}"
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
    return outcome, detail, seconds



def test_an_unmutated_session_succeeds(monkeypatch):
    outcome, detail, _ = run_session(monkeypatch, free_port(), lambda kind, step, value: value)
    assert outcome == "ok", detail


def test_seeded_mutations_end_in_success_or_a_unity_exception_before_the_deadline(monkeypatch):
    results = Counter()
    failures = []
    port = free_port()
    for seed in range(SESSIONS):
        outcome, detail, seconds = run_session(monkeypatch, port, make_mutation(seed))
        results[outcome] += 1
        if outcome in ("crash", "bad data", "hang"):
            failures.append(f"seed {seed}: {outcome}: {detail}")
    print(f"\nfuzz: {SESSIONS} sessions: {dict(results)}")
    assert not failures, f"{len(failures)} of {SESSIONS} sessions failed:\n" + "\n".join(failures[:40])
    assert results["unity"] > SESSIONS // 3, results  # the mutations really reach the client
    assert results["ok"] > 0, results
