"""The export contract: node names, dtypes and TF-1.x-era op types of the frozen ``.bytes``."""
import numpy as np
import pytest

from trainers.export.frozen_graph import CONTRACT_INPUTS, contract_inputs, export_graph, freeze, load_graph_def
from trainers.ppo.models import create_agent_model
from trainers.tf_utils import tf
from unityagents.brain import BrainParameters

#: Op types known to the TensorFlow 1.4-1.7 runtimes that Unity's TensorFlowSharp plugin shipped.
TF1_OPS = {
    "Placeholder", "PlaceholderWithDefault", "Const", "Identity", "MatMul", "BiasAdd", "Add", "Sub", "Mul",
    "RealDiv", "Neg", "Exp", "Log", "Sqrt", "Rsqrt", "Square", "Tanh", "Relu", "Elu", "Sigmoid", "Softmax",
    "LogSoftmax", "Maximum", "Minimum", "Reshape", "Shape", "StridedSlice", "Pack", "Unpack", "ConcatV2",
    "Split", "Fill", "Cast", "OneHot", "Multinomial", "ArgMax", "RandomStandardNormal", "StopGradient", "Sum",
    "Mean", "Conv2D", "Squeeze", "ExpandDims", "Tile", "Select", "Less", "Greater", "Equal", "LogicalAnd",
    "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond", "TensorArrayV3", "TensorArrayReadV3",
    "TensorArrayWriteV3", "TensorArrayGatherV3", "TensorArrayScatterV3", "TensorArraySizeV3", "Range",
    "Transpose", "ZerosLike", "Prod", "Max", "Min", "Pow", "Abs", "Floor",
}


def brain(action_space="continuous", state_space="continuous", state_size=8, cameras=(), memory=0):
    return BrainParameters("B", {
        "stateSize": state_size, "actionSize": 2 if action_space == "continuous" else 3,
        "memorySize": memory, "cameraResolutions": [
            {"width": w, "height": h, "blackAndWhite": bw} for w, h, bw in cameras],
        "actionDescriptions": [], "actionSpaceType": 1 if action_space == "continuous" else 0,
        "stateSpaceType": 1 if state_space == "continuous" else 0})


CASES = {
    "continuous": dict(brain=brain(), kw=dict(normalize=True)),
    "discrete-state-and-action": dict(brain=brain("discrete", "discrete", 20), kw={}),
    "camera-only": dict(brain=brain("discrete", state_size=0, cameras=[(84, 84, False)]), kw={}),
    "recurrent-camera-and-vector": dict(brain=brain("continuous", cameras=[(40, 30, True)], memory=16),
                                        kw=dict(use_recurrent=True)),
}


def build(case, scope):
    spec = CASES[case]
    graph = tf.Graph()
    with graph.as_default():
        with tf.variable_scope(scope):
            model = create_agent_model(spec["brain"], **spec["kw"])
        sess = tf.Session(graph=graph)
        sess.run(tf.global_variables_initializer())
    graph.finalize()
    return graph, sess, model


@pytest.mark.parametrize("case", sorted(CASES))
def test_frozen_graph_is_tf1_compatible_and_named_by_contract(case, tmp_path):
    graph, sess, model = build(case, "Brain-A")
    outputs = ["Brain-A/action", "Brain-A/value_estimate", "Brain-A/action_probs"]
    if model.memory_out is not None:
        outputs.append("Brain-A/recurrent_out")
    path = str(tmp_path / "out.bytes")
    with graph.as_default():
        export_graph(sess, outputs, path, keep_nodes=contract_inputs(graph, "Brain-A/"))
    graph_def = load_graph_def(path)
    ops = {n.op for n in graph_def.node}
    assert ops <= TF1_OPS, f"op types unknown to a TF 1.x runtime: {sorted(ops - TF1_OPS)}"
    assert not graph_def.library.function
    assert not any(n.op.startswith("Variable") for n in graph_def.node)
    nodes = {n.name: n for n in graph_def.node}
    for name in outputs + ["Brain-A/batch_size", "Brain-A/sequence_length"]:
        assert name in nodes, name
    b = CASES[case]["brain"]
    if b.state_space_size:
        state_dtype = tf.int32 if b.state_space_type == "discrete" else tf.float32
        assert nodes["Brain-A/state"].attr["dtype"].type == state_dtype
    for k in range(b.number_observations):
        assert f"Brain-A/observation_{k}" in nodes

    # The frozen graph computes what the live one does (epsilon left at its zero default).
    imported = tf.Graph()
    with imported.as_default():
        tf.import_graph_def(graph_def, name="")
    frozen = tf.Session(graph=imported)
    n = 3
    feed_live, feed_frozen = {model.batch_size: n, model.sequence_length: 1}, {"Brain-A/batch_size:0": n,
                                                                              "Brain-A/sequence_length:0": 1}
    rng = np.random.default_rng(0)
    if b.state_space_size:
        x = (rng.integers(0, b.state_space_size, (n, 1)) if b.state_space_type == "discrete"
             else rng.normal(size=(n, b.state_space_size)))
        feed_live[model.state_in] = x
        feed_frozen["Brain-A/state:0"] = x
    for k, res in enumerate(b.camera_resolutions):
        img = rng.uniform(size=(n, res["height"], res["width"], 1 if res["blackAndWhite"] else 3))
        feed_live[model.observation_in[k]] = img
        feed_frozen[f"Brain-A/observation_{k}:0"] = img
    if model.memory_out is not None:
        mem = rng.normal(size=(n, b.memory_space_size))
        feed_live[model.memory_in] = mem
        feed_frozen["Brain-A/recurrent_in:0"] = mem
    live = sess.run(model.value, feed_live)
    np.testing.assert_allclose(frozen.run("Brain-A/value_estimate:0", feed_frozen), live, rtol=1e-5, atol=1e-6)
    if b.action_space_type == "continuous":
        np.testing.assert_allclose(frozen.run("Brain-A/action:0", feed_frozen), sess.run(model.output, feed_live),
                                   rtol=1e-5, atol=1e-6)
        assert frozen.run("Brain-A/action:0", feed_frozen).dtype == np.float32
    else:
        assert frozen.run("Brain-A/action:0", feed_frozen).dtype == np.int64


def test_freeze_refuses_post_tf1_ops():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None], name="x")
        tf.identity(tf.raw_ops.BatchMatMulV2(x=tf.reshape(x, [1, 1, -1]), y=tf.reshape(x, [1, -1, 1])), name="out")
        sess = tf.Session(graph=graph)
        with pytest.raises(Exception, match="BatchMatMulV2"):
            freeze(sess, ["out"])


def test_addv2_is_rewritten_to_add():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None], name="x")
        tf.identity(x + 1.0, name="out")
        sess = tf.Session(graph=graph)
        frozen = freeze(sess, ["out"])
    assert {n.op for n in frozen.node} == {"Placeholder", "Const", "Add", "Identity"}


def test_contract_inputs_lists_existing_inputs_only():
    graph, _, _ = build("continuous", "S")
    found = contract_inputs(graph, "S/")
    assert "S/state" in found and "S/batch_size" in found and "S/epsilon" in found
    assert "S/recurrent_in" not in found
    assert set(CONTRACT_INPUTS) >= {n.split("/")[-1] for n in found}
