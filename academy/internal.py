"""The Internal brain: act with a trained file the way the Unity side would.

Two kinds of file, each run as its own Unity runs it:

* a frozen TensorFlow ``.bytes`` (``CoreBrainInternal.cs`` at #166, 2018): nodes are found by name
  under ``graphScope``, inputs are detected by node existence, and the graph's ``action`` output
  drives the agents as it is (the agent scripts clamp it);
* a ``<Behavior>.onnx`` (ML-Agents 2.x-4.x C#): the outputs are copied into the agents unchanged,
  no rescaling; the scenes clamp continuous actions to [-1, 1] like Unity's example agents.

Each brain has its own graph or session. TensorFlow and onnxruntime are imported only when a brain
of their kind is built. Like the rest of the academy this module shares no code with the trainer:
what it needs of a file's contract it reads from the file.
"""
from __future__ import annotations

import logging
import os

import numpy as np

from academy.buffer_sensor import sensor_shape
from academy.scene import BrainSpec, CameraSensor, default_sensors

log = logging.getLogger("academy.internal")


def _tensorflow():
    """``tf.compat.v1`` for loading and running a frozen graph (graph mode, no eager tensors)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter out of the log
    import tensorflow

    return tensorflow.compat.v1


class InternalBrain:
    """Loads a frozen GraphDef and decides for all of a brain's agents in one ``session.run``.

    ``placeholders`` maps extra input names to ``(min, max)``; each decision feeds one value drawn
    uniformly from that range (an integer for integer inputs), as Unity's ``graphPlaceholders`` did.
    ``epsilon`` is fed 0 by default when the graph has it, so a continuous policy acts at its mean.
    """

    def __init__(self, path: str, spec: BrainSpec, scope: str = "",
                 placeholders: dict[str, tuple[float, float]] | None = None, seed: int = 0) -> None:
        tf = _tensorflow()

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
    """Acts with a ``<Brain>.onnx`` export through onnxruntime, as ML-Agents' C# runs the file.

    Inputs: ``obs_k`` for the k-th sensor of ``spec.modern_sensors()`` (the order a modern Unity
    agent sorts its sensors in, and the one the academy's gRPC side reports): a vector sensor's
    raw floats ``[N, size]``, a BufferSensor's rows ``[N, max_entities, entity_size]`` (zeros where
    no entity), a camera channels-first ``[N, C, H, W]`` in 0..1; ``action_masks``
    all 1 (no agent script here disables an action); ``recurrent_in`` ``[N, 1, M]`` with each
    agent's memory (zeros for a new agent: the academy clears it at every agent reset, as Unity
    drops it at the episode's end). Outputs: the stochastic ``continuous_actions``/``discrete_actions``
    by default, the ``deterministic_*`` ones when ``deterministic`` is True (Unity's
    "Deterministic Inference" checkbox), copied into the agents' actions without any scaling.
    ``M`` is the file's own ``memory_size`` constant: the academy keeps that many floats per agent
    for this brain (``BrainRuntime``), whatever the brain's memorySize, as Unity's ``ModelRunner``
    sizes its memories from the model. A file whose ``obs_k`` do not match the
    sensors (count or shape) is refused at load, naming the sensor, as Unity's inspector does. A
    file exported from the scene's API-2 brain (its cameras, then its whole state; a discrete
    state as its index ``[b, 1]``) is fed that layout.
    """

    #: The Academy hands this brain every sensor's values (``decide_sensors``), as Unity feeds them.
    reads_sensors = True

    def __init__(self, path: str, spec: BrainSpec, seed: int = 0, deterministic: bool = False) -> None:
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
        kind = "continuous" if spec.action_space == "continuous" else "discrete"
        name = ("deterministic_" if deterministic else "") + f"{kind}_actions"
        if name not in outputs:
            raise ValueError(f"Internal brain {spec.name}: {path!r} has no output {name!r} (it has {sorted(outputs)}); "
                             f"the brain's actions are {kind}; export the brain again "
                             "with trainers/export/onnx_model.py")
        self.action_output = name
        #: A hybrid brain (continuous actions and branches) also reads the discrete output, after them.
        self.branch_output = None
        if spec.discrete_branches:
            self.branch_output = ("deterministic_" if deterministic else "") + "discrete_actions"
            if self.branch_output not in outputs:
                raise ValueError(f"Internal brain {spec.name}: {path!r} has no output {self.branch_output!r} (it has "
                                 f"{sorted(outputs)}); the brain's actions are hybrid (continuous and discrete "
                                 f"branches {list(spec.discrete_branches)}); export the brain again")
        self.sensors = spec.modern_sensors()
        if spec.sensors and self._fits(default_sensors(spec)) and not self._fits(self.sensors):
            self.sensors = default_sensors(spec)  # exported from the API-2 brain: its cameras, then its state
        self._check_observations(path)
        self.memory_size = self._memory_size(path, outputs)
        self.recurrent = self.memory_size > 0
        if self.recurrent and ("recurrent_in" not in self.inputs or "recurrent_out" not in outputs):
            raise ValueError(f"Internal brain {spec.name}: {path!r} declares memory_size {self.memory_size} but lacks "
                             "recurrent_in or recurrent_out; export the brain again with trainers/export/onnx_model.py")

    def _sensor_shape(self, sensor) -> list:
        if isinstance(sensor, CameraSensor):
            camera = self.spec.cameras[sensor.camera]
            return [1 if camera.black_and_white else 3, camera.height, camera.width]
        return sensor_shape(sensor)  # a BufferSensor's is [max_entities, entity_size]

    def _fits(self, sensors: tuple) -> bool:
        """Whether the file's ``obs_k`` are exactly ``sensors`` (a discrete state may be its index)."""
        names = {n for n in self.inputs if n.startswith("obs_")}
        index = [[1]] if self.spec.state_space == "discrete" else []
        return names == {f"obs_{k}" for k in range(len(sensors))} and all(
            list(self.inputs[f"obs_{k}"].shape[1:]) in [self._sensor_shape(s)] + index for k, s in enumerate(sensors))

    def _check_observations(self, path: str) -> None:
        """One ``obs_k`` per sensor, each of the sensor's shape (Unity's inspector checks the same)."""
        names = [f"obs_{k}" for k in range(len(self.sensors))]
        extra = sorted(n for n in self.inputs if n.startswith("obs_") and n not in names)
        layout = ", ".join(f"obs_{k} = {s.name} {self._sensor_shape(s)}" for k, s in enumerate(self.sensors))
        #: An API-2 export of a discrete state reads the index ``[b, 1]``, not the modern one-hot.
        self.index_state = False
        for name, sensor in zip(names, self.sensors):
            want = self._sensor_shape(sensor)
            value = self.inputs.get(name)
            got = None if value is None else list(value.shape[1:])
            if got == [1] and self.spec.state_space == "discrete" and not isinstance(sensor, CameraSensor):
                self.index_state = True
            elif got != want:
                raise ValueError(
                    f"Internal brain {self.spec.name}: {path!r} has {name} of shape {got or 'none'} but sensor "
                    f"{name[4:]} ({sensor.name}) gives {want}; the brain's sensors are {layout}. Was it exported "
                    "for this brain?")
        if extra:
            raise ValueError(f"Internal brain {self.spec.name}: {path!r} has inputs {extra} beyond the brain's "
                             f"{len(self.sensors)} sensors ({layout}). Was it exported for this brain?")

    def _memory_size(self, path: str, outputs: set) -> int:
        """The file's ``memory_size`` constant (0 when absent), read by running it at batch 1 on zeros."""
        if "memory_size" not in outputs:
            return 0
        feed = {name: np.zeros([d if isinstance(d, int) else 1 for d in value.shape], np.float32)
                for name, value in self.inputs.items()}
        try:
            (value,) = self.session.run(["memory_size"], feed)
        except Exception as exc:
            raise ValueError(f"Internal brain {self.spec.name}: {path!r} does not run at batch 1 on zero inputs "
                             f"({exc}); export the brain again with trainers/export/onnx_model.py") from exc
        return int(np.asarray(value).reshape(-1)[0])

    def decide(self, states: np.ndarray, observations: list[np.ndarray],
               memories: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions ``[N, action_width]`` and memories ``[N, memorySize]``, as ``InternalBrain.decide``.

        The sensors' values are cut from the API-2 state and cameras (state-backed sensors only).
        """
        values = []
        for sensor in self.sensors:
            if isinstance(sensor, CameraSensor):
                values.append(observations[sensor.camera])
            elif not sensor.from_state:
                raise ValueError(f"Internal brain {self.spec.name}: sensor {sensor.name} is not part of the state; "
                                 "call decide_sensors with every sensor's values (the Academy does)")
            elif self.spec.state_space == "discrete":  # the index; decide_sensors takes the one-hot
                index = np.asarray(states, dtype=np.int64).reshape(-1)
                values.append(np.eye(self.spec.state_size, dtype=np.float32)[index])
            else:
                state = np.asarray(states, dtype=np.float32).reshape(len(states), -1)
                values.append(state[:, sensor.start:sensor.start + sensor.size])
        return self.decide_sensors(values, memories)

    def decide_sensors(self, values: list[np.ndarray], memories: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions and memories from ``values``, one array per sensor of ``self.sensors``
        (``academy.modern_observations(scene, spec, sensors=self.sensors)``)."""
        n = len(values[0]) if values else len(memories)
        feed = {}
        for k, (sensor, value) in enumerate(zip(self.sensors, values)):
            if isinstance(sensor, CameraSensor):
                pixels = np.asarray(value, dtype=np.float32) / 255.0
                if self.spec.cameras[sensor.camera].black_and_white:
                    pixels = pixels.mean(axis=3, keepdims=True)
                feed[f"obs_{k}"] = np.ascontiguousarray(pixels.transpose(0, 3, 1, 2))
            elif self.index_state:
                feed[f"obs_{k}"] = np.argmax(value, axis=1).astype(np.float32).reshape(n, 1)
            else:
                feed[f"obs_{k}"] = np.asarray(value, dtype=np.float32).reshape(n, *self._sensor_shape(sensor))
        if "action_masks" in self.inputs:
            feed["action_masks"] = np.ones((n, self.inputs["action_masks"].shape[1]), np.float32)
        fetches = [self.action_output] + (["recurrent_out"] if self.recurrent else [])
        if self.branch_output is not None:
            fetches.append(self.branch_output)
        if self.recurrent:
            feed["recurrent_in"] = np.asarray(memories, dtype=np.float32).reshape(n, 1, self.memory_size)
        try:
            outputs = self.session.run(fetches, feed)
        except Exception as exc:
            raise RuntimeError(f"Internal brain {self.spec.name}: running {self.action_output} failed: {exc}") from exc
        parts = [outputs[0]] + ([outputs[-1]] if self.branch_output is not None else [])
        actions = np.concatenate([np.asarray(p, dtype=float).reshape(n, -1) for p in parts], axis=1)
        actions = actions.reshape(n, self.spec.action_width)
        memory = np.asarray(outputs[1], dtype=float).reshape(n, -1) if self.recurrent else memories
        return actions, memory


def load_internal_brain(path: str, spec: BrainSpec, scope: str = "", seed: int = 0, deterministic: bool = False):
    """The Internal brain for ``path``: onnxruntime for ``.onnx`` files, TensorFlow for ``.bytes``.

    An ONNX file holds one brain with bare names, so ``scope`` must be empty for it;
    ``deterministic`` picks its ``deterministic_*`` outputs (a ``.bytes`` acts at its mean anyway).
    """
    if path.lower().endswith(".onnx"):
        if scope:
            raise ValueError(f"Internal brain {spec.name}: {path!r} is an ONNX file, which holds one brain and has "
                             f"no graph scope; drop '#{scope}'")
        return OnnxInternalBrain(path, spec, seed=seed, deterministic=deterministic)
    return InternalBrain(path, spec, scope, seed=seed)
