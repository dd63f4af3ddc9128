"""The graph the ONNX export converts: one brain's frozen graph wrapped in Unity's ONNX contract.

``contract_graph`` imports the brain's frozen graph under new inputs (``obs_k`` per sensor,
``action_masks``, ``recurrent_in``) and names its outputs as Unity's loaders look for them
(the table in ``trainers.export.onnx_model``): actions sampled inside the graph and their
deterministic twins, the constant outputs, the recurrent state and the value estimate.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from trainers.export.onnx_loop import make_identity
from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException
from unityagents.brain import BrainParameters

#: The model-format version of ML-Agents 2.x-4.x (``ModelApiVersion.MLAgents2_0``).
MODEL_VERSION = 3
#: ``continuous_actions`` = clip(action, -CLIP, CLIP) / CLIP, as ML-Agents exports PPO policies.
CONTINUOUS_CLIP = 3.0


def contract_graph(frozen: Any, prefix: str, brain: BrainParameters, outputs: List[str],
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
        # A discrete state is a whole number; Floor keeps Barracuda's Cast (a no-op there) exact.
        input_map[f"{prefix}state:0"] = tf.cast(tf.floor(state), tf.int32) if discrete_state else state
    return batch


def _defaults_as_identity(graph_def: Any, keep: set) -> Any:
    """``PlaceholderWithDefault`` nodes (other than ``keep``) become ``Identity`` of their default:
    ONNX has no optional inputs, and Unity feeds only the contract's inputs."""
    out = tf.GraphDef()
    out.CopyFrom(graph_def)
    for node in out.node:
        if node.op == "PlaceholderWithDefault" and node.name not in keep:
            make_identity(node, node.input[0], node.attr["dtype"].type)
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
