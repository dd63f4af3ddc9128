"""Per-agent experience storage, the update buffer that PPO trains from, and the replay buffer.

The layout and semantics are the seed's (its ``test_buffer`` pins them):

* ``Buffer`` maps agent id -> ``AgentBuffer`` and owns one ``update_buffer`` (an ``AgentBuffer``);
* ``AgentBuffer`` maps field name -> ``AgentBufferField``; a missing field is created on access,
  so ``buffer[agent]["states"].append(x)`` works on a fresh agent;
* ``AgentBufferField`` is a list of arrays, one per step, with ``get_batch`` to cut it into
  elements or sequences.

Trajectories are collected per agent because agents finish episodes at different times; when one
ends (or reaches ``time_horizon``) the trainer moves it, whole, into its update buffer. For
recurrent training it moves as non-overlapping sequences of ``training_length`` steps, the *first*
one left-padded with zeros, so that every sequence ends on a real step and the padding carries a
zero mask wherever the trainer stores a field of ones.

``ReplayBuffer`` is the off-policy trainers' store: a ring of preallocated arrays, sampled uniformly.

Everything that touches many elements converts the list to one ndarray once and slices it; no
per-element Python loop runs on the path of an update.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

import numpy as np

from trainers.settings.schema import UnityTrainerException
from unityagents.exception import UnityException


class BufferException(UnityException):
    """A request to a buffer cannot be met with the data it holds."""


class AgentBufferField(list):
    """The values of one field of one agent, one array-like per step, in time order."""

    def __str__(self) -> str:
        return str(np.array(self).shape)

    def extend(self, data: Iterable[Any]) -> None:
        """Add the elements of ``data`` (an array's first axis, or a list of arrays) at the end."""
        super().extend(list(np.asarray(data)))

    def set(self, data: Iterable[Any]) -> None:
        """Replace the whole content by the elements of ``data``."""
        self[:] = list(np.asarray(data))

    def reset_field(self) -> None:
        """Remove every element."""
        self[:] = []

    def get_batch(
        self,
        batch_size: Optional[int] = None,
        training_length: Optional[int] = None,
        sequential: bool = True,
    ) -> np.ndarray:
        """The **last** ``batch_size`` elements, or the last ``batch_size`` sequences.

        :param batch_size: how many elements (or sequences) to return; ``None`` returns all that
            exist.
        :param training_length: ``None`` returns elements, ``[batch, ...]``. Otherwise sequences of
            this many steps, ``[batch, training_length, ...]``.
        :param sequential: with ``training_length``: ``True`` cuts non-overlapping sequences that
            end on the last element; when the length is not a multiple of ``training_length`` the
            *first* sequence is left-padded with zeros (``[a,b,c,d,e]``, length 2 ->
            ``[[0,a],[b,c],[d,e]]``). ``False`` returns overlapping windows, one ending at each
            element (``[[a,b],[b,c],[c,d],[d,e]]``), never padded.
        :raises BufferException: when more elements or sequences are asked for than exist.
        """
        n = len(self)
        if training_length is None:
            if batch_size is None:
                return np.array(self)
            if batch_size > n:
                raise BufferException(
                    f"get_batch was asked for the last {batch_size} elements but the field holds only {n}. "
                    "Ask for at most that many, or pass batch_size=None for all of them."
                )
            return np.array(self[n - batch_size:])

        if training_length < 1:
            raise BufferException(f"training_length must be a positive integer or None, got {training_length}.")
        if not sequential:
            available = max(n - training_length + 1, 0)
            batch_size = self._sequences_asked(batch_size, available, f"overlapping sequences of length "
                                               f"{training_length}, but {n} elements give only {available}")
            if batch_size == 0:
                return self._no_sequences(training_length)
            data = np.asarray(self[n - batch_size - training_length + 1:])
            windows = np.lib.stride_tricks.sliding_window_view(data, training_length, axis=0)
            # sliding_window_view puts the window axis last; sequences want it second.
            return np.ascontiguousarray(np.moveaxis(windows, -1, 1))

        leftover = n % training_length
        available = n // training_length + (1 if leftover else 0)
        batch_size = self._sequences_asked(batch_size, available, f"sequences of length {training_length}, but {n} "
                                           f"elements give only {available} (the first one padded)")
        if batch_size == 0:
            return self._no_sequences(training_length)
        # Only the elements that end up in the returned sequences are converted.
        data = np.asarray(self[max(n - batch_size * training_length, 0):])
        missing = batch_size * training_length - len(data)
        if missing:
            data = np.concatenate([np.zeros((missing,) + data.shape[1:], dtype=data.dtype), data])
        return data.reshape((batch_size, training_length) + data.shape[1:])

    @staticmethod
    def _sequences_asked(batch_size: Optional[int], available: int, what: str) -> int:
        """``batch_size`` (None: all ``available``), refused when more than ``available`` are asked for."""
        if batch_size is None:
            return available
        if batch_size > available:
            raise BufferException(
                f"get_batch was asked for {batch_size} {what}. Ask for fewer sequences or a shorter length.")
        return batch_size

    def _no_sequences(self, training_length: int) -> np.ndarray:
        """An empty batch of sequences, shaped like a full one would be."""
        return np.zeros((0, training_length) + (np.shape(self[0]) if self else ()))


class AgentBuffer(dict):
    """The fields of one agent's trajectory (or of the update buffer): name -> ``AgentBufferField``."""

    AgentBufferField = AgentBufferField  # the seed's nested name: ``Buffer.AgentBuffer.AgentBufferField``

    def __str__(self) -> str:
        return ", ".join(f"'{k}' : {v}" for k, v in self.items())

    def __missing__(self, key: str) -> AgentBufferField:
        # Called by dict's own lookup on a miss only, so a hit costs no Python call.
        field = self[key] = AgentBufferField()
        return field

    def reset_agent(self) -> None:
        """Empty every field (the field names stay)."""
        for field in self.values():
            field.reset_field()

    def check_length(self, key_list: Sequence[str]) -> bool:
        """True if every field of ``key_list`` exists and all have the same length."""
        if len(key_list) < 2:
            return True
        if any(key not in self for key in key_list):
            return False
        return len({len(self[key]) for key in key_list}) == 1

    def append_to(self, target: "AgentBuffer", key_list: Optional[Sequence[str]] = None,
                  batch_size: Optional[int] = None, training_length: Optional[int] = None, owner: Any = None) -> None:
        """Copy the fields of ``key_list`` (default: all) to the end of ``target``, cut by ``get_batch``.

        :param owner: names the trajectory (its agent) in the error.
        :raises BufferException: if the fields do not all have the same length (a trainer that
            forgot a field on some step), naming each field's length.
        """
        key_list = list(self.keys()) if key_list is None else list(key_list)
        if not self.check_length(key_list):
            lengths = {k: len(self[k]) for k in key_list}
            raise BufferException(
                f"The fields of agent {owner} must all have the same length to be moved to the update buffer, "
                f"got {lengths}."
            )
        for key in key_list:
            target[key].extend(self[key].get_batch(batch_size=batch_size, training_length=training_length))

    def shuffle(self, key_list: Optional[Sequence[str]] = None, rng: Optional[np.random.Generator] = None) -> None:
        """Permute the fields of ``key_list`` (default: all) with one permutation, so steps stay aligned.

        :raises BufferException: if the fields do not all have the same length.
        """
        key_list = list(self.keys()) if key_list is None else list(key_list)
        if not key_list:
            return
        if not self.check_length(key_list):
            lengths = {k: len(self[k]) for k in key_list}
            raise BufferException(f"Unable to shuffle fields of different lengths: {lengths}. All must be equal.")
        permutation = (rng or np.random).permutation(len(self[key_list[0]]))
        for key in key_list:
            field = self[key]
            field[:] = [field[i] for i in permutation]


class Buffer(dict):
    """agent id -> ``AgentBuffer``, plus the ``update_buffer`` that training consumes."""

    AgentBuffer = AgentBuffer  # the seed's nested name: ``Buffer.AgentBuffer``

    def __init__(self):
        super().__init__()
        self.update_buffer = AgentBuffer()

    def __str__(self) -> str:
        local = "\n".join(f"\tagent {k} :{v}" for k, v in self.items())
        return f"update buffer :\n\t{self.update_buffer}\nlocal_buffers :\n{local}"

    def __missing__(self, agent_id: Any) -> AgentBuffer:
        buffer = self[agent_id] = AgentBuffer()
        return buffer

    def reset_update_buffer(self) -> None:
        """Empty the update buffer."""
        self.update_buffer.reset_agent()

    def reset_all(self) -> None:
        """Empty the update buffer and every agent's buffer."""
        self.update_buffer.reset_agent()
        for agent_buffer in self.values():
            agent_buffer.reset_agent()

    def append_update_buffer(
        self,
        agent_id: Any,
        key_list: Optional[Sequence[str]] = None,
        batch_size: Optional[int] = None,
        training_length: Optional[int] = None,
    ) -> None:
        """Copy an agent's fields (default: all) to the update buffer (``AgentBuffer.append_to``)."""
        self[agent_id].append_to(self.update_buffer, key_list, batch_size, training_length, owner=agent_id)

    def append_all_agent_batch_to_update_buffer(
        self,
        key_list: Optional[Sequence[str]] = None,
        batch_size: Optional[int] = None,
        training_length: Optional[int] = None,
    ) -> None:
        """``append_update_buffer`` for every agent."""
        for agent_id in list(self.keys()):
            self.append_update_buffer(agent_id, key_list, batch_size, training_length)


class ReplayBuffer:
    """A fixed-capacity store of transitions, overwritten oldest-first, sampled uniformly.

    Fields are preallocated NumPy arrays of ``capacity`` rows, created on the first ``add`` from
    the dtype and shape of what arrives, so a sample is one fancy-index per field, with no Python
    loop over transitions.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise UnityTrainerException(f"A replay buffer needs a capacity of at least 1 transition, got {capacity}.")
        self.capacity = int(capacity)
        self.fields: Dict[str, np.ndarray] = {}
        self.size = 0  # transitions held, at most capacity
        self.next_index = 0  # row the next transition is written to

    def __len__(self) -> int:
        return self.size

    def add(self, transitions: Mapping[str, Any]) -> None:
        """Append ``n`` transitions given as ``{field: [n, ...]}`` (every field the same ``n``).

        The first call fixes the fields; later calls must bring the same ones.
        """
        arrays = {key: np.asarray(value) for key, value in transitions.items()}
        counts = {key: len(a) for key, a in arrays.items()}
        if len(set(counts.values())) != 1:
            raise UnityTrainerException(
                f"Every field added to the replay buffer must hold the same number of transitions, got {counts}.")
        if not self.fields:
            self.fields = {key: np.zeros((self.capacity,) + a.shape[1:], dtype=a.dtype) for key, a in arrays.items()}
        elif arrays.keys() != self.fields.keys():
            raise UnityTrainerException(
                f"The replay buffer holds the fields {sorted(self.fields)} but was given {sorted(arrays)}. "
                "Every transition must carry the same fields.")
        n = next(iter(counts.values()))
        if n > self.capacity:  # only the newest capacity transitions would survive anyway
            arrays = {key: a[n - self.capacity:] for key, a in arrays.items()}
            n = self.capacity
        rows = (self.next_index + np.arange(n)) % self.capacity
        for key, a in arrays.items():
            self.fields[key][rows] = a
        self.next_index = int((self.next_index + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int, rng: np.random.Generator, distinct: bool = False) -> Dict[str, np.ndarray]:
        """``batch_size`` transitions drawn uniformly from those held: with replacement, or
        ``distinct`` ones (a minibatch that uses no row twice, for a buffer refilled between updates)."""
        if self.size == 0:
            raise UnityTrainerException("Cannot sample from an empty replay buffer; add transitions first.")
        if distinct:
            if batch_size > self.size:
                raise UnityTrainerException(
                    f"Cannot draw {batch_size} distinct transitions from a buffer holding {self.size}; "
                    "wait until it holds at least a minibatch, or draw with replacement.")
            rows = rng.choice(self.size, size=batch_size, replace=False)
        else:
            rows = rng.integers(0, self.size, size=batch_size)
        return {key: a[rows] for key, a in self.fields.items()}

    def sample_sequences(self, count: int, length: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
        """``count`` whole sequences of ``length`` rows, drawn uniformly with replacement, one after another.

        The sequences are the aligned blocks ``[k * length, (k + 1) * length)``, so the buffer must
        be filled ``length`` rows at a time, with a capacity that is a multiple of ``length``.
        """
        if self.size < length or self.size % length or self.capacity % length:
            raise UnityTrainerException(
                f"Cannot sample sequences of {length} rows from a replay buffer holding {self.size} of "
                f"{self.capacity} rows: both must be multiples of {length}. Add whole sequences to a buffer "
                "whose capacity is a multiple of the sequence length.")
        starts = rng.integers(0, self.size // length, size=count) * length
        rows = (starts[:, None] + np.arange(length)).reshape(-1)
        return {key: a[rows] for key, a in self.fields.items()}


__all__: List[str] = ["AgentBuffer", "AgentBufferField", "Buffer", "BufferException", "ReplayBuffer"]
