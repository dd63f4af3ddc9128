"""One step of a frozen LSTM loop, without the loop: what the ONNX export converts.

The recurrent model unrolls its LSTM with a v1 ``tf.while_loop`` so that the ``.bytes`` runs on
TensorFlow 1.x; tf2onnx would turn that loop into an ONNX ``Loop``, which neither Barracuda nor
Sentis nor the Inference Engine imports. Unity runs one step per decision, so the loop is
rewritten into its body evaluated once (``sequence_length`` fixed to 1) before conversion.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException

_LOOP_OPS = {"Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"}


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
            make_identity(node, old.input[0], old.attr["T"].type)
        elif old.op == "Merge" and any(node_of(i).op == "NextIteration" for i in old.input):
            entering = next(i for i in old.input if node_of(i).op != "NextIteration")
            make_identity(node, entering, old.attr["T"].type)
        elif old.op == "Switch" and node_of(old.input[1]).op == "LoopCond":
            make_identity(node, old.input[0], old.attr["T"].type)
        elif old.op == "Exit":
            merge = node_of(node_of(old.input[0]).input[0])
            body_result = node_of(next(i for i in merge.input if node_of(i).op == "NextIteration")).input[0]
            make_identity(node, body_result, old.attr["T"].type)
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
            make_identity(node, old.input[2], old.attr["dtype"].type)
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


def make_identity(node: Any, source: str, dtype: int) -> None:
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
