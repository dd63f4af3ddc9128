"""What com.unity.ml-agents checks once the engine has imported a policy (``packages/ml-agents-<n>.yaml``).

The contract (modern-onnx-facts §2-§8): float inputs ``obs_k`` / ``action_masks`` / ``recurrent_in``
with a symbolic batch dim; float constants ``version_number`` (2 or 3) and ``memory_size``; action
outputs ``continuous_actions`` / ``discrete_actions`` (integer) with their shape constants; a
``[batch, 1, M]`` memory. A check applies to a package when its table has a row for it, with the
text the inspector or the exception would show.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from trainers.export.model_check.importer import say
from trainers.export.model_check.report import Finding
from trainers.export.model_check.view import ModelView, dtype_name

CONSTANTS = ("version_number", "memory_size", "continuous_action_output_shape", "discrete_action_output_shape")
ACTIONS = ("continuous_actions", "discrete_actions")
#: Inputs Unity's TensorGenerator knows (format 3); format 2 adds the legacy ones.
KNOWN_INPUTS = re.compile(r"^(obs_\d+|action_masks|recurrent_in|epsilon|sequence_length|batch_size|prev_action)$")
LEGACY_INPUTS = re.compile(r"^(vector_observation|visual_observation_\d+|obs_\d+|action_masks|recurrent_in"
                           r"|epsilon|sequence_length|batch_size|prev_action|random_normal_epsilon)$")
_FLOATS = {1, 10, 11}  # FLOAT, FLOAT16, DOUBLE
_INTEGERS = {2, 3, 4, 5, 6, 7, 12, 13}


def check_package(view: ModelView, table: Dict[str, Any], engine: Dict[str, Any]) -> List[Finding]:
    checks = table["checks"]
    name = engine["engine"]
    out: List[Finding] = []

    def found(check: str, node: str, **fields: Any) -> None:
        row = checks.get(check)
        if row is not None:
            message = fields.pop("message", row.get("message"))
            out.append(Finding(name, row["severity"], f"ml-agents-{check.replace('_', '-')}", node,
                               say(message, node=node, **fields), row["source"]))

    trim = engine.get("trims_tf_suffix", "always")
    producer = view.model.producer_name

    def bare(n: str) -> str:
        if trim == "always" or (trim == "tf2onnx" and producer == "tf2onnx"):
            return n[:-2] if n.endswith(":0") else n
        return n

    outputs = {bare(o.name): o.name for o in view.outputs}
    substring = table.get("output_match") == "substring"

    def output(wanted: str) -> Optional[str]:
        if wanted in outputs:
            return outputs[wanted]
        if substring:
            return next((real for b, real in outputs.items() if wanted in b), None)
        return None

    def constant(wanted: str):
        real = output(wanted)
        if real is None:
            return None, None
        return real, view.constant(real)

    # The constants.
    version_name, version = constant("version_number")
    if version_name is None:
        found("version_missing", "version_number")
    elif version is not None and version.size:
        v = float(version.reshape(-1)[0])
        if v < 2:
            found("version_range", version_name, message=checks["version_range"]["message_old"], value=_num(v))
        elif v > 3:
            found("version_range", version_name, message=checks["version_range"]["message_new"], value=_num(v))
    memory_name, memory = constant("memory_size")
    memory_size = 0
    if memory_name is None:
        found("memory_missing", "memory_size")
    elif memory is not None and memory.size:
        memory_size = int(memory.reshape(-1)[0])
        if version is not None and version.size and float(version.reshape(-1)[0]) == 2 and memory_size > 0:
            found("legacy_memory", memory_name, value=memory_size)
    for wanted in CONSTANTS:
        real = output(wanted)
        if real is None:
            continue
        elem = view.elem_type(real)
        if elem is not None and elem not in _FLOATS:
            found("constant_dtype", real, dtype=dtype_name(elem))
        if real not in view.initializers:
            found("constant_via_node", real)

    # The actions.
    legacy = version is not None and version.size and float(version.reshape(-1)[0]) == 2
    present = {kind: output(kind) for kind in ACTIONS}
    if not any(present.values()) and not (legacy and output("action")):
        found("no_action_output", "outputs", names=", ".join(sorted(outputs)) or "none")
    for kind, real in present.items():
        if real is None:
            continue
        word = kind.split("_")[0]
        shape_name = output(f"{word}_action_output_shape")
        if shape_name is None:
            found("shape_constant_missing", real, kind=word, Kind=word.capitalize())
        elem = view.elem_type(real)
        if kind == "discrete_actions" and elem is not None and elem not in _INTEGERS:
            found("discrete_dtype", real, dtype=dtype_name(elem))
        dims = view.dims(real)
        shape = view.constant(shape_name) if shape_name else None
        if dims and isinstance(dims[-1], int) and dims[-1] > 0 and shape is not None and shape.size:
            expected = int(shape.reshape(-1)[0]) if kind == "continuous_actions" else int(shape.size)
            if dims[-1] != expected:
                found("action_width", real, value=dims[-1], shape_name=shape_name, expected=expected)

    # The inputs.
    names = {bare(i.name): i for i in view.inputs}
    pattern = LEGACY_INPUTS if legacy else KNOWN_INPUTS
    for b, value in names.items():
        if not pattern.match(b):
            found("unknown_input", b)
            continue
        if b in table.get("int_cast_inputs", ()):
            found("int_cast_input", b)
            continue
        elem = view.elem_type(value.name)
        if elem is not None and elem != 1:
            found("input_dtype", b, dtype=dtype_name(elem))
        dims = view.dims(value.name)
        if not dims:
            continue
        if isinstance(dims[0], int) and dims[0] > 0:
            found("batch_dim", b, value=dims[0])
        symbolic = [d for d in dims[1:] if not (isinstance(d, int) and d > 0)]
        if symbolic:
            found("fixed_dims", b, value=symbolic[0] or "?")
        if b.startswith("obs_") and len(dims) not in (2, 3, 4):
            found("observation_rank", b, value=len(dims))
    if present["discrete_actions"] and "action_masks" not in names:
        found("mask_missing", "action_masks")
    if memory_size > 0:
        if "recurrent_in" not in names:
            found("memory_input_missing", "recurrent_in")
        elif view.rank(names["recurrent_in"].name) not in (None, 3):
            found("memory_rank", "recurrent_in", value=view.rank(names["recurrent_in"].name))
        out_name = output("recurrent_out")
        if out_name is None:
            found("memory_output_missing", "recurrent_out")
        elif view.rank(out_name) not in (None, 3):
            found("memory_rank", out_name, value=view.rank(out_name))
    return out


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)

