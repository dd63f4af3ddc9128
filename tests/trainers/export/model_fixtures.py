"""Small ONNX policies built with ``onnx.helper`` for the model check: a good one in ML-Agents' format 3,
and the same with one thing Unity refuses (each built for the purpose, not committed binaries).

``torch_style_policy`` is what ML-Agents' own exporter writes (Release 22, ``mlagents-learn`` 1.1.0:
``torch.onnx.export`` at opset 9, ``dynamic_axes`` ``{0: "batch"}``, constants as ``Identity`` of an
initializer as torch 2.x writes them; modern-onnx-facts §3, §7, unity-inference facts §8), with the ops
its 3DBall policy uses: the normaliser (Sub, Div, Clip), Gemm layers with Swish (Sigmoid, Mul), and
``clip(mu + exp(log_sigma) * RandomNormalLike, -3, 3) / 3``.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def const(name: str, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def policy(discrete: bool = False, opset: int = 9, version: Optional[float] = 3.0, discrete_dtype=TensorProto.INT64,
           extra_nodes: List = (), extra_initializers: List = (), extra_outputs: List = (),
           producer: str = "unityagents") -> onnx.ModelProto:
    """A format-3 policy over ``obs_0 [batch, 4]``: continuous (2 actions) or discrete (one branch of 3)."""
    inits = [const("w", np.ones((4, 3 if discrete else 2))), const("memory_size", [0.0])]
    if version is not None:
        inits.append(const("version_number", [version]))
    inputs = [helper.make_tensor_value_info("obs_0", F, ["batch", 4])]
    nodes = [helper.make_node("MatMul", ["obs_0", "w"], ["logits"], name="policy/MatMul")]
    outputs = [helper.make_tensor_value_info("memory_size", F, [1])]
    if version is not None:
        outputs.append(helper.make_tensor_value_info("version_number", F, [1]))
    if discrete:
        inputs.append(helper.make_tensor_value_info("action_masks", F, ["batch", 3]))
        nodes += [helper.make_node("Mul", ["logits", "action_masks"], ["masked"], name="policy/mask"),
                  helper.make_node("ArgMax", ["masked"], ["picked"], axis=1, keepdims=1, name="policy/ArgMax")]
        if discrete_dtype == TensorProto.INT64:
            nodes.append(helper.make_node("Identity", ["picked"], ["discrete_actions"], name="policy/out"))
        else:
            nodes.append(helper.make_node("Cast", ["picked"], ["discrete_actions"], to=discrete_dtype,
                                          name="policy/cast"))
        inits.append(const("discrete_action_output_shape", [[3.0]]))
        outputs += [helper.make_tensor_value_info("discrete_actions", discrete_dtype, ["batch", 1]),
                    helper.make_tensor_value_info("discrete_action_output_shape", F, [1, 1])]
    else:
        nodes.append(helper.make_node("Tanh", ["logits"], ["continuous_actions"], name="policy/Tanh"))
        inits.append(const("continuous_action_output_shape", [2.0]))
        outputs += [helper.make_tensor_value_info("continuous_actions", F, ["batch", 2]),
                    helper.make_tensor_value_info("continuous_action_output_shape", F, [1])]
    graph = helper.make_graph(nodes + list(extra_nodes), "policy", inputs, outputs + list(extra_outputs),
                              inits + list(extra_initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name=producer)
    model.ir_version = 7 if opset >= 13 else 4
    return model


def with_unknown_op(op: str = "Det") -> onnx.ModelProto:
    """A continuous policy with one node of ``op`` on a square tensor, kept alive as an extra output."""
    return policy(extra_nodes=[helper.make_node("Reshape", ["obs_0", "square"], ["sq"], name="policy/square"),
                               helper.make_node(op, ["sq"], ["det"], name=f"policy/{op}")],
                  extra_initializers=[const("square", [-1, 2, 2], np.int64)],
                  extra_outputs=[helper.make_tensor_value_info("det", F, None)])


def with_big_int64(value: int = 2 ** 40) -> onnx.ModelProto:
    """A policy that adds an int64 constant outside int32's range to the batch size (and slices with the
    usual ``INT64_MAX`` end, which every engine handles)."""
    nodes = [helper.make_node("Shape", ["obs_0"], ["shape"], name="policy/Shape"),
             helper.make_node("Add", ["shape", "big"], ["shifted"], name="policy/Add"),
             helper.make_node("Slice", ["shape", "start", "end"], ["tail"], name="policy/Slice")]
    return policy(opset=10, extra_nodes=nodes,
                  extra_initializers=[const("big", [value], np.int64), const("start", [1], np.int64),
                                      const("end", [2 ** 63 - 1], np.int64)],
                  extra_outputs=[helper.make_tensor_value_info("shifted", TensorProto.INT64, [2]),
                                 helper.make_tensor_value_info("tail", TensorProto.INT64, [1])])


def classifier() -> onnx.ModelProto:
    """A plain image classifier: no ML-Agents input or output at all."""
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["image"], ["flat"], name="flatten"),
         helper.make_node("Gemm", ["flat", "w"], ["logits"], name="dense"),
         helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1, name="softmax")],
        "classifier", [helper.make_tensor_value_info("image", F, ["N", 1, 2, 2])],
        [helper.make_tensor_value_info("probabilities", F, ["N", 10])], [const("w", np.ones((4, 10)))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="pytorch")


def torch_style_policy(opset: int = 9) -> onnx.ModelProto:
    """3DBall as ``mlagents-learn`` 1.1.0 exports it (see the module docstring)."""
    hidden = 4
    rng = np.random.default_rng(0)
    inits = [const("normalizer.mean", np.zeros(8)), const("normalizer.std", np.ones(8)),
             const("l0.weight", rng.normal(size=(hidden, 8))), const("l0.bias", np.zeros(hidden)),
             const("mu.weight", rng.normal(size=(2, hidden))), const("mu.bias", np.zeros(2)),
             const("log_sigma", np.zeros((1, 2))), const("three", 3.0),
             const("version_number.1", [3.0]), const("memory_size_vector", [0.0]),
             const("continuous_act_size_vector", [2.0])]
    clip = ({"min": -5.0, "max": 5.0}, {"min": -3.0, "max": 3.0})
    nodes = [
        helper.make_node("Sub", ["obs_0", "normalizer.mean"], ["n0"], name="Sub_0"),
        helper.make_node("Div", ["n0", "normalizer.std"], ["n1"], name="Div_1"),
        helper.make_node("Clip", ["n1"], ["n2"], name="Clip_2", **clip[0]),
        helper.make_node("Gemm", ["n2", "l0.weight", "l0.bias"], ["h0"], name="Gemm_3", alpha=1.0, beta=1.0,
                         transB=1),
        helper.make_node("Sigmoid", ["h0"], ["s0"], name="Sigmoid_4"),
        helper.make_node("Mul", ["h0", "s0"], ["h1"], name="Mul_5"),
        helper.make_node("Gemm", ["h1", "mu.weight", "mu.bias"], ["mu"], name="Gemm_6", alpha=1.0, beta=1.0,
                         transB=1),
        helper.make_node("Exp", ["log_sigma"], ["sigma"], name="Exp_7"),
        helper.make_node("RandomNormalLike", ["mu"], ["eps"], name="RandomNormalLike_8", dtype=F),
        helper.make_node("Mul", ["sigma", "eps"], ["noise"], name="Mul_9"),
        helper.make_node("Add", ["mu", "noise"], ["sample"], name="Add_10"),
        helper.make_node("Clip", ["sample"], ["clipped"], name="Clip_11", **clip[1]),
        helper.make_node("Div", ["clipped", "three"], ["continuous_actions"], name="Div_12"),
        helper.make_node("Clip", ["mu"], ["mu_clipped"], name="Clip_13", **clip[1]),
        helper.make_node("Div", ["mu_clipped", "three"], ["deterministic_continuous_actions"], name="Div_14"),
        helper.make_node("Identity", ["version_number.1"], ["version_number"], name="Identity_15"),
        helper.make_node("Identity", ["memory_size_vector"], ["memory_size"], name="Identity_16"),
        helper.make_node("Identity", ["continuous_act_size_vector"], ["continuous_action_output_shape"],
                         name="Identity_17"),
    ]
    outputs = [helper.make_tensor_value_info("version_number", F, [1]),
               helper.make_tensor_value_info("memory_size", F, [1]),
               helper.make_tensor_value_info("continuous_actions", F, ["batch", 2]),
               helper.make_tensor_value_info("continuous_action_output_shape", F, [1]),
               helper.make_tensor_value_info("deterministic_continuous_actions", F, ["batch", 2])]
    graph = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info("obs_0", F, ["batch", 8])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="pytorch",
                              producer_version="2.8.0")
    model.ir_version = 4
    return model
