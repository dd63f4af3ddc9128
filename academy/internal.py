"""The Internal brain (``CoreBrainInternal.cs`` at #166): act with a frozen TensorFlow graph.

This is how Unity used a trained ``.bytes`` file, so running it here checks an export the way a game
would: nodes are found by name under ``graphScope``, inputs are detected by node existence, and the
graph's ``action`` output drives the agents (facts §8). Each Internal brain has its own ``tf.Graph``
and ``Session``. TensorFlow is imported only when an Internal brain is built.
"""
from __future__ import annotations

import logging

import numpy as np

from .academy import BrainSpec

log = logging.getLogger("academy.internal")


class InternalBrain:
    """Loads a frozen GraphDef and decides for all of a brain's agents in one ``session.run``.

    ``placeholders`` maps extra input names to ``(min, max)``; each decision feeds one value drawn
    uniformly from that range (an integer for integer inputs), as Unity's ``graphPlaceholders`` did.
    ``epsilon`` is fed 0 by default when the graph has it, so a continuous policy acts at its mean.
    """

    def __init__(self, path: str, spec: BrainSpec, scope: str = "",
                 placeholders: dict[str, tuple[float, float]] | None = None, seed: int = 0) -> None:
        from trainers.tf_utils import tf

        if len(scope) > 1 and not scope.endswith("/"):
            scope += "/"  # Unity appends the slash only to scopes longer than one character
        self.spec = spec
        self.scope = scope
        self.rng = np.random.default_rng(seed)
        graph_def = tf.GraphDef()
        try:
            with open(path, "rb") as f:
                graph_def.ParseFromString(f.read())
        except OSError as exc:
            raise OSError(f"Internal brain {spec.name}: cannot read the graph file {path!r} ({exc})") from exc
        except Exception as exc:  # protobuf's DecodeError has no stable import path
            raise ValueError(f"Internal brain {spec.name}: {path!r} is not a frozen TensorFlow GraphDef "
                             f"({exc})") from exc
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.import_graph_def(graph_def, name="")
        self.session = tf.Session(graph=self.graph)

        self.action = self._tensor("action", required=True)
        self.batch_size = self._tensor("batch_size")
        self.state = self._tensor("state")
        self.observations = [self._tensor(f"observation_{i}", required=True) for i in range(len(spec.cameras))]
        recurrent_in, recurrent_out = self._tensor("recurrent_in"), self._tensor("recurrent_out")
        self.recurrent = recurrent_in is not None and recurrent_out is not None
        self.recurrent_in, self.recurrent_out = recurrent_in, recurrent_out
        self.sequence_length = self._tensor("sequence_length", required=self.recurrent)
        if placeholders is None:
            placeholders = {"epsilon": (0.0, 0.0)} if self._tensor("epsilon") is not None else {}
        self.placeholders = {self._tensor(name, required=True): bounds for name, bounds in placeholders.items()}
        if spec.state_width and self.state is None and not self.observations:
            raise ValueError(f"Internal brain {spec.name}: the graph has neither {scope}state nor "
                             f"{scope}observation_0; check the graphScope {scope!r}")

    def _tensor(self, name: str, required: bool = False):
        """The output of node ``scope + name``, None if absent, or an error naming node and scope."""
        try:
            return self.graph.get_tensor_by_name(f"{self.scope}{name}:0")
        except KeyError:
            if required:
                raise ValueError(f"Internal brain {self.spec.name}: the node {self.scope}{name} could not be "
                                 f"found; please make sure the graphScope {self.scope!r} is correct") from None
            return None

    def decide(self, states: np.ndarray, observations: list[np.ndarray],
               memories: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions ``[N, action_width]`` and new memories ``[N, memorySize]`` for N agents.

        ``observations`` are uint8 RGB images ``[N, H, W, 3]``; they are fed as float 0..1, averaged to
        one channel for black-and-white cameras, as Unity converted its render textures.
        """
        n = len(states)
        feed = {}
        if self.batch_size is not None:
            feed[self.batch_size] = _shaped(self.batch_size, n, n)
        if self.state is not None and self.spec.state_width:
            if self.spec.state_space == "discrete":
                feed[self.state] = np.asarray(states, dtype=np.int32).reshape(n, 1)
            else:
                feed[self.state] = np.asarray(states, dtype=np.float32).reshape(n, self.spec.state_size)
        for tensor, camera, images in zip(self.observations, self.spec.cameras, observations):
            pixels = np.asarray(images, dtype=np.float32) / 255.0
            feed[tensor] = pixels.mean(axis=3, keepdims=True) if camera.black_and_white else pixels
        for tensor, (low, high) in self.placeholders.items():
            if tensor.dtype.is_integer:
                value = self.rng.integers(int(low), int(high) + 1)
            else:
                value = self.rng.uniform(low, high) if high > low else low
            feed[tensor] = _shaped(tensor, value, n)
        fetches = [self.action]
        if self.recurrent:
            feed[self.sequence_length] = _shaped(self.sequence_length, 1, n)
            feed[self.recurrent_in] = np.asarray(memories, dtype=np.float32)
            fetches.append(self.recurrent_out)
        try:
            outputs = self.session.run(fetches, feed)
        except Exception as exc:  # tf.errors.* and feed-shape ValueErrors
            raise RuntimeError(f"Internal brain {self.spec.name}: running {self.scope}action failed: {exc}") from exc
        actions = np.asarray(outputs[0], dtype=float).reshape(n, self.spec.action_width)
        memory = np.asarray(outputs[1], dtype=float).reshape(n, -1) if self.recurrent else memories
        return actions, memory


def _shaped(tensor, value: float, n: int) -> np.ndarray:
    """``value`` in the placeholder's shape: a scalar, a one-element vector (Unity's ``int[]{N}``
    for ``batch_size``), or a full array whose unknown first dimension is the batch."""
    dtype = tensor.dtype.as_numpy_dtype
    rank = tensor.shape.rank
    if rank == 0:
        return np.asarray(value, dtype=dtype)
    if rank is None or rank == 1:
        size = tensor.shape[0] if rank == 1 and tensor.shape[0] is not None else 1
        return np.full(size, value, dtype=dtype)
    dims = [n if d is None and i == 0 else (1 if d is None else d) for i, d in enumerate(tensor.shape.as_list())]
    return np.full(dims, value, dtype=dtype)
