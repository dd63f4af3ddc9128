"""API-2's rules for what a trainer sends, restated from the protocol facts for the academy fuzz.

Written apart from ``academy/communicator.py`` (which they judge): how a command, a RECEIVED, the
unframed reset configuration and the length-prefixed action message are read, and which exit
status each outcome is (0: quit, 1: a message that never completes, 3: a protocol error). The
values' own rules are the Academy's, asked through ``value_status``.
"""
from __future__ import annotations

import json
import struct

from academy import load_scene
from academy.academy import Academy

NO_RULE = "no rule"  # an outcome these rules do not decide (never drawn by the seeded sessions)
COMMANDS = (b"RESET", b"STEP", b"EXIT")


def after_message(leftover: bytes) -> object:
    """The status when ``leftover`` bytes follow a complete, valid message: the academy answers with
    the states and reads them as the RECEIVED that acks the first one."""
    if not leftover:
        return None  # nothing extra: the session goes on as scripted
    return NO_RULE if leftover.startswith(b"RECEIVED") else 3


def command_status(sent: bytes, original: bytes) -> object:
    """A command is read until it is one of RESET, STEP, EXIT or cannot become one (then: quit, 0)."""
    for command in COMMANDS:
        if sent.startswith(command):
            leftover = sent[len(command):]
            if command != original:
                return NO_RULE
            if not leftover or command == b"EXIT":
                return 0 if command == b"EXIT" or not leftover else NO_RULE
            if command == b"RESET":  # the rest is read as the reset configuration: not an object
                return 3 if leftover.lstrip()[:1] not in (b"{", b"") else NO_RULE
            length = struct.unpack("<I", leftover[:4])[0] if len(leftover) >= 4 else None
            return 3 if length is not None and length > (64 << 20) else NO_RULE  # STEP: the rest is the prefix
    if any(c.startswith(sent) for c in COMMANDS):  # nothing, or the start of a command: it never completes
        return 1
    return 0


def ack_status(sent: bytes) -> object:
    if len(sent) < 8:
        return 1  # the academy waits for the rest of RECEIVED past its deadline (or until the peer leaves)
    if sent[:8] != b"RECEIVED":
        return 3
    return 0 if sent[8:] in (b"", b"RECEIVED") else NO_RULE  # a second RECEIVED is later read as a command


def json_object_end(data: bytes) -> tuple:
    """Where the first JSON object of ``data`` ends (None if it does not), and its deepest nesting."""
    depth, deepest, in_string, escaped = 0, 0, False, False
    for i, byte in enumerate(data):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in b"{[":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"}]":
            depth -= 1
            if depth == 0:
                return i + 1, deepest
    return None, deepest


_ACADEMIES: dict = {}


def value_status(scene: str, seed: int, check, fresh: bool = True) -> int:
    """3 if an Academy of the scene refuses the decoded message (``check(academy)`` raises), else 0.

    The values' rules are the Academy's (its contract, pinned by ``TARGETED`` below); what the
    seeded sessions check is that the wire brings each message to them and maps the verdict to
    the exit status. A reset needs a fresh scene; an action check changes nothing it could reuse.
    """
    from academy.checks import TrainerMessageError

    if fresh or scene not in _ACADEMIES:
        _ACADEMIES[scene] = Academy(load_scene(scene)(seed))
    try:
        check(_ACADEMIES[scene])
    except TrainerMessageError:
        return 3
    return 0


def reset_status(sent: bytes, scene: str, seed: int) -> object:
    """The unframed reset configuration: one JSON object, at most 32 levels and 1 MiB, then its values."""
    start = len(sent) - len(sent.lstrip())
    if start == len(sent):
        return 1  # nothing arrived: the academy waits until the peer gives up
    if sent[start:start + 1] != b"{":
        return 3
    end, deepest = json_object_end(sent[start:])
    if deepest > 32 or len(sent) > (1 << 20):
        return 3
    if end is None:
        return 1  # the object never closes
    try:
        config = json.loads(sent[start:start + end].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return 3
    train_model, parameters = config.get("train_model", True), config.get("parameters")
    parameters = {} if parameters is None else parameters
    if not isinstance(train_model, bool) or not isinstance(parameters, dict):
        return 3
    status = value_status(scene, seed, lambda a: a.reset(train_model, parameters))
    return status if status else after_message(sent[start + end:]) or 0


def action_status(sent: bytes, scene: str, seed: int) -> object:
    """The action message: a 4-byte length (at most 64 MiB), then that much JSON, then its values."""
    import orjson

    if len(sent) < 4:
        return 1
    (length,) = struct.unpack("<I", sent[:4])
    if length > (64 << 20):
        return 3
    if len(sent) - 4 < length:
        return 1  # the rest never comes: the peer waits for the states
    try:
        message = orjson.loads(sent[4:4 + length])
    except orjson.JSONDecodeError:
        return 3
    if not isinstance(message, dict):
        return 3
    status = value_status(scene, seed, lambda a: a.set_external_actions(message), fresh=False)
    return status if status else after_message(sent[4 + length:]) or 0


def expected_status(kind: str, fired, scene: str, seed: int) -> object:
    """The exit status a session must end with, given the one mutation that was sent."""
    if fired is None:
        return 0
    label, original, sent = fired
    if kind == "command":
        return command_status(sent, original)
    if kind == "ack":
        return ack_status(sent)
    if kind == "reset":
        return reset_status(sent, scene, seed)
    return action_status(sent, scene, seed)
