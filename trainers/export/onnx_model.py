"""Export each trained brain as ``<Brain>.onnx``: the policy contract of today's Unity ML-Agents.

The ``.bytes`` frozen graph (``trainers/export/frozen_graph.py``) is what API-2-era Unity loads. Unity 2021+
(ML-Agents 2.x on Barracuda, 3.x on Sentis, 4.x on the Inference Engine) loads ONNX files with a
different contract, read in ML-Agents' C# loaders (``Runtime/Inference/*ModelParamLoader.cs``,
``SentisModelInfo.cs``) and its Python exporter (``model_serialization.py``), and restated in the
table below and in the load-time checks of ``tests/onnx_contract.py``. This module converts the
*same* frozen graph, one brain at a time, with ``tf2onnx``, after wrapping it in the names, dtypes
and shapes that contract asks for:

==================================  ===========================================================
inputs (all float32, batch dim 0)   ``obs_k``: the k-th sensor of ``brain.sensors``, the order
                                    the environment reports them in (Unity's: sorted by name),
                                    never concatenated: a vector sensor ``[b, n]`` (rank 2
                                    ``[b, N, F]``; a stacked one is its full width), a camera
                                    channels-first ``[b, C, H, W]`` in 0..1. The vector sensors
                                    are concatenated inside the graph into the state the policy
                                    trained on, then normalised there. An API-2 brain's sensors
                                    are its cameras, then its state (a discrete state is its
                                    index, ``[b, 1]``).
                                    ``action_masks`` ``[b, sum(branch sizes)]`` (discrete: 1
                                    allowed, 0 masked; an API-2 brain has one branch);
                                    ``recurrent_in`` ``[b, 1, memorySize]`` (recurrent).
constant outputs (float32)          ``version_number`` = 3, ``memory_size`` = M or 0,
                                    ``continuous_action_output_shape`` ``[n]`` or
                                    ``discrete_action_output_shape`` ``[[b0, b1, ...]]``.
outputs                             ``continuous_actions`` = clip(a, -3, 3) / 3 and
                                    ``deterministic_continuous_actions`` = clip(mean, -3, 3) / 3
                                    (ML-Agents' scaling: an agent script that received ``a``
                                    over API-2 must multiply by 3; a trainer whose actions are
                                    already in [-1, 1], as SAC's tanh, names the nodes exported
                                    as they are in ``onnx_action_outputs()``); ``discrete_actions`` and
                                    ``deterministic_discrete_actions``: int64
                                    ``[b, branches]``, per branch the index sampled from (the
                                    argmax of) the masked policy;
                                    a hybrid brain has both the continuous and the
                                    discrete outputs (and ``action_masks`` for its
                                    branches), from its graph's ``continuous_action``
                                    and ``discrete_action``;
                                    ``recurrent_out`` ``[b, 1, M]``; ``value_estimate`` (Unity
                                    ignores it; kept so that tools and tests can compare values).
==================================  ===========================================================

Why each step:

* **One step of the LSTM, without a loop.** The recurrent model unrolls its LSTM with a v1
  ``tf.while_loop`` (so the ``.bytes`` runs on TensorFlow 1.x); tf2onnx would turn it into an
  ONNX ``Loop``, which neither Barracuda nor Sentis nor the Inference Engine imports. Unity runs
  one step per decision, so :func:`unroll_single_step` rewrites the frozen loop into its body
  evaluated once (``sequence_length`` is fixed to 1) before conversion.
* **Sampling inside the graph.** Continuous noise is ``RandomNormal`` fed into the graph's own
  ``epsilon``; the deterministic output is the epsilon-free term of the reparameterisation (the
  mean). Discrete actions are sampled (``Multinomial``) from ``logits * mask - 1e8 * (1 - mask)``
  when the ``.bytes`` samples, and are the argmax when it does not (the imitation trainer). A
  modern brain's graph (several branches, or masks) masks and samples per branch itself: its
  ``action_masks`` becomes the ONNX input of that name.
* **Opset 9, bare names, initializer constants**: loads in every engine version (Barracuda's
  importer, Sentis' name matching, how each engine finds a constant). ``producer_name`` is rewritten
  because Barracuda sends tf2onnx files with recurrent inputs to its legacy importer.
* Every file is checked with ``onnx.checker`` and run once by onnxruntime at batch 1 on all-zero
  inputs (what Sentis does at load time) before it replaces the previous export atomically.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from trainers.export.frozen_graph import contract_inputs, freeze
from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException
from unityagents.brain import BrainParameters

#: The model-format version of ML-Agents 2.x-4.x (``ModelApiVersion.MLAgents2_0``).
MODEL_VERSION = 3
#: The opset every engine imports (Barracuda's documented choice; Sentis accepts 7-15).
DEFAULT_OPSET = 9
#: ``continuous_actions`` = clip(action, -CLIP, CLIP) / CLIP, as ML-Agents exports PPO policies.
CONTINUOUS_CLIP = 3.0
PRODUCER_NAME = "unityagents"
#: Outputs of the frozen graph (relative to the brain's scope) worth exporting when they exist.
OPTIONAL_OUTPUTS = ("action_probs", "value_estimate", "recurrent_out", "continuous_action", "discrete_action")
_LOOP_OPS = {"Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"}


@dataclasses.dataclass(frozen=True)
class OnnxExportSpec:
    """What the export needs to know about one brain (a trainer provides the same attributes).

    :param brain: the brain's parameters (spaces, cameras).
    :param graph_scope: the scope its nodes live under ("" when alone in the graph).
    :param output_nodes: the frozen graph's outputs, relative to the scope (``export_nodes()``).
    """

    brain: BrainParameters
    graph_scope: str
    output_nodes: Tuple[str, ...] = ("action",)

    @property
    def brain_name(self) -> str:
        return self.brain.brain_name

    def export_nodes(self) -> List[str]:
        return list(self.output_nodes)


def onnx_file_stem(brain_name: str) -> str:
    """The file name (without ``.onnx``) of a brain's export: a modern behaviour's ``?team=N`` is
    dropped, as ML-Agents names its files, and characters no file system takes become ``_``."""
    return re.sub(r"[^0-9A-Za-z_.-]+", "_", brain_name.split("?team=", 1)[0]) or "brain"


def export_onnx(sess: Any, trainers: Iterable[Any], model_path: str, opset: int = DEFAULT_OPSET,
                suffix: str = "") -> List[str]:
    """Write ``<model_path>/<Brain><suffix>.onnx`` for every exporting trainer; return the paths written.

    The controller writes ``<Brain>.onnx`` at the end of a run and ``<Brain>-<step>.onnx`` beside
    each checkpoint, as ML-Agents does.

    ``trainers`` are Trainer objects (or :class:`OnnxExportSpec`): anything with ``brain``
    (BrainParameters), ``brain_name``, ``graph_scope`` (None = exports nothing, as the ghost) and
    ``export_nodes()``. Each file is written to a temporary name, checked, then renamed, so an
    interrupted export never leaves a truncated model where Unity would pick it up.
    """
    paths = []
    for trainer in trainers:
        if getattr(trainer, "graph_scope", None) is None or not trainer.export_nodes():
            continue
        model = convert_brain(sess, trainer, opset=opset)
        name = onnx_file_stem(trainer.brain_name)
        paths.append(write_model_atomically(model, os.path.join(model_path, f"{name}{suffix}.onnx")))
    return paths


def convert_brain(sess: Any, trainer: Any, opset: int = DEFAULT_OPSET):
    """The ONNX ``ModelProto`` of one brain (see the module docstring for the contract)."""
    import onnx

    brain: BrainParameters = trainer.brain
    prefix = trainer.graph_scope + "/" if trainer.graph_scope else ""
    graph = sess.graph
    names = {op.name for op in graph.get_operations()}
    declared = dict(getattr(trainer, "onnx_action_outputs", dict)())
    outputs = list(dict.fromkeys(list(trainer.export_nodes()) + [n for n in OPTIONAL_OUTPUTS if prefix + n in names]
                                 + list(declared.values())))
    if "action" not in outputs:
        raise UnityTrainerException(
            f"ONNX export of brain '{brain.brain_name}': its exported nodes {outputs} have no 'action'; the ONNX "
            "contract's action outputs are derived from it. Export 'action' from the trainer.")
    with graph.as_default():
        frozen = freeze(sess, [prefix + n for n in outputs] + contract_inputs(graph, prefix))
    frozen = unroll_single_step(frozen, [prefix + n for n in outputs])
    wrapper, plan = _contract_graph(frozen, prefix, brain, outputs, declared)

    import logging

    import tf2onnx

    logging.getLogger("tf2onnx").setLevel(logging.ERROR)  # per-node shape chatter; failures still raise
    model, _ = tf2onnx.convert.from_graph_def(
        wrapper,
        input_names=[n + ":0" for n in plan["inputs"]],
        output_names=[n + ":0" for n in plan["outputs"]],
        opset=opset,
        inputs_as_nchw=[n + ":0" for n in plan["cameras"]],
        tensors_to_rename={n + ":0": n for n in plan["inputs"] + plan["outputs"]},
    )
    _explicit_split_sizes(model, brain.brain_name)
    _constants_as_initializers(model, plan["constants"], brain.brain_name)
    used = {node.domain or "" for node in model.graph.node}
    for entry in [o for o in model.opset_import if o.domain not in ("", "ai.onnx") and o.domain not in used]:
        model.opset_import.remove(entry)  # tf2onnx declares ai.onnx.ml even when no node uses it
    model.producer_name = PRODUCER_NAME
    model.producer_version = f"tf2onnx {tf2onnx.__version__}"
    model.doc_string = (f"Brain '{brain.brain_name}': ML-Agents model format {MODEL_VERSION}, exported from the "
                        "frozen TensorFlow graph by trainers/export/onnx_model.py")
    onnx.checker.check_model(model)
    smoke_test(model, brain.brain_name)
    return model


# ---------------------------------------------------------------------------------- the loop
def unroll_single_step(graph_def: Any, outputs: Sequence[str]) -> Any:
    """Rewrite every v1 ``while_loop`` of a frozen graph into its body run exactly once.

    Valid when the loop runs one iteration (the LSTM with ``sequence_length`` 1). The rewrite:
    ``Enter`` and the loop's ``Merge``/``Switch`` become ``Identity`` of the value entering the
    loop; ``Exit`` becomes ``Identity`` of what the body hands to ``NextIteration``; a
    ``TensorArray`` unstacked before the loop and read inside it becomes a ``Gather`` of the
    unstacked tensor; one written inside and stacked after becomes the written value with a
    leading axis of 1. The graph is then pruned to ``outputs``; an error names any loop op left.
    """
    nodes = {n.name: n for n in graph_def.node}
    if not any(n.op in _LOOP_OPS for n in graph_def.node):
        return graph_def

    def node_of(ref: str):
        return nodes[ref.lstrip("^").split(":")[0]]

    def source_array(ref: str) -> str:
        """The TensorArrayV3 node a handle reference comes from (through Enter/Identity)."""
        node = node_of(ref)
        while node.op in ("Enter", "Identity"):
            node = node_of(node.input[0])
        if node.op != "TensorArrayV3":
            raise UnityTrainerException(f"ONNX export: cannot unroll the loop: the TensorArray handle of "
                                        f"{ref!r} comes from a {node.op} node, expected TensorArrayV3.")
        return node.name

    scattered = {source_array(n.input[0]): n.input[2] for n in graph_def.node if n.op == "TensorArrayScatterV3"}
    out = tf.GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    extra = []
    for old in graph_def.node:
        node = out.node.add()
        node.CopyFrom(old)
        if old.op == "Enter":
            _make_identity(node, old.input[0], old.attr["T"].type)
        elif old.op == "Merge" and any(node_of(i).op == "NextIteration" for i in old.input):
            entering = next(i for i in old.input if node_of(i).op != "NextIteration")
            _make_identity(node, entering, old.attr["T"].type)
        elif old.op == "Switch" and node_of(old.input[1]).op == "LoopCond":
            _make_identity(node, old.input[0], old.attr["T"].type)
        elif old.op == "Exit":
            merge = node_of(node_of(old.input[0]).input[0])
            body_result = node_of(next(i for i in merge.input if node_of(i).op == "NextIteration")).input[0]
            _make_identity(node, body_result, old.attr["T"].type)
        elif old.op == "TensorArrayReadV3":
            array = source_array(old.input[0])
            if array not in scattered:
                raise UnityTrainerException(f"ONNX export: cannot unroll the loop: TensorArray {array} is read "
                                            "inside the loop but was not unstacked before it.")
            axis = _const_int(extra, old.name + "/unrolled_axis", 0)
            node.Clear()
            node.name, node.op = old.name, "GatherV2"
            node.input.extend([scattered[array], old.input[1], axis])
            node.attr["Tparams"].type = old.attr["dtype"].type
            node.attr["Tindices"].type = tf.int32.as_datatype_enum
            node.attr["Taxis"].type = tf.int32.as_datatype_enum
        elif old.op == "TensorArrayWriteV3":
            axis = _const_int(extra, old.name + "/unrolled_axis", 0)
            node.Clear()
            node.name, node.op = old.name, "ExpandDims"
            node.input.extend([old.input[2], axis])
            node.attr["T"].type = old.attr["T"].type
            node.attr["Tdim"].type = tf.int32.as_datatype_enum
        elif old.op == "TensorArrayGatherV3":
            _make_identity(node, old.input[2], old.attr["dtype"].type)
        elif old.op == "TensorArraySizeV3":
            node.Clear()
            node.name = old.name
            _fill_const(node, 1)
    # Consumers of a Switch's "true" output (the body) now read the Identity's only output.
    switches = {n.name for n in graph_def.node if n.op == "Switch" and node_of(n.input[1]).op == "LoopCond"}
    for node in out.node:
        for i, ref in enumerate(node.input):
            if ref.endswith(":1") and ref[:-2] in switches:
                node.input[i] = ref[:-2]
    out.node.extend(extra)
    pruned = tf.graph_util.extract_sub_graph(out, [o.split(":")[0] for o in outputs])
    left = sorted({n.op for n in pruned.node if n.op in _LOOP_OPS or n.op.startswith("TensorArray")})
    if left:
        raise UnityTrainerException(f"ONNX export: after unrolling the loop one step, ops {left} remain; ONNX "
                                    "engines in Unity cannot import loops. This is a bug in the model or here.")
    return pruned


def _make_identity(node: Any, source: str, dtype: int) -> None:
    name = node.name
    node.Clear()
    node.name, node.op = name, "Identity"
    node.input.append(source)
    node.attr["T"].type = dtype


def _fill_const(node: Any, value: int) -> None:
    node.op = "Const"
    node.attr["dtype"].type = tf.int32.as_datatype_enum
    node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.int32(value)))


def _const_int(extra: list, name: str, value: int) -> str:
    node = tf.NodeDef()
    node.name = name
    _fill_const(node, value)
    extra.append(node)
    return name


# ---------------------------------------------------------------------------------- the contract
def _contract_graph(frozen: Any, prefix: str, brain: BrainParameters, outputs: List[str],
                    declared: Optional[Dict[str, str]] = None) -> Tuple[Any, Dict]:
    """A graph with the contract's inputs and outputs around the imported frozen brain.

    :param declared: contract output -> frozen node that is that output as it is (a trainer's
        ``onnx_action_outputs()``; SAC's tanh-squashed actions), instead of the derived default.
    """
    declared = declared or {}
    frozen = _defaults_as_identity(frozen, keep={prefix + "epsilon", prefix + "action_masks"})
    nodes = {n.name: n for n in frozen.node}
    graph = tf.Graph()
    plan: Dict[str, List[str]] = {"inputs": [], "outputs": [], "cameras": [], "constants": []}
    with graph.as_default():
        input_map: Dict[str, tf.Tensor] = {}
        batch = _sensor_inputs(brain, prefix, nodes, input_map, plan)
        if batch is None:
            raise UnityTrainerException(f"ONNX export of brain '{brain.brain_name}': the graph has neither "
                                        f"{prefix}state nor {prefix}observation_0 to read observations from.")
        if prefix + "batch_size" in nodes:
            input_map[f"{prefix}batch_size:0"] = batch
        if prefix + "sequence_length" in nodes:
            input_map[f"{prefix}sequence_length:0"] = tf.constant(1, tf.int32)
        memory = 0
        if prefix + "recurrent_in" in nodes and "recurrent_out" in outputs:
            memory = int(nodes[prefix + "recurrent_in"].attr["shape"].shape.dim[-1].size)
            memory_in = tf.placeholder(tf.float32, [None, 1, memory], name="recurrent_in")
            plan["inputs"].append(memory_in.op.name)
            input_map[f"{prefix}recurrent_in:0"] = tf.reshape(memory_in, [-1, memory])
        continuous = brain.action_space_type == "continuous"
        hybrid = bool(getattr(brain, "is_hybrid", False))  # continuous actions and discrete branches
        n_actions = brain.action_space_size
        noise = mask = None
        branches = list(getattr(brain, "action_branches", None) or [n_actions])
        graph_masks = prefix + "action_masks" in nodes  # a modern brain's policy applies masks itself
        if hybrid and not (graph_masks and "continuous_action" in outputs and "discrete_action" in outputs):
            raise UnityTrainerException(
                f"ONNX export of brain '{brain.brain_name}': it has hybrid actions, but its graph lacks "
                "action_masks, continuous_action or discrete_action; build it with trainers/ppo/models.py.")
        if not continuous or hybrid:
            mask = tf.placeholder(tf.float32, [None, int(sum(branches))], name="action_masks")
            plan["inputs"].append(mask.op.name)
            if graph_masks:
                input_map[f"{prefix}action_masks:0"] = mask
            elif len(branches) != 1:
                raise UnityTrainerException(
                    f"ONNX export of brain '{brain.brain_name}': it has {len(branches)} discrete branches but its "
                    "graph has no action_masks input to tell them apart; build it with trainers/ppo/models.py.")
        if continuous and prefix + "epsilon" in nodes:
            noise = tf.random_normal(tf.stack([batch, n_actions]), name="action_noise")
            input_map[f"{prefix}epsilon:0"] = noise
        wanted = [f"{prefix}{n}:0" for n in outputs]
        imported = dict(zip(outputs, tf.import_graph_def(frozen, input_map=input_map, return_elements=wanted,
                                                         name="policy")))

        def output(tensor: tf.Tensor, name: str) -> None:
            plan["outputs"].append(tf.identity(tensor, name=name).op.name)
            if tensor.op.type == "Const":
                plan["constants"].append(name)

        output(tf.constant([float(MODEL_VERSION)], tf.float32), "version_number")
        output(tf.constant([float(memory)], tf.float32), "memory_size")
        action = imported["action"]
        if continuous:
            if hybrid:  # the continuous part of the action row
                action = imported["continuous_action"]
            mean = action if noise is None or "deterministic_continuous_actions" in declared \
                else _noise_free_term(action, noise, brain.brain_name)
            output(tf.constant([float(n_actions)], tf.float32), "continuous_action_output_shape")
            for name, value in (("continuous_actions", action), ("deterministic_continuous_actions", mean)):
                if name in declared:
                    output(imported[declared[name]], name)
                else:
                    output(tf.clip_by_value(value, -CONTINUOUS_CLIP, CONTINUOUS_CLIP) / CONTINUOUS_CLIP, name)
        if hybrid or (not continuous and graph_masks):
            # The graph masks and samples per branch; argmax of each branch's probabilities.
            action = imported["discrete_action"] if hybrid else action
            probs = imported.get("action_probs")
            greedy = action
            if probs is not None:
                starts = np.cumsum([0] + branches[:-1])
                greedy = tf.concat([tf.expand_dims(tf.argmax(probs[:, int(start):int(start) + size], axis=1,
                                                             output_type=tf.int64), 1)
                                    for start, size in zip(starts, branches)], axis=1)
            sampled = tf.cast(action, tf.int64) if _samples(action) else greedy
        elif not continuous:
            logits = _logits_of(imported, brain.brain_name)
            masked = logits * mask - 1e8 * (1.0 - mask)
            greedy = tf.expand_dims(tf.argmax(masked, axis=1, output_type=tf.int64), 1)
            sampled = tf.multinomial(masked, 1, output_dtype=tf.int64) if _samples(action) else greedy
        if not continuous or hybrid:
            output(tf.constant([[float(b) for b in branches]], tf.float32), "discrete_action_output_shape")
            output(sampled, "discrete_actions")
            output(greedy, "deterministic_discrete_actions")
        if memory:
            output(tf.reshape(imported["recurrent_out"], [-1, 1, memory]), "recurrent_out")
        if "value_estimate" in imported:
            output(imported["value_estimate"], "value_estimate")
    return graph.as_graph_def(), plan


def _sensor_inputs(brain: BrainParameters, prefix: str, nodes: Dict[str, Any], input_map: Dict[str, tf.Tensor],
                   plan: Dict[str, List[str]]) -> Optional[tf.Tensor]:
    """One ``obs_k`` placeholder per sensor of ``brain.sensors``, in that order; returns the batch size.

    A camera feeds its ``observation_<camera>`` (NHWC here, converted to ``[b, C, H, W]``); the
    vector sensors, each ``[b, *shape]``, are flattened and concatenated in sensor order into the
    frozen ``state``: that order is the state's own (``Sensor.offset``), so the graph's per-element
    normaliser sees each value where training saw it. A discrete API-2 state is its index ``[b, 1]``.
    """
    batch = None
    vectors = []
    for k, sensor in enumerate(brain.sensors):
        if sensor.is_camera:
            channels, height, width = sensor.shape
            tensor = tf.placeholder(tf.float32, [None, height, width, channels], name=f"obs_{k}")
            input_map[f"{prefix}observation_{sensor.camera}:0"] = tensor
            plan["cameras"].append(tensor.op.name)
        else:
            tensor = tf.placeholder(tf.float32, [None, *sensor.shape], name=f"obs_{k}")
            vectors.append(tensor if len(sensor.shape) == 1 else tf.reshape(tensor, [-1, sensor.size]))
        plan["inputs"].append(tensor.op.name)
        batch = tf.shape(tensor)[0] if batch is None else batch
    if vectors and prefix + "state" in nodes:
        state = vectors[0] if len(vectors) == 1 else tf.concat(vectors, axis=1, name="state_of_sensors")
        discrete_state = brain.state_space_type == "discrete"
        input_map[f"{prefix}state:0"] = tf.cast(state, tf.int32) if discrete_state else state
    return batch


def _defaults_as_identity(graph_def: Any, keep: set) -> Any:
    """``PlaceholderWithDefault`` nodes (other than ``keep``) become ``Identity`` of their default:
    ONNX has no optional inputs, and Unity feeds only the contract's inputs."""
    out = tf.GraphDef()
    out.CopyFrom(graph_def)
    for node in out.node:
        if node.op == "PlaceholderWithDefault" and node.name not in keep:
            _make_identity(node, node.input[0], node.attr["dtype"].type)
    return out


def _depends_on(tensor: tf.Tensor, target: tf.Operation) -> bool:
    seen, stack = set(), [tensor.op]
    while stack:
        op = stack.pop()
        if op is target:
            return True
        if op.name in seen:
            continue
        seen.add(op.name)
        stack.extend(t.op for t in op.inputs)
    return False


def _noise_free_term(action: tf.Tensor, noise: tf.Tensor, brain_name: str) -> tf.Tensor:
    """The mean of ``action = mean + f(epsilon)``: the input of the last ``Add`` that ignores epsilon."""
    tensor = action
    while tensor.op.type == "Identity":
        tensor = tensor.op.inputs[0]
    if tensor.op.type in ("Add", "AddV2"):
        free = [t for t in tensor.op.inputs if not _depends_on(t, noise.op)]
        if len(free) == 1:
            return free[0]
    raise UnityTrainerException(
        f"ONNX export of brain '{brain_name}': its continuous 'action' is not 'mean + noise(epsilon)' (found a "
        f"{tensor.op.type} op), so the deterministic output cannot be derived. Build the action as mu + sigma * "
        "epsilon, as trainers/ppo/models.py does.")


def _logits_of(imported: Dict[str, tf.Tensor], brain_name: str) -> tf.Tensor:
    """The logits behind ``action_probs`` (its Softmax input), or, for a sampled action, the Multinomial's."""
    probs = imported.get("action_probs")
    if probs is not None:
        tensor = probs
        while tensor.op.type == "Identity":
            tensor = tensor.op.inputs[0]
        if tensor.op.type == "Softmax":
            return tensor.op.inputs[0]
        return tf.log(tf.maximum(probs, 1e-30))
    tensor = imported["action"]
    stack = [tensor.op]
    while stack:  # the imitation model exports only action = argmax(logits)
        op = stack.pop()
        if op.type in ("ArgMax", "Multinomial"):
            return op.inputs[0]
        stack.extend(t.op for t in op.inputs)
    raise UnityTrainerException(
        f"ONNX export of brain '{brain_name}': found neither 'action_probs' nor an ArgMax/Multinomial behind "
        "'action', so the discrete logits needed for action masks are unknown. Export 'action_probs'.")


def _samples(action: tf.Tensor) -> bool:
    """Whether the frozen ``action`` draws at random (then the ONNX one samples too)."""
    seen, stack = set(), [action.op]
    while stack:
        op = stack.pop()
        if op.type in ("Multinomial", "RandomStandardNormal", "RandomUniform"):
            return True
        if op.name not in seen:
            seen.add(op.name)
            stack.extend(t.op for t in op.inputs)
    return False


def _explicit_split_sizes(model: Any, brain_name: str) -> None:
    """Give every ``Split`` its ``split`` attribute: tf2onnx leaves it out for equal parts, and
    Barracuda refuses a Split without it ("Unsupported default attribute `split`")."""
    import onnx

    splits = [n for n in model.graph.node if n.op_type == "Split" and not any(a.name == "split" for a in n.attribute)]
    if not splits:
        return
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: v.type.tensor_type.shape for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    for node in splits:
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        shape = shapes.get(node.input[0])
        dims = [d.dim_value if d.HasField("dim_value") else None for d in shape.dim] if shape is not None else []
        size = dims[axis] if -len(dims) <= axis < len(dims) else None
        parts = len(node.output)
        if not size or size % parts:
            raise UnityTrainerException(
                f"ONNX export of brain '{brain_name}': Split node {node.name} splits a dimension of unknown or "
                f"uneven size ({size}) into {parts}; Barracuda needs explicit sizes. Give the tensor a static shape.")
        node.attribute.append(onnx.helper.make_attribute("split", [size // parts] * parts))


def _constants_as_initializers(model: Any, names: Sequence[str], brain_name: str) -> None:
    """Make each constant output (``version_number``, ...) an initializer of the same name.

    Barracuda finds a constant only as a dataset of that exact name; tf2onnx merges equal
    constants (``version_number`` [3] and a 3-action ``continuous_action_output_shape`` [3]) and
    routes one through an ``Identity``, which this undoes.
    """
    from onnx import numpy_helper

    initializers = {i.name: i for i in model.graph.initializer}
    producers = {out: node for node in model.graph.node for out in node.output}
    for name in names:
        if name in initializers:
            continue
        node, source = producers.get(name), name
        while source not in initializers and node is not None and node.op_type == "Identity":
            source = node.input[0]
            node = producers.get(source)
        if source not in initializers:
            raise UnityTrainerException(f"ONNX export of brain '{brain_name}': the constant output {name!r} is not "
                                        "computed from an initializer; Unity would not find it.")
        value = numpy_helper.to_array(initializers[source])
        model.graph.initializer.append(numpy_helper.from_array(value, name))
        model.graph.node.remove(producers[name])


# ---------------------------------------------------------------------------------- checks, I/O
def zero_inputs(model: Any, batch: int = 1) -> Dict[str, np.ndarray]:
    """All-zero inputs of the declared shapes, symbolic dims set to ``batch`` (Sentis' load check)."""
    feeds = {}
    for value in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else batch for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = np.zeros(dims, np.float32)
    return feeds


def smoke_test(model: Any, brain_name: str = "") -> Dict[str, np.ndarray]:
    """Run ``model`` once in onnxruntime on all-zero batch-1 inputs; an error if it fails or yields NaN."""
    import onnxruntime

    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        results = dict(zip(names, session.run(names, zero_inputs(model))))
    except Exception as exc:
        raise UnityTrainerException(f"ONNX export of brain '{brain_name}': onnxruntime cannot run the converted "
                                    f"model at batch 1 on zero inputs ({exc}); Unity would fail the same way.") from exc
    bad = [n for n, v in results.items() if np.issubdtype(v.dtype, np.floating) and not np.isfinite(v).all()]
    if bad:
        raise UnityTrainerException(f"ONNX export of brain '{brain_name}': outputs {bad} are not finite at batch 1 "
                                    "on zero inputs.")
    return results


def write_model_atomically(model: Any, path: str) -> str:
    """Serialise ``model`` to ``path`` through a temporary file in the same folder and a rename."""
    from trainers.export.frozen_graph import write_atomically

    return write_atomically(path, model.SerializeToString())


def spec_for(brain: BrainParameters, graph_scope: str, output_nodes: Optional[Sequence[str]] = None) -> OnnxExportSpec:
    """An :class:`OnnxExportSpec` for a model built outside a trainer (tests, tools)."""
    return OnnxExportSpec(brain, graph_scope, tuple(output_nodes or ("action",)))


__all__ = ["MODEL_VERSION", "DEFAULT_OPSET", "CONTINUOUS_CLIP", "OnnxExportSpec", "export_onnx", "convert_brain",
           "unroll_single_step", "smoke_test", "zero_inputs", "write_model_atomically", "spec_for"]
