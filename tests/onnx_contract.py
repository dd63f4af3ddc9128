"""The load-time checks a modern Unity (ML-Agents 2.x-4.x) applies to a ``<Behavior>.onnx``, as a test helper.

Each rule restates what ML-Agents' C# loaders (Barracuda, Sentis, the Inference Engine) check or
assume (the contract table is in ``trainers/export/onnx_model.py``; the section marks below group the
rules by topic: §1 names, §2 inputs, §3 constants, §4 discrete actions, §7 operators), so a file
that passes here loads in Barracuda, Sentis and the Inference Engine without an inspector warning.
``check_contract(model, brain, sensors)`` returns the list of problems (empty = OK);
``assert_contract`` raises with all of them. The brain and the sensor list are optional: without
them only the brain-independent rules are applied. ``sensors`` is what the environment reports
(name and shape per sensor, in order), so a test can hold the file against the scene's own sensor
list rather than against what the exporter was told.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

#: Default-domain ops that Barracuda 3.0's importer lacks (§7), plus those Sentis/IE lack.
UNSUPPORTED_OPS = {
    "Bernoulli", "BitShift", "CastLike", "Celu", "Compress", "ConcatFromSequence", "ConvInteger", "CumSum",
    "DequantizeLinear", "Det", "DynamicQuantizeLinear", "Einsum", "EyeLike", "GRU", "GatherElements", "GatherND",
    "GlobalLpPool", "GreaterOrEqual", "HardSwish", "If", "IsInf", "IsNaN", "Loop", "LpNormalization", "LpPool",
    "MatMulInteger", "MaxRoiPool", "MaxUnpool", "MeanVarianceNormalization", "Mod", "NegativeLogLikelihoodLoss",
    "QLinearConv", "QLinearMatMul", "QuantizeLinear", "RNN", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceSumSquare", "ReverseSequence", "Scan", "Scatter", "ScatterElements", "Shrink", "Size",
    "SoftmaxCrossEntropyLoss", "SplitToSequence", "StringNormalizer", "TfIdfVectorizer", "ThresholdedRelu", "Trilu",
    "Unique", "LSTM", "NonZero",
}
UNSUPPORTED_PREFIXES = ("Optional", "Sequence")
#: Barracuda 2.3.1 ignores Reduce*/Squeeze axes given as inputs (opset 13+); Sentis accepts 7..15 (§7).
OPSET_RANGE = (7, 12)
KNOWN_INPUTS = {"action_masks", "recurrent_in"}
ACTION_OUTPUTS = ("continuous_actions", "deterministic_continuous_actions", "discrete_actions",
                  "deterministic_discrete_actions")
INTEGER_TYPES = {TensorProto.INT64, TensorProto.INT32}
#: ML-Agents' scale for a Gaussian policy (§5): continuous_actions = clamp(a, -3, 3) / 3, and Unity
#: copies them into the agent unchanged. Stated here, independently of the exporter's constant.
UNITY_CONTINUOUS_CLIP = 3.0


def _dims(value: Any) -> List[Any]:
    """Declared dims: an int for a fixed dim, None for a symbolic or missing one."""
    return [d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim]


def _constant(model: Any, name: str) -> Optional[np.ndarray]:
    for init in model.graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    return None


def check_contract(model: Any, brain: Any = None, sensors: Optional[List[Tuple[str, Tuple[int, ...]]]] = None
                   ) -> List[str]:
    """Every contract rule ``model`` breaks, as messages that say what was expected and what was found.

    :param sensors: the agent's sensors as its environment reports them, ``(name, shape)`` in
        order (a camera's shape channels-first ``(C, H, W)``, as C# 3.x declares it): Unity binds
        ``obs_k`` to the k-th and checks its shape. Without it, ``brain.sensors`` is used.
    """
    problems: List[str] = []
    graph = model.graph
    inputs = {i.name: i for i in graph.input}
    outputs = {o.name: o for o in graph.output}
    initializers = {i.name for i in graph.initializer}

    # §7: opset and operators
    default = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not default or not OPSET_RANGE[0] <= default[0] <= OPSET_RANGE[1]:
        problems.append(f"default-domain opset must be in {OPSET_RANGE} (Barracuda and Sentis), found {default}")
    if any(o.domain not in ("", "ai.onnx") for o in model.opset_import):
        problems.append(f"only the default ONNX domain is allowed, found {[o.domain for o in model.opset_import]}")
    ops = {n.op_type for n in graph.node}
    bad_ops = sorted(op for op in ops if op in UNSUPPORTED_OPS or op.startswith(UNSUPPORTED_PREFIXES))
    if bad_ops:
        problems.append(f"ops that a Unity engine cannot import: {bad_ops}")
    for node in graph.node:
        if node.op_type == "Split" and not any(a.name == "split" for a in node.attribute):
            problems.append(f"Split node {node.name} lacks the 'split' attribute Barracuda requires")

    # §1: bare names
    for name in list(inputs) + list(outputs):
        if ":" in name:
            problems.append(f"tensor name {name!r} carries a ':' suffix; names must be bare")

    # §2: inputs
    obs = sorted((n for n in inputs if n.startswith("obs_")), key=lambda n: int(n[4:]) if n[4:].isdigit() else -1)
    if [n for n in obs] != [f"obs_{k}" for k in range(len(obs))] or not obs:
        problems.append(f"inputs must include obs_0..obs_(n-1) without gaps, found {sorted(inputs)}")
    for name, value in inputs.items():
        if name not in KNOWN_INPUTS and not name.startswith("obs_"):
            problems.append(f"unknown input {name!r}: Unity stops with 'Unknown tensorProxy expected as input'")
        if value.type.tensor_type.elem_type != TensorProto.FLOAT:
            problems.append(f"input {name} must be float32, found elem_type {value.type.tensor_type.elem_type}")
        dims = _dims(value)
        if not dims or dims[0] is not None:
            problems.append(f"input {name}: dim 0 must be the symbolic batch, found {dims}")
        if any(d is None or d <= 0 for d in dims[1:]):
            problems.append(f"input {name}: every dim but the batch must be a fixed number, found {dims}")
        if name.startswith("obs_") and len(dims) not in (2, 3, 4):
            problems.append(f"input {name}: rank must be 2 (vector), 3 or 4 (visual [b, C, H, W]), found {dims}")
        if name.startswith("obs_") and len(dims) == 4 and dims[1] not in (1, 3):
            problems.append(f"visual input {name} must be channels-first [b, C, H, W] with C 1 or 3, found {dims}")
        if name == "recurrent_in" and len(dims) != 3:
            problems.append(f"recurrent_in must be rank 3 [b, 1, M] (Sentis reads M from the last dim), found {dims}")

    # §3: constants
    constants: Dict[str, np.ndarray] = {}
    for name in ("version_number", "memory_size", "continuous_action_output_shape", "discrete_action_output_shape"):
        if name not in outputs:
            continue
        value = _constant(model, name)
        if value is None or name not in initializers:
            problems.append(f"constant {name} must be an initializer that is itself a graph output")
            continue
        if value.dtype != np.float32:
            problems.append(f"constant {name} must be float32 (Sentis casts to Tensor<float>), found {value.dtype}")
        constants[name] = value
    for name in ("version_number", "memory_size"):
        if name not in outputs:
            problems.append(f"required constant {name!r} was not found in the model file")
    if "version_number" in constants and constants["version_number"].reshape(-1).tolist() != [3.0]:
        problems.append(f"version_number must be [3.0] (format MLAgents2_0), found {constants['version_number']}")
    memory = int(constants["memory_size"].reshape(-1)[0]) if "memory_size" in constants else 0
    if memory:
        if "recurrent_in" not in inputs or "recurrent_out" not in outputs:
            problems.append(f"memory_size is {memory} but the inputs are {sorted(inputs)} and the outputs "
                            f"{sorted(outputs)}: recurrent_in and recurrent_out are required")
        elif _dims(inputs["recurrent_in"])[1:] != [1, memory]:
            problems.append(f"recurrent_in must be [b, 1, {memory}], found {_dims(inputs['recurrent_in'])}")
        if "recurrent_out" in outputs and len(_dims(outputs["recurrent_out"])) not in (0, 3):
            problems.append(f"recurrent_out must be rank 3, declared {_dims(outputs['recurrent_out'])}")
        if model.producer_name == "tf2onnx":
            problems.append("producer_name 'tf2onnx' with recurrent_in/out sends the file to Barracuda's "
                            "legacy importer")
    elif "recurrent_in" in inputs:
        problems.append("recurrent_in present but memory_size is 0")

    # §3/§4: action outputs
    if "continuous_actions" not in outputs and "discrete_actions" not in outputs:
        problems.append("the model does not contain any Action Output Node (continuous_actions/discrete_actions)")
    for kind in ("continuous", "discrete"):
        stochastic, det = f"{kind}_actions", f"deterministic_{kind}_actions"
        if det in outputs and stochastic not in outputs:
            problems.append(f"{det} without {stochastic}: the stochastic output must always be present")
        if stochastic in outputs and f"{kind}_action_output_shape" not in constants:
            problems.append(f"{stochastic} needs the float constant {kind}_action_output_shape")
    for name in outputs:
        if any(a in name for a in ("continuous_actions", "discrete_actions")) and name not in ACTION_OUTPUTS:
            problems.append(f"output {name!r} contains an action output name: Sentis' substring match would take it")
    for name in ("continuous_actions", "deterministic_continuous_actions"):
        if name in outputs and outputs[name].type.tensor_type.elem_type != TensorProto.FLOAT:
            problems.append(f"{name} must be float32")
    for name in ("discrete_actions", "deterministic_discrete_actions"):
        if name in outputs and outputs[name].type.tensor_type.elem_type not in INTEGER_TYPES:
            problems.append(f"{name} must be an integer tensor (Sentis reads Tensor<int>), "
                            f"found elem_type {outputs[name].type.tensor_type.elem_type}")
    if "discrete_action_output_shape" in constants:
        branches = constants["discrete_action_output_shape"].reshape(-1)
        if "action_masks" not in inputs:
            problems.append("discrete actions need the action_masks input")
        elif _dims(inputs["action_masks"])[1:] != [int(branches.sum())]:
            problems.append(f"action_masks must be [b, {int(branches.sum())}], found {_dims(inputs['action_masks'])}")

    # The sensors (or the brain's): one obs_k per sensor, of its shape; the brain's action sizes.
    if sensors is None and brain is not None:
        sensors = [(s.name, tuple(s.shape)) for s in brain.sensors]
    if sensors is not None:
        problems += _check_sensors(inputs, sensors)
    if brain is not None:
        problems += _check_brain(inputs, constants, memory, brain)

    # §2: Sentis runs the model at load on zero inputs, symbolic dims = 1.
    if not problems:
        problems += _check_zero_run(model, constants, memory)
    return problems


def _check_sensors(inputs: Dict[str, Any], sensors: List[Tuple[str, Tuple[int, ...]]]) -> List[str]:
    """Unity's format-3 input checks: ``obs_k`` present for every sensor k, none beyond, shapes equal."""
    problems = []
    for k, (name, shape) in enumerate(sensors):
        value = inputs.get(f"obs_{k}")
        if value is None:
            problems.append(f"The model does not contain an Observation Placeholder Input for sensor component {k} "
                            f"({name}): expected obs_{k}")
            continue
        got = _dims(value)[1:]
        if got != list(shape):
            problems.append(f"{'The visual Observation' if len(shape) == 3 else 'An Observation'} of the model does "
                            f"not match: obs_{k} is [?x{'x'.join(map(str, got))}] but the {name} Sensor expects "
                            f"[?x{'x'.join(map(str, shape))}]")
    extra = sorted(n for n in inputs if n.startswith("obs_") and n not in {f"obs_{k}" for k in range(len(sensors))})
    if extra:
        problems.append(f"Model contains an unexpected input named : {', '.join(extra)} (the agent has "
                        f"{len(sensors)} sensors)")
    return problems


def _check_brain(inputs: Dict[str, Any], constants: Dict[str, np.ndarray], memory: int, brain: Any) -> List[str]:
    problems = []
    kind = "continuous" if brain.action_space_type == "continuous" else "discrete"
    branches = [float(b) for b in (getattr(brain, "action_branches", None) or [brain.action_space_size])]
    wanted = {kind: [float(brain.action_space_size)] if kind == "continuous" else branches}
    if getattr(brain, "is_hybrid", False):  # both parts: Behavior Parameters declares both
        wanted["discrete"] = branches
    for kind, want in wanted.items():
        shape = constants.get(f"{kind}_action_output_shape")
        if shape is None or shape.reshape(-1).tolist() != want:
            problems.append(f"{kind}_action_output_shape must be {want}, found {shape}")
    return problems


def _check_zero_run(model: Any, constants: Dict[str, np.ndarray], memory: int) -> List[str]:
    import onnxruntime

    feeds = {}
    for value in model.graph.input:
        feeds[value.name] = np.zeros([d if d is not None else 1 for d in _dims(value)], np.float32)
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        results = dict(zip(names, session.run(names, feeds)))
    except Exception as exc:
        return [f"the model does not run at batch 1 on all-zero inputs: {exc}"]
    problems = []
    for name, value in results.items():
        if np.issubdtype(value.dtype, np.floating) and not np.isfinite(value).all():
            problems.append(f"output {name} is not finite at batch 1 on zero inputs: {value}")
    if "continuous_actions" in results:
        n = int(constants["continuous_action_output_shape"].reshape(-1)[0])
        if results["continuous_actions"].shape != (1, n):
            got = results["continuous_actions"].shape
            problems.append(f"continuous_actions must be [1, {n}] at batch 1, got {got}")
    if "discrete_actions" in results:
        branches = constants["discrete_action_output_shape"].reshape(-1)
        value = results["discrete_actions"]
        if value.shape != (1, len(branches)) or not np.issubdtype(value.dtype, np.integer):
            problems.append(f"discrete_actions must be integer [1, {len(branches)}], got {value.dtype} {value.shape}")
    if memory and results.get("recurrent_out", np.zeros(0)).shape != (1, 1, memory):
        problems.append(f"recurrent_out must be [1, 1, {memory}] at batch 1, got {results.get('recurrent_out')}")
    return problems


def assert_contract(model_or_path: Any, brain: Any = None, sensors: Any = None) -> Any:
    """Load (if a path), run ``onnx.checker`` and the contract checks; AssertionError listing every problem."""
    model = onnx.load(str(model_or_path)) if not hasattr(model_or_path, "graph") else model_or_path
    onnx.checker.check_model(model)
    problems = check_contract(model, brain, sensors)
    assert not problems, "ONNX contract violations:\n  " + "\n  ".join(problems)
    return model
