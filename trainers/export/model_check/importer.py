"""What one engine version's ONNX importer makes of a model, read from that engine's table.

The code here knows the *kinds* of rule (an op outside the set, an attribute the importer ignores,
an input it needs constant, a rank it cannot hold, a constant it clamps, ...); which ops, attributes,
limits and messages apply is the table's (``engines/<engine>.yaml``). Each rule returns findings
with the node, the rule's id and the text the engine would write.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List

import numpy as np

from trainers.export.model_check.report import Finding
from trainers.export.model_check.tables import TableError, hints
from trainers.export.model_check.view import ModelView, dtype_name

INT32_MAX = 2 ** 31 - 1
FLOAT32_EXACT = 2 ** 24
_FLOATS = {1, 10, 11, 16}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16
_INTEGERS = {2, 3, 4, 5, 6, 7, 12, 13}  # UINT8, INT8, UINT16, INT16, INT32, INT64, UINT32, UINT64


class _Fields(dict):
    def __missing__(self, key):
        return "{" + key + "}"


def say(template: str, **fields: Any) -> str:
    """``template`` with the fields it names filled in (unknown fields stay as written)."""
    return template.format_map(_Fields({k: v for k, v in fields.items()}))


def check_engine(view: ModelView, table: Dict[str, Any]) -> List[Finding]:
    engine = table["engine"]
    out: List[Finding] = []

    def found(row: Dict[str, Any], rule: str, node: str, fix: str = None, **fields) -> None:
        out.append(Finding(engine, row["severity"], rule, node, say(row["message"], node=node, **fields),
                           row["source"], fix))

    _opset(view, table, found)
    _unknown_ops(view, table, found)
    _constants(view, table, found)
    _graph(view, table, found)
    for row in table["rules"]:
        kind = RULES.get(row["kind"])
        if kind is None:
            raise TableError(f"engine table {engine}: rule {row['id']} has an unknown kind {row['kind']!r}; "
                             f"the kinds are {', '.join(sorted(RULES))}")
        ops = set(row.get("ops") or ["*"])
        for node in view.nodes:
            if "*" in ops or node.op_type in ops:
                for fields in kind(view, row, node):
                    found(row, row["id"], ModelView.label(node), op=node.op_type, **fields)
    return out


# ------------------------------------------------------------------------------------ table sections
def _opset(view: ModelView, table: Dict[str, Any], found: Callable) -> None:
    row = table.get("opset")
    if not row:
        return
    domains = [o.domain for o in view.model.opset_import]
    opset = view.default_opset()
    if opset is None:
        assumed = table.get("missing_default_domain_opset")
        spelled = "ai.onnx" in domains
        if assumed is not None:
            found({**row, "severity": "warning",
                   "message": "The default ONNX domain is " + ("spelled 'ai.onnx'" if spelled else "not declared")
                   + f"; the importer matches only an empty domain and reads every op as opset {assumed}."},
                  "opset-domain", "opset_import")
        opset = view.opsets.get("ai.onnx")
        if opset is None:
            return
    low, high = row.get("documented") or row.get("recommended")
    if not low <= opset <= high:
        found({**row, "severity": row.get("severity", "warning")}, "opset", "opset_import", opset=opset)


def _unknown_ops(view: ModelView, table: Dict[str, Any], found: Callable) -> None:
    row = {**table["unknown_op"], "source": table["unknown_op"]["source"]}
    known = table["ops"]
    fixes = hints()
    for node in view.nodes:
        if node.op_type not in known:
            fix = (fixes.get(node.op_type) or {}).get("fix")
            found(row, "unknown-op", ModelView.label(node), fix, op=node.op_type)


def _uses_are_harmless(view: ModelView, name: str, harmless: Iterable[Dict[str, Any]]) -> bool:
    uses = view.consumers.get(name, [])
    allowed = [(h["op"], set(h.get("inputs", []))) for h in harmless or []]
    return bool(uses) and all(any(node.op_type == op and i in inputs for op, inputs in allowed) for node, i in uses)


def _constants(view: ModelView, table: Dict[str, Any], found: Callable) -> None:
    rows = table.get("constants") or {}
    tensors = list(view.initializers.items()) + list(view.constant_nodes.items())
    for name, tensor in tensors:
        dtype = dtype_name(tensor.data_type)
        row = rows.get("external_data")
        if row and tensor.data_location == 1:  # TensorProto.EXTERNAL
            found(row, "external-data", name)
            continue
        row = rows.get("refused_types")
        if row and dtype in row["types"]:
            found(row, "constant-type", name, dtype=dtype)
            continue
        row = rows.get("not_raw")
        if row and dtype in row["types"] and not tensor.raw_data and tensor.double_data:
            found(row, "constant-not-raw", name, dtype=dtype)
            continue
        clamped, precise = rows.get("clamped"), rows.get("float_precision")
        wanted = [r for r in (clamped, precise) if r and dtype in r["types"]]
        if not wanted:
            continue
        value = view.constant(name)
        if value is None or value.size == 0:
            continue
        big = np.abs(value.astype(np.float64))
        if clamped in wanted:
            outside = ~np.isfinite(big) | (big > INT32_MAX)
            if outside.any() and not _uses_are_harmless(view, name, clamped.get("harmless_uses")):
                found(clamped, "constant-clamped", name, dtype=dtype, value=_first(value, outside))
                continue
        if precise in wanted:
            inexact = np.isfinite(big) & (big > FLOAT32_EXACT)
            if inexact.any() and not _uses_are_harmless(view, name, precise.get("harmless_uses")):
                found(precise, "constant-precision", name, dtype=dtype, value=_first(value, inexact))


def _first(value: np.ndarray, where: np.ndarray) -> str:
    flat = value.reshape(-1)[where.reshape(-1)]
    return str(flat[0].item()) + (f" (and {flat.size - 1} more)" if flat.size > 1 else "")


def _graph(view: ModelView, table: Dict[str, Any], found: Callable) -> None:
    rows = table.get("graph") or {}
    row = rows.get("legacy_lstm_importer")
    if row and view.model.producer_name == "tf2onnx" \
            and any("recurrent_in" in i.name for i in view.inputs) \
            and any("recurrent_out" in o.name for o in view.outputs):
        found(row, "legacy-lstm-importer", "producer_name")
    row = rows.get("cpu_only")
    if row:
        for node in view.nodes:
            if node.op_type in row["ops"]:
                found(row, "cpu-only", ModelView.label(node), op=node.op_type)


# ------------------------------------------------------------------------------------ rule kinds
def _attribute(node: Any, name: str):
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            value = helper.get_attribute_value(a)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            elif isinstance(value, (list, tuple)):
                value = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
            return True, value
    return False, None


def attribute_required(view: ModelView, row: Dict[str, Any], node: Any) -> Iterator[Dict[str, Any]]:
    present, _ = _attribute(node, row["attribute"])
    if not present:
        yield dict(attribute=row["attribute"])


def attribute_ignored(view: ModelView, row: Dict[str, Any], node: Any) -> Iterator[Dict[str, Any]]:
    harmless = row.get("harmless")
    for name in row["attributes"]:
        present, value = _attribute(node, name)
        if present and (harmless is None or value not in harmless):
            yield dict(attribute=name, value=value)


def input_constant(view: ModelView, row: Dict[str, Any], node: Any) -> Iterator[Dict[str, Any]]:
    for i in row["inputs"]:
        if i < len(node.input) and node.input[i] and not view.is_constant(node.input[i]):
            yield dict(input=node.input[i])


def input_present(view: ModelView, row: Dict[str, Any], node: Any) -> Iterator[Dict[str, Any]]:
    if row.get("only_constant_data") and not (node.input and view.is_constant(node.input[0])):
        return
    for i in row["inputs"]:
        if i < len(node.input) and node.input[i]:
            yield dict(input=node.input[i])


def axes_missing(view: ModelView, row: Dict[str, Any], node: Any) -> Iterator[Dict[str, Any]]:
    present, _ = _attribute(node, "axes")
    if not present and not (len(node.input) > 1 and node.input[1]):
        rank = view.rank(node.input[0]) if node.input else None
        if rank != 1:  # reducing axis 0 of a vector is reducing every axis
            yield {}


def max_rank(view: ModelView, row: Dict[str, Any], node: Any) -> Iterator[Dict[str, Any]]:
    ranks = [r for r in (view.rank(n) for n in list(node.input) + list(node.output) if n) if r is not None]
    if ranks and max(ranks) > row["rank"]:
        yield dict(rank=max(ranks))


def cast_to_integer(view: ModelView, row: Dict[str, Any], node: Any) -> Iterator[Dict[str, Any]]:
    if node.op_type != "Cast" or not node.input:
        return
    _, to = _attribute(node, "to")
    producer = view.producers.get(node.input[0])
    if producer is not None and producer.op_type in (row.get("harmless_producers") or ()):
        return
    if to in _INTEGERS and view.elem_type(node.input[0]) in _FLOATS:
        yield dict(dtype=dtype_name(to))


def gather_negative_indices(view: ModelView, row: Dict[str, Any], node: Any) -> Iterator[Dict[str, Any]]:
    if node.op_type != "Gather" or len(node.input) < 2:
        return
    indices = view.constant(node.input[1])
    if indices is not None and indices.size and (indices < 0).any():
        yield dict(value=indices.reshape(-1).tolist()[:8])


RULES = {f.__name__: f for f in (attribute_required, attribute_ignored, input_constant, input_present, axes_missing,
                                 max_rank, cast_to_integer, gather_negative_indices)}
