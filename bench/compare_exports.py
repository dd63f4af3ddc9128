"""Compare the exports of two ``bench/wire_hashes.py`` output folders, model by model.

The frozen ``.bytes`` graphs by node names, ops, inputs and every constant; the ``.onnx`` files by
op types, inputs and outputs, and initializer values (their generated names differ from run to
run, and both files differ byte-wise between two runs of the same code)::

    python bench/compare_exports.py <outdir before> <outdir after>
"""
import glob
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
from tensorflow import make_ndarray
from tensorflow.compat.v1 import GraphDef


def frozen(path):
    graph = GraphDef()
    with open(path, "rb") as f:
        graph.ParseFromString(f.read())
    ops = [(n.name, n.op, tuple(n.input)) for n in graph.node]
    return ops, [make_ndarray(n.attr["value"].tensor) for n in graph.node if n.op == "Const"]


def onnx_model(path):
    model = onnx.load(path)
    inputs = sorted((i.name, str(i.type.tensor_type.shape)) for i in model.graph.input)
    ops = sorted(n.op_type for n in model.graph.node) + [inputs, sorted(o.name for o in model.graph.output)]
    values = [numpy_helper.to_array(t) for t in model.graph.initializer]
    return ops, sorted(values, key=lambda a: (a.shape, a.dtype.str, a.tobytes()))


def main(before: str, after: str) -> None:
    for run in sorted(set(os.listdir(os.path.join(before, "models"))) & set(os.listdir(os.path.join(after, "models")))):
        files = glob.glob(os.path.join(before, "models", run, "*.bytes")) + glob.glob(
            os.path.join(before, "models", run, "*.onnx"))
        for path in sorted(files):
            read = frozen if path.endswith(".bytes") else onnx_model
            (ops_a, values_a), (ops_b, values_b) = read(path), read(path.replace(before, after, 1))
            same = len(values_a) == len(values_b) and all(np.array_equal(a, b) for a, b in zip(values_a, values_b))
            print(f"{run}/{os.path.basename(path)}: ops {'same' if ops_a == ops_b else 'DIFFER'} ({len(ops_a)}), "
                  f"weights {'identical' if same else 'DIFFER'}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
