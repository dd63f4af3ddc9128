"""TensorFlow is imported where it is first needed, and a run imports it while its environments start.

The checks that need a process where TensorFlow was never imported run in a fresh interpreter.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import runner.run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fresh_python(code: str, cwd: str = ROOT) -> str:
    """The stdout of ``code`` run by a new interpreter from the project root (its failures fail the test)."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_checking_a_run_config_and_loading_every_trainer_import_no_tensorflow(tmp_path):
    out = fresh_python(f"""
        import sys
        import learn, learn_r22
        from trainers.trainer.registry import load_registry

        registry = load_registry()
        print(sorted(registry.trainers))
        print(learn_r22.main([{os.path.join(ROOT, "config", "ppo", "3DBall.yaml")!r}, "--env=3DBall", "--dry-run"]))
        print("tensorflow" in sys.modules)
    """, cwd=str(tmp_path))
    names, status, imported = out.splitlines()[0], out.splitlines()[-2], out.splitlines()[-1]
    assert "'ppo'" in names and "'sac'" in names and "'poca'" in names
    assert status == "0"
    assert imported == "False"


def test_no_module_of_the_run_or_the_trainers_imports_tensorflow_when_it_is_imported():
    """What ``train`` imports before it launches (the controller and all it builds on) must not import
    TensorFlow on the main thread, or the background import would have nothing left to overlap."""
    out = fresh_python("""
        import pkgutil, sys
        import runner, trainers

        for package in (runner, trainers):
            for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
                if not module.name.endswith("__main__"):
                    __import__(module.name)
                    if "tensorflow" in sys.modules:
                        print(module.name)
                        raise SystemExit(0)
        print("none")
    """)
    assert out.split() == ["none"]


def test_tf_is_imported_and_configured_for_graph_mode_on_first_use():
    out = fresh_python("""
        import sys
        from trainers.tf_utils import tf

        print("tensorflow" in sys.modules)
        with tf.Graph().as_default():
            variable = tf.get_variable("v", [2])
            loop = tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)])
            print(variable.op.type, sorted({op.type for op in loop.graph.get_operations()} & {"Enter", "While"}))
        print("tensorflow" in sys.modules)
    """)
    assert out.split() == ["False", "VariableV2", "['Enter']", "True"]


def test_the_background_import_configures_tensorflow_for_the_main_thread():
    out = fresh_python("""
        import sys
        import runner.run
        from trainers.tf_utils import tf

        runner.run.import_in_background().join()
        print("tensorflow" in sys.modules, "Graph" in vars(tf))
        with tf.Graph().as_default():
            print(tf.get_variable("v", [2]).op.type)
    """)
    assert out.split() == ["True", "True", "VariableV2"]


def test_a_run_starts_importing_tensorflow_before_it_launches_its_environments(monkeypatch):
    order = []

    class Launched(Exception):
        pass

    def environment_set(*args, **kwargs):
        order.append("launch")
        raise Launched()

    monkeypatch.setattr(runner.run, "import_in_background", lambda: order.append("import"))
    monkeypatch.setattr(runner.run, "EnvironmentSet", environment_set)
    opts = runner.run.RunOptions(env="3DBall", config={}, run_path="order")
    with pytest.raises(Launched):
        runner.run.train(opts)
    assert order == ["import", "launch"]
