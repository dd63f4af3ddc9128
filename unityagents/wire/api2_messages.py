"""Checks of everything an API-2 environment sends, made before any of it is used.

Every field's type, size and range (``validate_academy_parameters``, ``steps_of``),
finiteness within float32 (NaN, infinities and overflows are the environment's error), and a
camera frame's PNG header before it is decoded (``decode_api2_png``). The size limits
(``state_message_limit``, ``png_limit``) let ``API2Communicator`` refuse a message from its length
prefix, before reading it. Any failure is a ``UnityException`` subclass
(``UnityMessageException`` for a malformed field) naming the brain, the field, what was expected
and what arrived.
"""
from __future__ import annotations

import io
import math
import reprlib
from typing import Any, Callable, Dict, List, Optional

import numpy as np
from PIL import Image

from unityagents.base_env import BehaviorSteps, DecisionSteps, TerminalSteps
from unityagents.brain import BrainParameters
from unityagents.exception import UnityMessageException, UnityObservationException
from unityagents.wire.base import F32_MAX, MAX_AGENTS, MAX_BRAIN_SIZE, MAX_CAMERA_SIDE, Handshake, png_size

#: Bytes of JSON one number may take in a state message (``-1.2345678901234567E+38,`` and spaces).
_BYTES_PER_NUMBER = 32
_BYTES_PER_AGENT = 128  # its id, its done flag, and the separators

_repr = reprlib.Repr()
_repr.maxstring, _repr.maxother, _repr.maxlist, _repr.maxdict, _repr.maxlevel = 60, 60, 8, 6, 3


def show(value: Any) -> str:
    """A short, bounded repr of what arrived (safe for deep nesting and huge values)."""
    return f"{type(value).__name__} {_repr.repr(value)}"


def _bad(brain: Optional[str], field: str, expected: str, received: Any, log_path: Optional[str],
         where: str = "state message") -> UnityMessageException:
    whose = f"brain {brain!r}" if brain is not None else "the environment"
    return UnityMessageException(
        f"Protocol error: the {where} of {whose} has an invalid {field}: expected {expected}, received "
        f"{show(received)}. The environment sent a message this API-2 trainer cannot use; check that "
        "the build matches this ML-Agents version and that the scene's agents send finite values.",
        log_path, brain=brain, field=field, expected=expected, received=show(received))


def _field(msg: Dict[str, Any], brain: str, field: str, log_path: Optional[str]) -> Any:
    if field not in msg:
        raise _bad(brain, field, "the field (API-2 state messages have brain_name, agents, states, rewards, "
                   "actions, memories, dones)", "nothing", log_path)
    return msg[field]


def _floats(msg: Dict[str, Any], brain: str, field: str, n: int, width: int, layout: str,
            log_path: Optional[str]) -> np.ndarray:
    """``msg[field]`` as ``[n, width]`` float32, refused unless it is that many finite numbers
    within float32's range (a float32 overflow is as non-finite as an infinity)."""
    value = _field(msg, brain, field, log_path)
    if not isinstance(value, list):
        raise _bad(brain, field, f"a list of numbers ({layout})", value, log_path)
    if len(value) != n * width:
        raise UnityObservationException(
            f"Brain {brain!r} sent an invalid {field} field: expected {n * width} values ({layout}) "
            f"but received {len(value)}. The brain's parameters and its agents disagree; check the "
            f"brain's state size in the scene.", log_path, brain=brain, field=field,
            expected=f"{n * width} values", received=f"{len(value)} values")
    if not _finite_numbers(value):
        for k, v in enumerate(value):  # the slow path, only to name the culprit
            if not isinstance(v, (int, float)):
                raise _bad(brain, field, f"a flat list of numbers ({layout})", value, log_path)
            if not abs(v) <= F32_MAX:
                raise _bad(brain, f"{field}[{k}]", "a finite number within float32's range (NaN, infinity "
                           "and values beyond 3.4e38 are environment errors)", v, log_path)
        raise _bad(brain, field, f"a flat list of finite numbers ({layout})", value, log_path)
    return np.asarray(value, np.float32).reshape(n, width)


def _finite_numbers(values: List[Any]) -> bool:
    """Whether ``values`` are all numbers within float32's range, NaN and infinities excluded.

    On the hot path (every state message), so in C loops: ``sum`` refuses anything but numbers
    (strings, None, lists) and carries any NaN or infinity into its result; ``min``/``max`` bound
    the magnitudes (a float32 overflow is as non-finite as an infinity). JSON ``true``/``false``
    pass as the numbers 1 and 0, as in Python.
    """
    if not values:
        return True
    try:
        return math.isfinite(sum(values)) and max(values) <= F32_MAX and min(values) >= -F32_MAX
    except (TypeError, OverflowError):
        return False


def state_message_limit(params: BrainParameters) -> int:
    """The most bytes a state message of this brain can need (MAX_AGENTS agents, long numbers)."""
    numbers = params.state_width + params.memory_space_size + params.action_width + 1
    return min(1 << 30, 4096 + MAX_AGENTS * (_BYTES_PER_AGENT + _BYTES_PER_NUMBER * numbers))


def png_limit(res: Dict[str, Any]) -> int:
    """The most bytes a PNG of this camera can need: uncompressed 16-bit RGBA rows, twice, plus chunks."""
    return 2 * res["height"] * (1 + 8 * res["width"]) + (64 << 10)



def _int_field(where: str, d: Dict[str, Any], key: str, low: int, high: int, log_path: Optional[str],
               default: Optional[int] = None) -> int:
    value = d.get(key, default)
    if value is None and default is not None:
        value = default
    if type(value) is not int or not low <= value <= high:
        raise _academy_error(f"{where}.{key}", f"an integer from {low} to {high}", value, log_path)
    return value


def _academy_error(field: str, expected: str, received: Any, log_path: Optional[str]) -> UnityMessageException:
    return UnityMessageException(
        f"The AcademyParameters sent by the environment are malformed: {field} must be {expected}; received "
        f"{show(received)}. Expected the AcademyName, brainNames, brainParameters, externalBrainNames and "
        "resetParameters of API-2; use a build made with the matching ML-Agents version.",
        log_path, field=field, expected=expected, received=show(received))


def _str_list(field: str, value: Any, log_path: Optional[str], optional: bool = False) -> List[str]:
    if value is None and optional:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _academy_error(field, "a list of names", value, log_path)
    if len(set(value)) != len(value):
        raise _academy_error(field, "distinct names", value, log_path)
    return value


def validate_academy_parameters(p: Dict[str, Any], log_path: Optional[str]) -> Handshake:
    """The checked AcademyParameters: every field's type, range and consistency, before use."""
    name = p.get("AcademyName")
    if not isinstance(name, str):
        raise _academy_error("AcademyName", "a string", name, log_path)
    brain_names = _str_list("brainNames", p.get("brainNames"), log_path)
    external = _str_list("externalBrainNames", p.get("externalBrainNames"), log_path, optional=True)
    unknown = [b for b in external if b not in brain_names]
    if unknown:
        raise UnityMessageException(
            f"The AcademyParameters name External brains {unknown} that are not in brainNames "
            f"{brain_names}.", log_path, field="externalBrainNames", expected=f"names among {brain_names}",
            received=show(unknown))
    reset = p.get("resetParameters")
    reset = {} if reset is None else reset
    if not isinstance(reset, dict):
        raise _academy_error("resetParameters", "an object of names to numbers", reset, log_path)
    for k, v in reset.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not abs(v) <= F32_MAX:
            raise _academy_error(f"resetParameters[{k!r}]", "a finite number", v, log_path)
    log = p.get("logPath")
    if log is not None and not isinstance(log, str):
        raise _academy_error("logPath", "a string", log, log_path)
    params = p.get("brainParameters")
    if not isinstance(params, list) or len(params) != len(brain_names):
        raise _academy_error("brainParameters", f"a list of {len(brain_names)} objects (one per brain "
                             "of brainNames)", params, log_path)
    brains: Dict[str, BrainParameters] = {}
    for i, (b, bp) in enumerate(zip(brain_names, params)):
        where = f"brainParameters[{i}] (brain {b!r})"
        if not isinstance(bp, dict):
            raise _academy_error(where, "an object", bp, log_path)
        clean: Dict[str, Any] = {
            "stateSize": _int_field(where, bp, "stateSize", 0, MAX_BRAIN_SIZE, log_path),
            "actionSize": _int_field(where, bp, "actionSize", 1, MAX_BRAIN_SIZE, log_path),
            "memorySize": _int_field(where, bp, "memorySize", 0, MAX_BRAIN_SIZE, log_path, default=0),
            "actionSpaceType": _int_field(where, bp, "actionSpaceType", 0, 1, log_path, default=0),
            "stateSpaceType": _int_field(where, bp, "stateSpaceType", 0, 1, log_path, default=1),
        }
        cameras = bp.get("cameraResolutions")
        cameras = [] if cameras is None else cameras
        if not isinstance(cameras, list) or len(cameras) > 64:
            raise _academy_error(f"{where}.cameraResolutions", "a list of at most 64 cameras", cameras, log_path)
        clean["cameraResolutions"] = []
        for k, cam in enumerate(cameras):
            at = f"{where}.cameraResolutions[{k}]"
            if not isinstance(cam, dict):
                raise _academy_error(at, "an object with width, height and blackAndWhite", cam, log_path)
            bw = cam.get("blackAndWhite", False)
            if not isinstance(bw, bool):
                raise _academy_error(f"{at}.blackAndWhite", "true or false", bw, log_path)
            clean["cameraResolutions"].append({
                "width": _int_field(at, cam, "width", 1, MAX_CAMERA_SIDE, log_path),
                "height": _int_field(at, cam, "height", 1, MAX_CAMERA_SIDE, log_path),
                "blackAndWhite": bw})
        descriptions = bp.get("actionDescriptions")
        if descriptions is not None and (not isinstance(descriptions, list)
                                         or not all(isinstance(d, str) for d in descriptions)):
            raise _academy_error(f"{where}.actionDescriptions", "a list of strings", descriptions, log_path)
        clean["actionDescriptions"] = descriptions or []
        if "actionBranches" in bp:
            branches = bp["actionBranches"]
            if not isinstance(branches, list) or len(branches) > 1024 or not all(
                    type(x) is int and 1 <= x <= MAX_BRAIN_SIZE for x in branches):
                raise _academy_error(f"{where}.actionBranches", "a list of positive integers", branches, log_path)
            clean["actionBranches"] = branches
        if "actionMasks" in bp:
            if not isinstance(bp["actionMasks"], bool):
                raise _academy_error(f"{where}.actionMasks", "true or false", bp["actionMasks"], log_path)
            clean["actionMasks"] = bp["actionMasks"]
        brains[b] = BrainParameters(b, clean)
    return Handshake(name, brains, external, {k: float(v) for k, v in reset.items()}, log or log_path)


def steps_of(b: str, params: BrainParameters, msg: Dict[str, Any], log: Optional[str],
             read_frame: Callable[[int, Dict[str, Any]], np.ndarray]) -> BehaviorSteps:
    """Check every field of one state message (types, sizes, finiteness); then build its steps.

    Every agent is a decision step, its ``obs`` the brain's cameras then its state; a done agent
    is a terminal step too, with those same observations (the first of its next episode: API-2
    sends no other) and the step's reward, its decision step then having reward 0.

    ``read_frame(camera, resolution)`` reads and decodes the next frame of that camera from the
    stream: API-2 sends the frames after the state message, camera by camera, agent by agent.
    """
    agents = _field(msg, b, "agents", log)
    if not isinstance(agents, list) or not set(map(type, agents)) <= {int}:
        raise _bad(b, "agents", "a list of integer agent ids", agents, log)
    n = len(agents)
    if n > MAX_AGENTS:
        raise _bad(b, "agents", f"at most {MAX_AGENTS} agents", f"{n} agents", log)
    if len(set(agents)) != n:
        dup = sorted({a for a in agents if agents.count(a) > 1})[:5]
        raise _bad(b, "agents", f"distinct agent ids (repeated: {dup})", agents, log)
    state = _floats(msg, b, "states", n, params.state_width,
                    f"{params.state_width} {params.state_space_type} float(s) per agent", log)
    _floats(msg, b, "rewards", n, 1, "one per agent", log)
    rewards = np.asarray(msg["rewards"], np.float64).reshape(n)
    dones = _field(msg, b, "dones", log)
    if not isinstance(dones, list) or not set(map(type, dones)) <= {bool}:
        raise _bad(b, "dones", "a list of true/false, one per agent", dones, log)
    _check_size(b, "dones", len(dones), n, "one per agent")
    memories = msg.get("memories")
    if memories:
        memory = _floats(msg, b, "memories", n, params.memory_space_size,
                         f"memorySize {params.memory_space_size} per agent", log)
    elif memories is None or memories == []:
        memory = np.zeros((n, params.memory_space_size), np.float32)
    else:
        raise _bad(b, "memories", "a list of numbers", memories, log)
    actions = msg.get("actions")
    if actions:
        prev = _floats(msg, b, "actions", n, params.action_width,
                       f"the previous action: {params.action_width} float(s) per agent", log)
    elif actions is None or actions == []:
        prev = np.zeros((n, 0), np.float32) if n else np.array([])
    else:
        raise _bad(b, "actions", "a list of numbers", actions, log)
    observations = []
    for i, res in enumerate(params.camera_resolutions):
        frames = [read_frame(i, res) for _ in range(n)]
        observations.append(np.stack(frames) if frames else
                            np.zeros((0, res["height"], res["width"], 1 if res.get("blackAndWhite") else 3),
                                     np.float32))
    by_sensor = [observations[s.camera] if s.is_camera else
                 (state if s.size == state.shape[1] else state[:, s.offset:s.offset + s.size]) for s in params.sensors]
    ids = np.asarray(agents, np.int64)
    done = np.asarray(dones, bool)
    decisions = DecisionSteps(by_sensor, np.where(done, 0.0, rewards), ids, memory=memory, previous_action=prev)
    if not done.any():
        terminals = TerminalSteps([o[:0] for o in by_sensor], rewards[:0], done[:0], ids[:0],
                                  previous_action=prev[:0] if len(prev) else prev)
    else:
        terminals = TerminalSteps([o[done] for o in by_sensor], rewards[done], np.zeros(int(done.sum()), bool),
                                  ids[done], previous_action=prev[done] if len(prev) else prev)
    return decisions, terminals


def _check_size(brain: str, field: str, got: int, expected: int, layout: str) -> None:
    if got != expected:
        raise UnityObservationException(
            f"Brain {brain!r} sent an invalid {field} field: expected {expected} values ({layout}) "
            f"but received {got}. The brain's parameters and its agents disagree; check the "
            f"brain's state size in the scene.", brain=brain, field=field, expected=f"{expected} values",
            received=f"{got} values")


def decode_api2_png(data: bytes, res: Dict[str, Any], brain: str, log_path: Optional[str]) -> np.ndarray:
    """One API-2 camera frame as float ``[H, W, C]`` in 0..1 (C = 1 for black-and-white cameras).

    The PNG's own header is checked against the camera first, so that a frame claiming a huge
    image (a decompression bomb) is refused without being decoded.
    """
    size = png_size(data)
    if size is None:
        raise UnityObservationException(
            f"Brain {brain!r} sent a camera frame that is not a PNG (expected the PNG signature and an IHDR "
            f"chunk, received {bytes(data[:24])!r}).", log_path, brain=brain, field="camera frame",
            expected="a PNG", received=bytes(data[:24]))
    if size != (res["width"], res["height"]):
        raise UnityObservationException(
            f"Brain {brain!r} sent a {size[0]}x{size[1]} frame but declares a camera of "
            f"{res['width']}x{res['height']} (refused from the PNG header, before decoding).", log_path,
            brain=brain, field="camera frame", expected=f"{res['width']}x{res['height']}",
            received=f"{size[0]}x{size[1]}")
    try:
        with Image.open(io.BytesIO(data)) as img:
            pixels = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
    except Exception as e:  # Pillow raises several types for bad images
        raise UnityObservationException(
            f"Brain {brain!r} sent a camera frame that is not a readable PNG ({type(e).__name__}: {e}).",
            log_path, brain=brain, field="camera frame", expected="a readable PNG", received=str(e)) from None
    if pixels.shape[:2] != (res["height"], res["width"]):
        raise UnityObservationException(
            f"Brain {brain!r} sent a {pixels.shape[1]}x{pixels.shape[0]} frame but declares a camera of "
            f"{res['width']}x{res['height']}.")
    if res.get("blackAndWhite"):
        pixels = pixels.mean(axis=2, keepdims=True)
    return pixels
