"""The Internal brain (``CoreBrainInternal.cs`` at #166): act with a frozen TensorFlow graph.

This is how Unity used a trained ``.bytes`` file, so running it here checks an export the way a game
would: nodes are found by name under ``graphScope``, inputs are detected by node existence, and the
graph's ``action`` output drives the agents. Each Internal brain has its own ``tf.Graph``
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


class OnnxInternalBrain:
    """Acts with a ``<Brain>.onnx`` export (``trainers/onnx_export.py``) through onnxruntime.

    It feeds the file as modern Unity's inference engine does (``obs_k`` in sensor order, cameras
    channels-first in 0..1, ``action_masks`` all 1, ``recurrent_in`` ``[N, 1, M]`` carried per
    agent) and, by default, acts the way the ``.bytes`` Internal brain of the same export acts, so
    both score the same: continuous brains take ``deterministic_continuous_actions`` (the mean, as
    ``epsilon`` = 0 gives) times 3, undoing the contract's scaling; discrete brains take the
    sampled ``discrete_actions``. ``deterministic`` True/False picks the deterministic/sampled
    outputs for both kinds instead (Unity's "Deterministic Inference" checkbox).
    """

    def __init__(self, path: str, spec: BrainSpec, seed: int = 0, deterministic: bool | None = None) -> None:
        del seed  # accepted like InternalBrain's; onnxruntime's Multinomial and RandomNormalLike are unseeded
        try:
            import onnxruntime
        except ImportError as exc:
            raise ImportError(f"Internal brain {spec.name}: running {path!r} needs onnxruntime "
                              "(pip install onnxruntime, listed in requirements.txt)") from exc
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1  # one scene, small batches: threads cost more than they give
        try:
            self.session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidProtobuf/NoSuchFile types
            raise ValueError(f"Internal brain {spec.name}: onnxruntime cannot load {path!r} ({exc})") from exc
        self.spec = spec
        self.inputs = {i.name: i for i in self.session.get_inputs()}
        outputs = {o.name for o in self.session.get_outputs()}
        continuous = spec.action_space == "continuous"
        kind = "continuous" if continuous else "discrete"
        if deterministic is None:
            deterministic = continuous
        name = ("deterministic_" if deterministic else "") + f"{kind}_actions"
        if name not in outputs:
            raise ValueError(f"Internal brain {spec.name}: {path!r} has no output {name!r} (it has {sorted(outputs)}); "
                             f"the brain's actions are {kind}; export the brain again with trainers/onnx_export.py")
        self.action_output = name
        self.scale = 3.0 if continuous else 1.0  # trainers.onnx_export.CONTINUOUS_CLIP
        self.recurrent = "recurrent_in" in self.inputs and "recurrent_out" in outputs
        self.cameras = len(spec.cameras)
        expected = {f"obs_{k}" for k in range(self.cameras + (1 if spec.state_size else 0))}
        missing = sorted(expected - set(self.inputs))
        if missing:
            raise ValueError(f"Internal brain {spec.name}: {path!r} lacks the inputs {missing} (it has "
                             f"{sorted(self.inputs)}); obs_0..obs_{self.cameras - 1} are the cameras and "
                             f"obs_{self.cameras} the state. Was it exported for this brain?")

    def decide(self, states: np.ndarray, observations: list[np.ndarray],
               memories: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions ``[N, action_width]`` and memories ``[N, memorySize]``, as ``InternalBrain.decide``."""
        n = len(states)
        feed = {}
        for k, (camera, images) in enumerate(zip(self.spec.cameras, observations)):
            pixels = np.asarray(images, dtype=np.float32) / 255.0
            if camera.black_and_white:
                pixels = pixels.mean(axis=3, keepdims=True)
            feed[f"obs_{k}"] = np.ascontiguousarray(pixels.transpose(0, 3, 1, 2))
        if self.spec.state_size:
            feed[f"obs_{self.cameras}"] = np.asarray(states, dtype=np.float32).reshape(n, -1)
        if "action_masks" in self.inputs:
            feed["action_masks"] = np.ones((n, self.inputs["action_masks"].shape[1]), np.float32)
        fetches = [self.action_output] + (["recurrent_out"] if self.recurrent else [])
        if self.recurrent:
            feed["recurrent_in"] = np.asarray(memories, dtype=np.float32).reshape(n, 1, -1)
        try:
            outputs = self.session.run(fetches, feed)
        except Exception as exc:
            raise RuntimeError(f"Internal brain {self.spec.name}: running {self.action_output} failed: {exc}") from exc
        actions = np.asarray(outputs[0], dtype=float).reshape(n, self.spec.action_width) * self.scale
        memory = np.asarray(outputs[1], dtype=float).reshape(n, -1) if self.recurrent else memories
        return actions, memory


def load_internal_brain(path: str, spec: BrainSpec, scope: str = "", seed: int = 0):
    """The Internal brain for ``path``: onnxruntime for ``.onnx`` files, TensorFlow for ``.bytes``.

    An ONNX file holds one brain with bare names, so ``scope`` must be empty for it.
    """
    if path.lower().endswith(".onnx"):
        if scope:
            raise ValueError(f"Internal brain {spec.name}: {path!r} is an ONNX file, which holds one brain and has "
                             f"no graph scope; drop '#{scope}'")
        return OnnxInternalBrain(path, spec, seed=seed)
    return InternalBrain(path, spec, scope, seed=seed)
