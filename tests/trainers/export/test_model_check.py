"""The model check: each Unity engine's importer and ML-Agents' C# checks, as tables, on models built for
the purpose (tests/trainers/export/model_fixtures.py), on our exports, and at export time."""
from __future__ import annotations

import logging
import os

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper

from tests.trainers.export import model_fixtures as fx
from trainers.export.model_check import (
    ENGINES,
    EXPORT_ENGINES,
    FAILS,
    LOADS,
    WARNS,
    NotAModel,
    check_model,
    resolve_engines,
    tables,
)
from trainers.export.model_check.tables import TableError, engine_table

SENTIS_AND_IE = [e for e in ENGINES if not e.startswith("barracuda")]
BARRACUDA = [e for e in ENGINES if e.startswith("barracuda")]


def verdicts(model, engines=None):
    return {v.engine: v for v in check_model(model, engines).verdicts}


def rules(verdict, severity=None):
    return {f.rule for f in verdict.findings if severity is None or f.severity == severity}


# ------------------------------------------------------------------------------------------ the tables
def test_every_engine_version_is_a_table_with_a_source_for_each_row():
    assert ENGINES == ["barracuda-2.0", "barracuda-2.3", "barracuda-3.0", "sentis-1.2", "sentis-1.3", "sentis-1.4",
                       "sentis-2.1", "ie-2.2", "ie-2.3", "ie-2.4"]
    assert EXPORT_ENGINES == ["barracuda-2.3", "barracuda-3.0", "sentis-1.2", "sentis-2.1", "ie-2.2"]
    for name in ENGINES:
        table = engine_table(name)
        assert table["engine"] == name and table["source"] and table["ops_source"]
        assert table["package"] in ("2.x", "3.x", "4.x")
        assert all(row["source"] for row in table["rules"])
        for section in ("constants", "graph"):
            assert all(row["source"] for row in (table.get(section) or {}).values())
    sizes = {name: len(engine_table(name)["ops"]) for name in ENGINES}
    # The op counts the importers dispatch on (unity-inference facts §2.1).
    assert sizes == {"barracuda-2.0": 104, "barracuda-2.3": 108, "barracuda-3.0": 108, "sentis-1.2": 135,
                     "sentis-1.3": 135, "sentis-1.4": 135, "sentis-2.1": 136, "ie-2.2": 137, "ie-2.3": 137,
                     "ie-2.4": 147}


def test_a_new_engine_version_is_a_new_table(tmp_path, monkeypatch):
    """A file based on another names only what changed; the check picks it up by name."""
    engines = tmp_path / "engines"
    engines.mkdir()
    for name in ("sentis-1.2", "sentis-1.4", "sentis-2.1", "ie-2.2"):
        (engines / f"{name}.yaml").write_text(open(os.path.join(tables.ENGINE_DIR, f"{name}.yaml")).read())
    (engines / "ie-9.0.yaml").write_text(yaml.safe_dump({
        "engine": "ie-9.0", "based_on": "ie-2.2", "title": "Inference Engine 9.0", "source": "a test",
        "ops_added": {"list": ["Det"], "source": "a test"}, "ops_removed": {"list": ["Tanh"], "source": "a test"}}))
    monkeypatch.setattr(tables, "ENGINE_DIR", str(engines))
    tables.engine_table.cache_clear()
    try:
        assert "ie-9.0" in tables.engine_names()
        table = tables.engine_table("ie-9.0")
        assert "Det" in table["ops"] and "Tanh" not in table["ops"] and "Mish" in table["ops"]
        from trainers.export.model_check.importer import check_engine
        from trainers.export.model_check.view import ModelView

        found = check_engine(ModelView(fx.with_unknown_op("Det")), table)
        assert [f.node for f in found if f.rule == "unknown-op"] == ["policy/Tanh"]  # Det is known, Tanh gone
    finally:
        tables.engine_table.cache_clear()


def test_a_malformed_table_is_refused_naming_what_is_missing(tmp_path, monkeypatch):
    engines = tmp_path / "engines"
    engines.mkdir()
    (engines / "x-1.0.yaml").write_text(yaml.safe_dump({"engine": "x-1.0", "title": "X", "package": "3.x",
                                                        "source": "s", "unknown_op": {}, "ops": {"list": []},
                                                        "rules": [{"id": "r", "kind": "max_rank"}]}))
    monkeypatch.setattr(tables, "ENGINE_DIR", str(engines))
    tables.engine_table.cache_clear()
    try:
        with pytest.raises(TableError, match="rule r has no 'severity'"):
            tables.engine_table("x-1.0")
    finally:
        tables.engine_table.cache_clear()


def test_engine_names_resolve_and_an_unknown_one_names_the_known_ones():
    assert resolve_engines(["all"]) == ENGINES and resolve_engines(None) == ENGINES
    assert resolve_engines(["export"]) == EXPORT_ENGINES
    assert resolve_engines(["sentis-2.1,barracuda-3.0", "sentis-2.1"]) == ["sentis-2.1", "barracuda-3.0"]
    with pytest.raises(ValueError, match="unknown engine 'sentis-9'.*barracuda-2.0.*ie-2.4"):
        resolve_engines(["sentis-9"])


# ------------------------------------------------------------------------------------------ good models
@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_a_format_3_policy_loads_everywhere(discrete):
    found = verdicts(fx.policy(discrete=discrete))
    assert {e: v.status for e, v in found.items()} == {e: LOADS for e in ENGINES}, \
        {e: [f.line() for f in v.findings] for e, v in found.items()}


def test_an_mlagents_learn_export_side_by_side_with_ours():
    """ML-Agents' own exporter writes constants as Identity(initializer) (torch 2.x): Sentis and the
    Inference Engine run the graph and find them; Barracuda looks up a dataset of that name (inferred)."""
    found = verdicts(fx.torch_style_policy())
    for engine in SENTIS_AND_IE:
        assert found[engine].status == LOADS, [f.line() for f in found[engine].findings]
    for engine in BARRACUDA:
        assert found[engine].status == WARNS
        assert {(f.rule, f.node) for f in found[engine].findings} == {
            ("ml-agents-constant-via-node", n)
            for n in ("version_number", "memory_size", "continuous_action_output_shape")}


def test_a_pytorch_dynamo_export_at_opset_18_is_outside_the_documented_range():
    found = verdicts(fx.torch_style_policy(opset=18))
    for engine in SENTIS_AND_IE:
        assert found[engine].status == WARNS and rules(found[engine]) == {"opset"}
        assert "7 to 15" in next(f.message for f in found[engine].findings) or \
            "between 7 and 15" in next(f.message for f in found[engine].findings)
    assert "opset" in rules(found["barracuda-3.0"])


# ------------------------------------------------------------------------------------------ models refused
def test_an_unknown_op_fails_with_each_importers_own_words():
    found = verdicts(fx.with_unknown_op("Det"))
    assert all(found[e].status == FAILS for e in ENGINES)
    barracuda = next(f for f in found["barracuda-3.0"].findings if f.rule == "unknown-op")
    assert barracuda.node == "policy/Det" and barracuda.message.startswith(
        "Unknown type Det encountered while parsing layer policy/Det.")
    sentis = next(f for f in found["sentis-1.2"].findings if f.rule == "unknown-op")
    assert sentis.message.startswith("Det not supported") and "asset is created" in sentis.message
    # An op only Sentis and the Inference Engine know fails in Barracuda alone.
    found = verdicts(fx.with_unknown_op("Einsum"))
    assert {e for e, v in found.items() if v.status == FAILS} == set(BARRACUDA)


def test_an_int64_constant_outside_int32_is_clamped_but_slice_to_the_end_is_not_a_finding():
    found = verdicts(fx.with_big_int64())
    for engine in ENGINES:
        clamped = [f for f in found[engine].findings if f.rule == "constant-clamped"]
        assert [(f.node, f.severity) for f in clamped] == [("big", "error")], engine
        assert str(2 ** 40) in clamped[0].message and "clamps" in clamped[0].message
        assert found[engine].status == FAILS
    assert verdicts(fx.with_big_int64(2 ** 20))["sentis-2.1"].status == LOADS
    assert "constant-precision" in rules(verdicts(fx.with_big_int64(2 ** 30))["barracuda-3.0"])


def test_a_range_exported_at_opset_10_is_a_loop_no_engine_imports():
    """tf2onnx writes tf.range as a Loop below opset 11 and as Range from 11."""
    import logging as logs

    import tf2onnx

    from trainers.tf_utils import tf

    logs.getLogger("tf2onnx").setLevel(logs.ERROR)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, 4], name="obs_0")
        steps = tf.cast(tf.range(tf.shape(x)[0]), tf.float32)
        tf.identity(tf.reshape(steps, [-1, 1]) + x[:, :2], name="continuous_actions")

    def converted(opset):
        model, _ = tf2onnx.convert.from_graph_def(graph.as_graph_def(), input_names=["obs_0:0"],
                                                  output_names=["continuous_actions:0"], opset=opset)
        return {v.engine: v for v in check_model(model, ["barracuda-3.0", "sentis-2.1", "ie-2.2"]).verdicts}

    at_10 = converted(10)
    for engine, verdict in at_10.items():
        loop = [f for f in verdict.findings if f.rule == "unknown-op"]
        assert len(loop) == 1 and "Loop" in loop[0].message and verdict.status == FAILS, engine
        assert "opset >= 11" in loop[0].fix
    at_11 = converted(11)
    assert all("unknown-op" not in rules(v) for v in at_11.values())


def test_a_missing_version_number_fails_every_package():
    found = verdicts(fx.policy(version=None))
    for engine in ENGINES:
        finding = next(f for f in found[engine].findings if f.rule == "ml-agents-version-missing")
        assert finding.severity == "error" and found[engine].status == FAILS
        assert finding.message.startswith('Required constant "version_number" was not found in the model file.')
    assert "NullReferenceException" in next(f.message for f in found["barracuda-3.0"].findings)
    too_new = verdicts(fx.policy(version=4.0), ["ie-2.2"])["ie-2.2"]
    assert [f.rule for f in too_new.findings] == ["ml-agents-version-range"]
    assert "Model version: 4  Maximum supported version: 3" in too_new.findings[0].message


def test_a_float_discrete_output_fails_sentis_and_the_inference_engine_not_barracuda():
    found = verdicts(fx.policy(discrete=True, discrete_dtype=TensorProto.FLOAT))
    for engine in SENTIS_AND_IE:
        assert found[engine].status == FAILS
        finding = next(f for f in found[engine].findings if f.rule == "ml-agents-discrete-dtype")
        assert finding.node == "discrete_actions" and "Tensor<int>" in finding.message and "FLOAT" in finding.message
    for engine in BARRACUDA:  # Barracuda holds everything as float and casts with (int)
        assert "ml-agents-discrete-dtype" not in rules(found[engine])
        assert "cast-no-op" not in rules(found[engine])  # int64 -> float is no truncation


def test_a_plain_classifier_gets_a_verdict_naming_what_is_missing():
    found = verdicts(fx.classifier())
    for engine in ENGINES:
        assert found[engine].status == FAILS
        assert {"ml-agents-version-missing", "ml-agents-memory-missing", "ml-agents-no-action-output",
                "ml-agents-unknown-input"} <= rules(found[engine])
    nre = next(f for f in found["sentis-2.1"].findings if f.rule == "ml-agents-no-action-output")
    assert nre.message.startswith("NullReferenceException in SentisModelInfo.CheckContinuousOutputs")
    assert "probabilities" in nre.message
    assert "The model does not contain any Action Output Node." in next(
        f.message for f in found["barracuda-2.3"].findings if f.rule == "ml-agents-no-action-output")


def test_partial_ops_attributes_types_ranks_and_dims():
    """One model per rule kind, each finding where its table says."""
    def model_with(nodes, inits=(), inputs=(), opset=9):
        extra_out = [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)]
        m = fx.policy(opset=opset, extra_nodes=nodes, extra_initializers=list(inits), extra_outputs=extra_out)
        m.graph.input.extend(inputs)
        return m

    split = model_with([helper.make_node("Split", ["obs_0"], ["a", "b"], axis=1, name="split")])
    assert "split-attribute" in rules(verdicts(split)["barracuda-3.0"], "error")
    assert "split-attribute" not in rules(verdicts(split)["sentis-1.2"])

    cast = model_with([helper.make_node("Cast", ["obs_0"], ["i"], to=TensorProto.INT32, name="truncate"),
                       helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT, name="back")])
    assert "cast-no-op" in rules(verdicts(cast)["barracuda-2.3"], "error")
    assert verdicts(cast)["ie-2.2"].status == LOADS
    floored = model_with([helper.make_node("Floor", ["obs_0"], ["whole"], name="floor"),
                          helper.make_node("Cast", ["whole"], ["i"], to=TensorProto.INT32, name="truncate"),
                          helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT, name="back")])
    assert "cast-no-op" not in rules(verdicts(floored)["barracuda-2.3"])

    reduce13 = model_with([helper.make_node("ReduceSum", ["obs_0", "axes"], ["s"], keepdims=1, name="sum")],
                          [fx.const("axes", [1], np.int64)], opset=13)
    found = verdicts(reduce13)
    assert "reduce-axes-input" in rules(found["barracuda-2.3"], "error")
    assert "reduce-axes-input" not in rules(found["barracuda-3.0"]) and found["sentis-2.1"].status == LOADS

    no_axes = model_with([helper.make_node("ReduceMean", ["obs_0"], ["m"], name="mean")])
    assert "reduce-no-axes" in rules(verdicts(no_axes)["barracuda-3.0"])

    gemm = model_with([helper.make_node("Gemm", ["obs_0", "w4"], ["g"], alpha=0.5, name="gemm")],
                      [fx.const("w4", np.ones((4, 4)))])
    found = verdicts(gemm)
    assert "gemm-alpha-beta" in rules(found["barracuda-3.0"], "warning")
    assert "gemm-alpha-beta" in rules(found["sentis-1.4"], "warning")
    assert found["sentis-2.1"].status == LOADS  # 2.1 applies alpha and beta

    constant = model_with([helper.make_node("Constant", [], ["c"], value_float=1.0, name="const")])
    found = verdicts(constant)
    assert "constant-value-only" in rules(found["sentis-2.1"], "error")
    assert "constant-value-only" in rules(found["ie-2.2"], "error")
    assert "constant-value-only" not in rules(found["ie-2.3"])

    gather = model_with([helper.make_node("Gather", ["obs_0", "idx"], ["gathered"], axis=1, name="gather")],
                        [fx.const("idx", [-1], np.int64)])
    assert "gather-negative" in rules(verdicts(gather)["barracuda-3.0"])
    assert "gather-negative" not in rules(verdicts(gather)["sentis-2.1"])

    deep = [helper.make_node("Reshape", ["obs_0", "shape9"], ["deep"], name="deep")]
    found = verdicts(model_with(deep, [fx.const("shape9", [-1] + [1] * 7 + [4], np.int64)]))
    assert "rank-8d" in rules(found["barracuda-3.0"]) and "rank-8d" in rules(found["ie-2.2"])

    doubles = model_with([helper.make_node("Cast", ["obs_0"], ["d"], to=TensorProto.DOUBLE, name="to_double"),
                          helper.make_node("Add", ["d", "big"], ["sum"], name="add_double")],
                         [fx.const("big", [-1e10], np.float64)])
    assert "constant-clamped" in rules(verdicts(doubles)["sentis-2.1"], "error")

    bf16 = fx.policy(extra_initializers=[helper.make_tensor("unused_bf16", TensorProto.BFLOAT16, [1], [0])])
    assert "constant-type" in rules(verdicts(bf16)["ie-2.2"], "error")


def test_the_inputs_ml_agents_feeds_and_the_memory_it_carries():
    fixed_batch = fx.policy()
    fixed_batch.graph.input[0].type.tensor_type.shape.dim[0].Clear()
    fixed_batch.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    assert "ml-agents-batch-dim" in rules(verdicts(fixed_batch)["sentis-2.1"], "error")

    int_input = fx.policy()
    int_input.graph.input.append(helper.make_tensor_value_info("sequence_length", TensorProto.INT32, [1]))
    found = verdicts(int_input)
    assert "ml-agents-int-cast-input" in rules(found["sentis-2.1"], "error")
    assert "ml-agents-int-cast-input" not in rules(found["barracuda-3.0"])

    stranger = fx.policy()
    stranger.graph.input.append(helper.make_tensor_value_info("camera", TensorProto.FLOAT, ["batch", 3, 8, 8]))
    found = verdicts(stranger, ["ie-2.2"])["ie-2.2"]
    assert [f.message for f in found.findings] == ["Unknown tensorProxy expected as input : camera"]

    flat_memory = fx.policy()
    flat_memory.graph.initializer[1].CopyFrom(fx.const("memory_size", [4.0]))
    flat_memory.graph.input.append(helper.make_tensor_value_info("recurrent_in", TensorProto.FLOAT, ["batch", 4]))
    found = verdicts(flat_memory)
    assert {"ml-agents-memory-rank", "ml-agents-memory-output-missing"} <= rules(found["sentis-2.1"])
    assert "ml-agents-memory-rank" not in rules(found["barracuda-3.0"])


def test_a_tf2onnx_file_with_memory_takes_barracudas_legacy_importer():
    m = fx.policy(producer="tf2onnx")
    m.graph.input.append(helper.make_tensor_value_info("recurrent_in", TensorProto.FLOAT, ["batch", 1, 4]))
    m.graph.output.append(helper.make_tensor_value_info("recurrent_out", TensorProto.FLOAT, ["batch", 1, 4]))
    m.graph.node.append(helper.make_node("Identity", ["recurrent_in"], ["recurrent_out"], name="memory"))
    found = verdicts(m)
    assert "legacy-lstm-importer" in rules(found["barracuda-2.3"])
    assert "legacy-lstm-importer" not in rules(found["sentis-2.1"])


# ------------------------------------------------------------------------------------------ bad input
def test_what_is_not_a_model_is_one_line(tmp_path):
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n")
    good = tmp_path / "good.onnx"
    good.write_bytes(fx.policy().SerializeToString())
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good.read_bytes()[:60])
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    frozen = tmp_path / "3DBall.bytes"  # the other export: a TensorFlow GraphDef, also a protobuf
    from trainers.tf_utils import tf

    with tf.Graph().as_default() as graph:
        tf.identity(tf.constant([1.0, 2.0]), name="action")
    frozen.write_bytes(graph.as_graph_def().SerializeToString())
    for path, words in ((text, "not an ONNX model"), (truncated, "truncated"), (empty, "not an ONNX model"),
                        (frozen, "not an ONNX model"), (tmp_path / "missing.onnx", "no such file"),
                        (tmp_path, "a folder")):
        with pytest.raises(NotAModel, match=words) as caught:
            check_model(str(path))
        assert "\n" not in str(caught.value)
    assert check_model(str(good)).loads_everywhere


# ------------------------------------------------------------------------------------------ at export
def test_the_export_logs_each_finding_naming_the_engine_and_strict_refuses_the_file(tmp_path, caplog):
    from trainers.export.onnx_model import ModelCheckError, check_export

    path = str(tmp_path / "Brain.onnx")
    with caplog.at_level(logging.WARNING, logger="unityagents"):
        assert check_export(fx.policy(), path) == 0
        assert check_export(fx.with_unknown_op("Einsum"), path) == 2  # the two Barracudas of Release 19 and 20
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all(line.startswith("Brain.onnx, barracuda-") for line in lines)
    assert "Unknown type Einsum encountered while parsing layer policy/Einsum" in lines[0]
    with pytest.raises(ModelCheckError, match=r"Brain.onnx would not load.*barracuda-2.3.*--strict-export"):
        check_export(fx.with_unknown_op("Einsum"), path, strict=True)
    assert not os.path.exists(path)


def test_our_exports_load_in_every_engine_and_strict_export_passes(tmp_path):
    """Continuous, discrete, recurrent-visual, hybrid: every engine imports them without a finding."""
    from tests.e2e.test_hybrid_actions import hybrid_brain, ppo_trainer
    from tests.trainers.ppo.test_ppo import BRAINS, make_trainer
    from trainers.export.onnx_model import export_onnx
    from unityagents.brain import BrainParameters

    built = [make_trainer(BrainParameters("FakeBrain", BRAINS[kind]), use_recurrent="recurrent" in kind,
                          hidden_units=8) for kind in ("continuous", "discrete", "recurrent-visual-discrete")]
    built.append(ppo_trainer(hybrid_brain()))
    for k, trainer in enumerate(built):
        (path,) = export_onnx(trainer.sess, [trainer], str(tmp_path / str(k)), strict=True)
        report = check_model(path)
        assert report.loads_everywhere and all(not v.problems() for v in report.verdicts), report.text()
        assert onnx.load(path).opset_import[0].version == 9
