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
* Every file is also checked against the importers of the engines the C# packages of ML-Agents
  Release 19+ ship (:data:`trainers.export.model_check.EXPORT_ENGINES`): onnxruntime accepts what
  Unity's importers refuse. A finding is a warning in the log naming the engine; with ``strict`` (the
  run's ``--strict-export``) it is :class:`ModelCheckError` and the file is not written.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from trainers.export.frozen_graph import contract_inputs, freeze
from trainers.export.model_check import EXPORT_ENGINES, check_model
from trainers.export.onnx_contract import CONTINUOUS_CLIP, MODEL_VERSION, contract_graph
from trainers.export.onnx_loop import unroll_single_step
from trainers.trainer.base import UnityTrainerException
from unityagents.brain import BrainParameters

#: The opset every engine imports (Barracuda's documented choice; Sentis accepts 7-15).
DEFAULT_OPSET = 9
PRODUCER_NAME = "unityagents"
#: Outputs of the frozen graph (relative to the brain's scope) worth exporting when they exist.
OPTIONAL_OUTPUTS = ("action_probs", "value_estimate", "recurrent_out", "continuous_action", "discrete_action")

logger = logging.getLogger("unityagents")


class ModelCheckError(UnityTrainerException):
    """An export that an engine of ML-Agents' C# packages would refuse or warn about, with ``strict`` on."""


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
                suffix: str = "", strict: bool = False) -> List[str]:
    """Write ``<model_path>/<Brain><suffix>.onnx`` for every exporting trainer; return the paths written.

    The controller writes ``<Brain>.onnx`` at the end of a run and ``<Brain>-<step>.onnx`` beside
    each checkpoint, as ML-Agents does.

    ``trainers`` are Trainer objects (or :class:`OnnxExportSpec`): anything with ``brain``
    (BrainParameters), ``brain_name``, ``graph_scope`` (None = exports nothing, as the ghost) and
    ``export_nodes()``. Each file is written to a temporary name, checked, then renamed, so an
    interrupted export never leaves a truncated model where Unity would pick it up. Each model is
    checked against the Unity engines first (:func:`check_export`; ``strict``: a finding is an error).
    """
    paths = []
    for trainer in trainers:
        if getattr(trainer, "graph_scope", None) is None or not trainer.export_nodes():
            continue
        model = convert_brain(sess, trainer, opset=opset)
        path = os.path.join(model_path, f"{onnx_file_stem(trainer.brain_name)}{suffix}.onnx")
        check_export(model, path, strict)
        paths.append(write_model_atomically(model, path))
    return paths


def check_export(model: Any, path: str, strict: bool = False, engines: Sequence[str] = tuple(EXPORT_ENGINES)) -> int:
    """Check ``model`` (to be written at ``path``) against ``engines``; log each finding as a warning naming
    the engine and return how many there were, or, with ``strict``, raise :class:`ModelCheckError` naming them.
    Notes (e.g. an op a GPU worker runs on the CPU) are neither."""
    report = check_model(model, engines, path=path)
    problems = [f for v in report.verdicts for f in v.problems()]
    if strict and problems:
        raise ModelCheckError(
            f"The ONNX export {path} would not load cleanly in Unity ({len(problems)} finding(s)): "
            + "; ".join(f"{f.engine}: {f.line()}" for f in problems[:5]) + (" ..." if len(problems) > 5 else "")
            + ". It was not written (--strict-export); run without it to export anyway, or check the file with "
              "unityagents-check-model.")
    for f in problems:
        logger.warning("%s, %s: %s", os.path.basename(path), f.engine, f.line())
    return len(problems)


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
    wrapper, plan = contract_graph(frozen, prefix, brain, outputs, declared)

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
           "check_export", "ModelCheckError",
           "unroll_single_step", "smoke_test", "zero_inputs", "write_model_atomically", "spec_for"]
