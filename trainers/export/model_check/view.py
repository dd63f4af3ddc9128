"""One read of an ONNX file that every rule looks at: nodes, constants, inferred types and ranks."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np


class NotAModel(ValueError):
    """The file is not an ONNX model (missing, unreadable, truncated, or another format)."""


def load_model(source: Any) -> Any:
    """``source`` as an ``onnx.ModelProto``: a path, bytes, or a ModelProto (returned as it is)."""
    import onnx
    from google.protobuf.message import DecodeError

    if isinstance(source, onnx.ModelProto):
        return source
    name = "the bytes given"
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        if os.path.isdir(name):
            raise NotAModel(f"{name}: a folder, not a file. Give the path of an .onnx model in it.")
        if not os.path.isfile(name):
            raise NotAModel(f"{name}: no such file. Give the path of an .onnx model.")
        try:
            with open(name, "rb") as f:
                source = f.read()
        except OSError as e:
            raise NotAModel(f"{name}: cannot be read ({e.strerror or e}).") from None
    model = onnx.ModelProto()
    try:
        model.ParseFromString(source)
    except (DecodeError, ValueError, TypeError, RuntimeError) as e:
        raise NotAModel(f"{name}: not an ONNX model, or a truncated one (the protobuf does not parse: "
                        f"{str(e).splitlines()[0] if str(e) else type(e).__name__}). Export it again.") from None
    if model.ir_version <= 0 or not model.HasField("graph") or not (model.graph.node or model.graph.output):
        raise NotAModel(f"{name}: not an ONNX model (no IR version or no graph; {len(source)} bytes). "
                        "Give the .onnx file Unity would import.")
    return model


class ModelView:
    """What the rules ask of a model, computed once."""

    def __init__(self, model: Any):
        import onnx

        self.model = model
        self.graph = model.graph
        self.nodes = list(model.graph.node)
        self.initializers: Dict[str, Any] = {t.name: t for t in model.graph.initializer}
        #: Constants computed by a ``Constant`` node (its ``value`` tensor), by output name.
        self.constant_nodes: Dict[str, Any] = {}
        for node in self.nodes:
            if node.op_type == "Constant" and node.output:
                value = next((a.t for a in node.attribute if a.name == "value"), None)
                if value is not None:
                    self.constant_nodes[node.output[0]] = value
        self.producers = {out: node for node in self.nodes for out in node.output}
        self.consumers: Dict[str, List[Tuple[Any, int]]] = {}
        for node in self.nodes:
            for i, name in enumerate(node.input):
                if name:
                    self.consumers.setdefault(name, []).append((node, i))
        self.inputs = [i for i in model.graph.input if i.name not in self.initializers]
        self.outputs = list(model.graph.output)
        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph
            values = list(inferred.value_info) + list(inferred.input) + list(inferred.output)
        except Exception:  # a model shape inference cannot follow: rules fall back to what the file declares
            values = list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output)
        self.types: Dict[str, Any] = {v.name: v.type.tensor_type for v in values if v.type.HasField("tensor_type")}
        for name, tensor in list(self.initializers.items()) + list(self.constant_nodes.items()):
            self.types.setdefault(name, _TensorType(tensor.data_type, list(tensor.dims)))
        self.opsets = {o.domain: o.version for o in model.opset_import}

    # ------------------------------------------------------------------ lookups
    @staticmethod
    def label(node: Any) -> str:
        return node.name or f"{node.op_type}({', '.join(node.output)})"

    def is_constant(self, name: str) -> bool:
        return name in self.initializers or name in self.constant_nodes

    def constant(self, name: str) -> Optional[np.ndarray]:
        from onnx import numpy_helper

        tensor = self.initializers.get(name) or self.constant_nodes.get(name)
        if tensor is None:
            return None
        try:
            return numpy_helper.to_array(tensor)
        except Exception:  # external or unreadable data: the constant rules say so
            return None

    def elem_type(self, name: str) -> Optional[int]:
        t = self.types.get(name)
        return t.elem_type if t is not None and t.elem_type else None

    def dims(self, name: str) -> Optional[List[Any]]:
        """Each dim as an int, a symbolic name (str) or None; None when the rank is unknown."""
        t = self.types.get(name)
        if t is None:
            return None
        if isinstance(t, _TensorType):
            return list(t.dims)
        if not t.HasField("shape"):
            return None
        return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]

    def rank(self, name: str) -> Optional[int]:
        dims = self.dims(name)
        return None if dims is None else len(dims)

    def default_opset(self) -> Optional[int]:
        return self.opsets.get("")


class _TensorType:
    """The type of a constant, shaped like a ``TypeProto.Tensor`` for the lookups above."""

    def __init__(self, elem_type: int, dims: List[int]):
        self.elem_type = elem_type
        self.dims = dims


def dtype_name(elem_type: Optional[int]) -> str:
    from onnx import TensorProto

    if not elem_type:
        return "UNDEFINED"
    return TensorProto.DataType.Name(elem_type)
