"""API-2's rules for what an environment sends, restated from the protocol facts for the fuzz's oracle.

Written apart from ``unityagents/wire/api2.py`` (which they judge): strict JSON as the client
reads it, the AcademyParameters' fields, a state message's checks in their order, a camera frame.
Each rule returns the exception that breaking it must raise, or None.
"""
from __future__ import annotations

import io
import json
import struct
from typing import Any, Dict, Optional

import numpy as np
from PIL import Image

from unityagents.exception import UnityMessageException, UnityObservationException

F32_MAX = float(np.finfo(np.float32).max)


INVALID = object()  # what parse returns for bytes that are not one strict JSON document


def _json_int(text: str) -> Any:
    value = int(text)
    return value if -2 ** 63 <= value < 2 ** 64 else float(value)  # past 64 bits: a float, as orjson reads it


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(payload: bytes) -> Any:
    """A part as strict JSON reads it (no NaN/Infinity literals, UTF-8, 64-bit integers); INVALID if it
    is not one JSON document."""
    try:
        return json.loads(payload.decode("utf-8"), parse_int=_json_int, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return INVALID


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and abs(v) <= F32_MAX


def _names(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v) and len(set(v)) == len(v)


def _int(v: Any, low: int, high: int) -> bool:
    return type(v) is int and low <= v <= high


def academy_problem(p: Any) -> Optional[str]:
    """Why AcademyParameters break API-2's rules (the fields' types and ranges); None if they keep them."""
    if not isinstance(p, dict) or p.get("apiNumber") != "API-2":
        return "not API-2 AcademyParameters"
    names, external = p.get("brainNames"), p.get("externalBrainNames")
    if not isinstance(p.get("AcademyName"), str) or not _names(names):
        return "AcademyName or brainNames"
    if external is not None and (not _names(external) or not set(external) <= set(names)):
        return "externalBrainNames"
    reset = p.get("resetParameters")
    if reset is not None and (not isinstance(reset, dict)
                              or not all(_number(v) and not isinstance(v, bool) for v in reset.values())):
        return "resetParameters"
    if p.get("logPath") is not None and not isinstance(p["logPath"], str):
        return "logPath"
    params = p.get("brainParameters")
    if not isinstance(params, list) or len(params) != len(names):
        return "brainParameters"
    for bp in params:
        if not isinstance(bp, dict) or not _int(bp.get("stateSize"), 0, 2 ** 20) \
                or not _int(bp.get("actionSize"), 1, 2 ** 20):
            return "brainParameters sizes"
        for key, default, high in (("memorySize", 0, 2 ** 20), ("actionSpaceType", 0, 1), ("stateSpaceType", 1, 1)):
            if not _int(default if bp.get(key) is None else bp[key], 0, high):
                return key
        cameras = bp.get("cameraResolutions")
        cameras = [] if cameras is None else cameras
        if not isinstance(cameras, list) or len(cameras) > 64 or not all(
                isinstance(c, dict) and isinstance(c.get("blackAndWhite", False), bool)
                and _int(c.get("width"), 1, 8192) and _int(c.get("height"), 1, 8192) for c in cameras):
            return "cameraResolutions"
        descriptions = bp.get("actionDescriptions")
        if descriptions is not None and (not isinstance(descriptions, list)
                                         or not all(isinstance(d, str) for d in descriptions)):
            return "actionDescriptions"
    return None


def widths(bp: Dict[str, Any]) -> tuple:
    """(state width, memory size, action width) of a brain's parameters, with API-2's defaults."""
    def get(key, default):
        return default if bp.get(key) is None else bp[key]

    state = bp["stateSize"] if get("stateSpaceType", 1) == 1 else 1
    action = bp["actionSize"] if get("actionSpaceType", 0) == 1 else 1
    return state, get("memorySize", 0), action


def state_problem(msg: Any, brain: str, bp: Dict[str, Any]) -> Optional[type]:
    """The exception a state message of ``brain`` must raise (None when it is valid), in API-2's
    order of checks: agents, states, rewards, dones, memories, actions."""
    if msg is INVALID or not isinstance(msg, dict) or msg.get("brain_name") != brain:
        return UnityMessageException
    agents = msg.get("agents")
    if not isinstance(agents, list) or not all(type(a) is int for a in agents) or len(set(agents)) != len(agents):
        return UnityMessageException
    n = len(agents)
    state_width, memory_size, action_width = widths(bp)

    def floats(field: str, width: int, optional: bool) -> Optional[type]:
        if field not in msg and not optional:
            return UnityMessageException
        v = msg.get(field)
        if optional and (v is None or v == []):
            return None
        if not isinstance(v, list):
            return UnityMessageException
        if len(v) != n * width:
            return UnityObservationException
        return None if all(_number(x) for x in v) else UnityMessageException

    for field, width in (("states", state_width), ("rewards", 1)):
        problem = floats(field, width, optional=False)
        if problem:
            return problem
    dones = msg.get("dones")
    if not isinstance(dones, list) or not all(type(d) is bool for d in dones):
        return UnityMessageException
    if len(dones) != n:
        return UnityObservationException
    return floats("memories", memory_size, optional=True) or floats("actions", action_width, optional=True)


def png_problem(data: bytes) -> Optional[type]:
    """None when ``data`` is a 4x4 PNG that Pillow decodes, else the exception it must raise."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR" \
            or struct.unpack(">II", data[16:24]) != (4, 4):
        return UnityObservationException
    try:
        with Image.open(io.BytesIO(data)) as img:
            pixels = np.asarray(img.convert("RGB"))
    except Exception:  # Pillow raises several types for bad images
        return UnityObservationException
    return None if pixels.shape == (4, 4, 3) else UnityObservationException
