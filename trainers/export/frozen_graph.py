"""Freeze the trained brains into one ``.bytes`` GraphDef that Unity's Internal brain can load.

The file holds every exported brain under its graph scope (no prefix when only one External
brain is trained), with variables folded into constants, no function library, and only op types
that a TensorFlow 1.x-era runtime (TensorFlowSharp in Unity 2017) knows. Modern TensorFlow
emits a few newer ops and attributes even in v1 graph mode; they are rewritten here:

* ``AddV2`` becomes ``Add`` (identical semantics for the float inputs we use);
* attributes equal to their op's default value are dropped, so attributes that newer
  TensorFlow versions added (with defaults) do not reach an older runtime that rejects them.

Anything else from the post-1.x era (``While``/``StatelessWhile``, function calls, resource
variables) is refused with an error, because it would only fail later inside Unity.
"""
from __future__ import annotations

import os
import tempfile
from typing import Iterable, List, Set

from trainers.tf_utils import strip_default_attrs, tf
from trainers.trainer.base import UnityTrainerException

#: Op types that did not exist in the TensorFlow 1.x runtimes Unity shipped with.
FORBIDDEN_OPS: Set[str] = {
    "AddV2", "BatchMatMulV2", "BatchMatMulV3", "SelectV2", "While", "StatelessWhile", "If",
    "StatelessIf", "Case", "StatelessCase", "PartitionedCall", "StatefulPartitionedCall",
    "VarHandleOp", "ReadVariableOp", "AssignVariableOp", "Einsum", "_FusedMatMul", "_FusedConv2D",
    "StatelessRandomUniformV2", "StatelessRandomNormalV2", "RandomStandardNormalV2", "TensorListReserve",
    "TensorListFromTensor", "TensorListStack", "TensorListSetItem", "TensorListGetItem",
}
_REWRITES = {"AddV2": "Add"}


def freeze(sess, output_nodes: Iterable[str]):
    """A frozen, TF-1.x-compatible GraphDef that keeps only what ``output_nodes`` need."""
    output_nodes = list(output_nodes)
    graph_def = sess.graph.as_graph_def()
    frozen = tf.graph_util.convert_variables_to_constants(sess, graph_def, output_nodes)
    frozen.library.Clear()
    for node in frozen.node:
        node.op = _REWRITES.get(node.op, node.op)
        node.device = ""
    frozen = strip_default_attrs(frozen)
    check_ops(frozen)
    return frozen


def check_ops(graph_def) -> None:
    """Refuse a graph with op types a TensorFlow 1.x-era runtime cannot run."""
    bad = sorted({n.op for n in graph_def.node if n.op in FORBIDDEN_OPS})
    if bad:
        raise UnityTrainerException(
            f"The exported graph contains op types that Unity's TensorFlow 1.x runtime does not know: {bad}. "
            "This is a bug in the model code: build it with trainers.tf_utils (v1 control flow, "
            "classic variables) and avoid newer ops.")
    if len(graph_def.library.function):
        raise UnityTrainerException("The exported graph contains a function library, which Unity cannot load.")


#: Inputs of the export contract (``docs/plugins.md`` §6). They are kept even when no output needs them
#: (``batch_size`` feeds nothing in our models), because Unity's Internal brain detects them by name.
CONTRACT_INPUTS = ("state", "batch_size", "sequence_length", "recurrent_in", "epsilon")


def contract_inputs(graph, scope_prefix: str) -> List[str]:
    """The contract's input nodes (and ``observation_k``) that exist under ``scope_prefix``."""
    names = {op.name for op in graph.get_operations()}
    found = [scope_prefix + n for n in CONTRACT_INPUTS if scope_prefix + n in names]
    k = 0
    while f"{scope_prefix}observation_{k}" in names:
        found.append(f"{scope_prefix}observation_{k}")
        k += 1
    return found


def write_atomically(path: str, data: bytes) -> str:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename: a crash
    leaves the old file or the new one, never half of one. Every file a run writes goes through here."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".write-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; these files are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def export_graph(sess, output_nodes: List[str], path: str, keep_nodes: Iterable[str] = ()) -> List[str]:
    """Write the frozen graph of ``output_nodes`` (and ``keep_nodes``) to ``path`` atomically."""
    frozen = freeze(sess, list(output_nodes) + [n for n in keep_nodes if n not in output_nodes])
    write_atomically(path, frozen.SerializeToString())
    return output_nodes


def load_graph_def(path: str):
    """Read a ``.bytes`` file back (tests and tools)."""
    graph_def = tf.GraphDef()
    with open(path, "rb") as f:
        graph_def.ParseFromString(f.read())
    return graph_def
