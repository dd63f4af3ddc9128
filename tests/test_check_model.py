"""``unityagents-check-model``: verdicts per engine, exit status 0 / 1 / 2, ``--json``, and one line (never a
traceback) for a file that is not a model."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from onnx import TensorProto

from tests.trainers.export import model_fixtures as fx
from trainers.export.model_check import ENGINES
from trainers.export.model_check.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def files(tmp_path):
    out = {}
    for name, model in (("good", fx.policy()), ("einsum", fx.with_unknown_op("Einsum")),
                        ("float_discrete", fx.policy(discrete=True, discrete_dtype=TensorProto.FLOAT)),
                        ("classifier", fx.classifier()), ("torch", fx.torch_style_policy())):
        path = tmp_path / f"{name}.onnx"
        path.write_bytes(model.SerializeToString())
        out[name] = str(path)
    (tmp_path / "text.onnx").write_text("not a model")
    out["text"] = str(tmp_path / "text.onnx")
    (tmp_path / "truncated.onnx").write_bytes(open(out["good"], "rb").read()[:50])
    out["truncated"] = str(tmp_path / "truncated.onnx")
    return out


def test_a_model_every_engine_loads_exits_0_with_a_verdict_per_engine(files, capsys):
    assert main([files["good"]]) == 0
    out = capsys.readouterr().out
    for engine in ENGINES:
        assert f"  {engine} " in out
    assert out.count(": imports and runs") == len(ENGINES) and out.rstrip().endswith("loads in every engine checked")


def test_a_model_one_asked_engine_refuses_exits_1_naming_node_rule_and_unity_words(files, capsys):
    assert main([files["einsum"], "--engine", "barracuda-3.0"]) == 1
    out = capsys.readouterr().out
    assert "barracuda-3.0" in out and ": fails" in out
    assert "error: [unknown-op] policy/Einsum: Unknown type Einsum encountered while parsing layer policy/Einsum." \
        in out
    assert out.rstrip().endswith("fails in: barracuda-3.0")
    # The engines that know the op: exit 0.
    assert main([files["einsum"], "--engine", "sentis-2.1,ie-2.2"]) == 0


def test_json_for_tools(files, capsys):
    assert main([files["float_discrete"], "--json", "--engine", "barracuda-3.0", "--engine", "sentis-2.1"]) == 1
    (doc,) = json.loads(capsys.readouterr().out)
    assert doc["loads"] is False and doc["opset"] == 9
    by_engine = {e["engine"]: e for e in doc["engines"]}
    assert by_engine["barracuda-3.0"]["verdict"] == "imports and runs"
    assert by_engine["sentis-2.1"]["verdict"] == "fails"
    (finding,) = by_engine["sentis-2.1"]["findings"]
    assert finding["rule"] == "ml-agents-discrete-dtype" and finding["node"] == "discrete_actions"
    assert finding["severity"] == "error" and "Tensor<int>" in finding["message"] and finding["source"]


def test_warnings_alone_exit_0(files, capsys):
    assert main([files["torch"], "--engine", "barracuda-2.3"]) == 0
    assert "imports with warnings" in capsys.readouterr().out


def test_a_plain_classifier_gets_a_verdict_saying_what_is_missing(files, capsys):
    assert main([files["classifier"], "--engine", "sentis-2.1"]) == 1
    out = capsys.readouterr().out
    assert 'Required constant "version_number" was not found' in out
    assert "NullReferenceException" in out and "probabilities" in out


@pytest.mark.parametrize("name", ["text", "truncated", "missing"])
def test_what_is_not_a_model_exits_2_with_one_line(files, name, capsys):
    path = files.get(name, "/nonexistent/policy.onnx")
    assert main([path]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert captured.err.startswith(f"unityagents-check-model: {path}: ")


def test_a_bad_file_among_good_ones_exits_2_and_the_others_are_still_checked(files, capsys):
    assert main([files["good"], files["text"], "--json"]) == 2
    docs = json.loads(capsys.readouterr().out)
    assert docs[0]["loads"] is True and "not an ONNX model" in docs[1]["error"]


def test_the_command_line_is_refused_in_one_line(capsys):
    assert main([]) == 2
    assert main(["x.onnx", "--engine", "barracuda-9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "unknown engine 'barracuda-9'" in err[1]
    assert main(["--list-engines"]) == 0
    listed = capsys.readouterr().out
    assert "sentis-2.1" in listed and "com.unity.ml-agents 3.0.0 (Release 22)" in listed


def test_the_module_runs_as_a_program_without_a_traceback(files):
    """What the console script runs, in its own process: a damaged file is one line on stderr, exit 2."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-m", "trainers.export.model_check", files["truncated"]],
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if "check-model" in line] == done.stderr.strip().splitlines()
    done = subprocess.run([sys.executable, "-m", "trainers.export.model_check", files["good"], "--engine", "ie-2.2"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 0 and "ie-2.2" in done.stdout


@pytest.mark.slow
def test_a_run_warns_of_each_finding_and_strict_export_stops_it(tmp_path, monkeypatch):
    """3DBall end to end: our export passes ``unityagents-learn --strict-export``; with ``learn.py``, an engine
    that did not know one of its ops (Tanh removed from Barracuda 3.0's table for this test) is a warning
    naming the engine, and with --strict-export the run stops and that file is not written."""
    import learn_r22
    from tests.conftest import free_port, in_process, learn_in_process, write
    from trainers.export.model_check.tables import engine_table

    r22 = write(tmp_path / "3DBall.yaml", "behaviors:\n  3DBall:\n    max_steps: 120\n    summary_freq: 60\n"
                "    time_horizon: 8\n    hyperparameters: {batch_size: 16, buffer_size: 32}\n"
                "    network_settings: {hidden_units: 8, num_layers: 1}\n")
    code, out = in_process(learn_r22.main, tmp_path, [r22, "--env=3DBall", "--run-id=strict", "--strict-export",
                                                      f"--base-port={free_port()}"], timeout=300)
    assert code == 0, out
    assert (tmp_path / "results" / "strict" / "3DBall.onnx").is_file() and "[unknown-op]" not in out

    config = write(tmp_path / "config.yaml", "Ball3DBrain:\n  max_steps: 120\n  summary_freq: 60\n"
                   "  batch_size: 16\n  buffer_size: 32\n  hidden_units: 8\n  time_horizon: 8\n")
    args = ("3DBall", "--train", "--trainer-config", config)

    barracuda = engine_table("barracuda-3.0")
    monkeypatch.setitem(barracuda, "ops", barracuda["ops"] - {"Tanh"})
    code, out = learn_in_process(tmp_path, *args, "--run-path", "warned")
    assert code == 0, out
    assert (tmp_path / "models" / "warned" / "Ball3DBrain.onnx").is_file()
    warned = [line for line in out.splitlines() if "[unknown-op]" in line]
    assert warned and all(re.search(r"Ball3DBrain(-\d+)?\.onnx, barracuda-3\.0: error: \[unknown-op\]", line)
                          for line in warned)
    assert any("Ball3DBrain.onnx, barracuda-3.0" in line for line in warned)  # the final export too
    assert "Unknown type Tanh encountered while parsing layer" in warned[0]

    code, out = learn_in_process(tmp_path, *args, "--run-path", "refused", "--strict-export")
    assert code == 1 and "would not load cleanly in Unity" in out and "barracuda-3.0" in out
    assert not (tmp_path / "models" / "refused" / "Ball3DBrain.onnx").exists()
