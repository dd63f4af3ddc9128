"""The replay buffer inside a checkpoint (``save_replay_buffer``), so that ``--resume`` continues from the
transitions the run had gathered rather than from an empty buffer.

The state is JSON-safe (the trainer's state file is JSON): the buffer's counters and one base64
``.npz`` of its rows.
"""
from __future__ import annotations

import base64
import io
from typing import Any, Dict, Mapping

import numpy as np

from trainers.buffer import ReplayBuffer
from trainers.trainer.base import UnityTrainerException


def encode_replay(replay: ReplayBuffer) -> Dict[str, Any]:
    """The replay buffer as JSON-safe data: its counters and one base64 ``.npz`` of its rows."""
    data = io.BytesIO()
    np.savez_compressed(data, **{key: values[:replay.size] if replay.size < replay.capacity else values
                                 for key, values in replay.fields.items()})
    return {"size": replay.size, "next_index": replay.next_index, "capacity": replay.capacity,
            "npz": base64.b64encode(data.getvalue()).decode("ascii")}


def decode_replay(state: Mapping[str, Any], capacity: int) -> ReplayBuffer:
    """The buffer ``encode_replay`` wrote; refused if it does not fit ``capacity`` (buffer_size changed)."""
    if int(state["capacity"]) != capacity:
        raise UnityTrainerException(
            f"--load: the saved replay buffer holds up to {state['capacity']} transitions but buffer_size is now "
            f"{capacity}. Restore buffer_size, or set save_replay_buffer: false to start with an empty buffer.")
    replay = ReplayBuffer(capacity)
    with np.load(io.BytesIO(base64.b64decode(state["npz"]))) as arrays:
        for key in arrays.files:
            values = arrays[key]
            full = np.zeros((capacity,) + values.shape[1:], dtype=values.dtype)
            full[:len(values)] = values
            replay.fields[key] = full
    replay.size, replay.next_index = int(state["size"]), int(state["next_index"])
    return replay
