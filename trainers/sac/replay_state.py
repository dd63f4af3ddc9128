"""The replay buffer inside a checkpoint (``save_replay_buffer``), so that ``--resume`` continues from the
transitions the run had gathered rather than from an empty buffer.

The state is JSON-safe (the trainer's state file is JSON): the buffer's counters and one base64
``.npz`` of its rows. A recurrent trainer also holds each agent's transitions that do not make a
whole block yet and the memory each agent acts from next; both are saved the same way, keyed by
the agent (an ``(environment, agent)`` tuple comes back as a tuple, since JSON has only lists).
"""
from __future__ import annotations

import base64
import io
from typing import Any, Dict, Hashable, List, Mapping

import numpy as np

from trainers.buffer import ReplayBuffer
from trainers.trainer.base import UnityTrainerException


def _npz(arrays: Mapping[str, np.ndarray]) -> str:
    data = io.BytesIO()
    np.savez_compressed(data, **arrays)
    return base64.b64encode(data.getvalue()).decode("ascii")


def _arrays(text: str) -> Dict[str, np.ndarray]:
    with np.load(io.BytesIO(base64.b64decode(text))) as arrays:
        return {key: arrays[key] for key in arrays.files}


def _key(value: Any) -> Hashable:
    """An agent key as it was before JSON turned its tuples into lists."""
    return tuple(_key(v) for v in value) if isinstance(value, list) else value


def _plain(agent: Hashable) -> Any:
    """An agent key JSON can write (numpy integers as ints, tuples as lists)."""
    if isinstance(agent, tuple):
        return [_plain(v) for v in agent]
    return agent.item() if isinstance(agent, np.generic) else agent


def encode_pending(pending: Mapping[Hashable, List[Mapping[str, np.ndarray]]]) -> Dict[str, Any]:
    """Each agent's transitions not yet stored as a block: the agents in order, and one ``.npz`` with
    field ``<field>`` of the ``k``-th agent's rows stacked under ``a<k>_<field>``."""
    agents = [agent for agent, rows in pending.items() if rows]
    arrays = {f"a{k}_{field}": np.stack([row[field] for row in pending[agent]])
              for k, agent in enumerate(agents) for field in pending[agent][0]}
    return {"agents": [_plain(a) for a in agents], "npz": _npz(arrays)}


def decode_pending(state: Mapping[str, Any]) -> Dict[Hashable, List[Dict[str, np.ndarray]]]:
    """The pending transitions ``encode_pending`` wrote, one dict of fields per row, in order."""
    arrays = _arrays(state["npz"])
    pending: Dict[Hashable, List[Dict[str, np.ndarray]]] = {}
    for k, agent in enumerate(state["agents"]):
        prefix = f"a{k}_"
        fields = {key[len(prefix):]: values for key, values in arrays.items() if key.startswith(prefix)}
        count = len(next(iter(fields.values())))
        pending[_key(agent)] = [{field: values[r] for field, values in fields.items()} for r in range(count)]
    return pending


def encode_memories(memories: Mapping[Hashable, np.ndarray]) -> Dict[str, Any]:
    """The memory each agent acts from next: the agents in order and their memories as one array."""
    agents = list(memories)
    stacked = np.asarray([memories[a] for a in agents], np.float32)
    return {"agents": [_plain(a) for a in agents], "npz": _npz({"memories": stacked})}


def decode_memories(state: Mapping[str, Any], memory_size: int) -> Dict[Hashable, np.ndarray]:
    """The memories ``encode_memories`` wrote; refused if their size is not the model's."""
    values = _arrays(state["npz"])["memories"].reshape(len(state["agents"]), -1)
    if len(values) and values.shape[1] != memory_size:
        raise UnityTrainerException(
            f"--load: the saved acting memories hold {values.shape[1]} floats per agent but memory_size is now "
            f"{memory_size}. Restore memory_size, or set save_replay_buffer: false to start from zeros.")
    return {_key(agent): values[k].copy() for k, agent in enumerate(state["agents"])}


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
