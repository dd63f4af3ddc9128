"""TensorFlow is imported once, for graph mode, without the imports its ``__init__`` makes only for Keras."""
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


def test_h5py_and_scipy_are_not_imported_with_tensorflow_and_still_import_after():
    out = _python("""
        import sys
        from trainers.tf_utils import tf
        tf.Graph
        print("h5py" in sys.modules, "scipy" in sys.modules)
        import h5py, scipy.sparse
        print(h5py.File.__module__.split(".")[0], scipy.sparse.issparse.__module__.split(".")[0])
    """)
    assert out.splitlines() == ["False False", "h5py scipy"]


def test_a_package_imported_before_tensorflow_is_used_as_it_is():
    out = _python("""
        import sys
        import h5py, scipy.sparse
        from trainers.tf_utils import tf
        tf.Graph
        from tensorflow.python.keras.saving import hdf5_format
        from tensorflow.python.keras.engine import training_v1
        print(hdf5_format.h5py is h5py, training_v1.issparse is scipy.sparse.issparse)
        print(sys.modules["h5py"] is h5py, sys.modules["scipy"] is scipy)
    """)
    assert out.splitlines() == ["True True", "True True"]
