"""TensorFlow is imported once, for graph mode, without the Keras import that its ``__init__`` makes eagerly."""
import subprocess
import sys
import textwrap

import pytest


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_tensorflow_imports_without_keras_and_keras_still_imports_after():
    out = _python("""
        import sys
        from trainers.tf_utils import tf
        print("keras" in sys.modules, "tf_keras" in sys.modules, "IPython" in sys.modules)
        print(sys.modules.get("keras", 0) is None)
        import tensorflow
        print(tensorflow.keras.layers.Dense.__module__.split(".")[0])
    """)
    assert out.splitlines() == ["False False False", "False", "keras"]


@pytest.mark.parametrize("first", ["keras", "tensorflow"])
def test_an_earlier_import_is_left_as_it_is(first):
    out = _python(f"""
        import sys
        import {first}
        from trainers.tf_utils import tf
        print("keras" in sys.modules and sys.modules["keras"] is not None)
    """)
    assert out == "True"
