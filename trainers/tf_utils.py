"""The one place TensorFlow is imported and configured for graph mode.

Every module of ``trainers`` imports ``tf`` from here, so the run-wide
settings below are applied before any op is built:

* ``disable_resource_variables``: classic ``VariableV2`` variables, which freeze into plain
  ``Const`` nodes that a TensorFlow 1.x-era runtime (Unity's TensorFlowSharp) can load;
* ``disable_control_flow_v2``: ``while_loop`` (the LSTM unroll) builds v1 ``Enter``/``Exit``/
  ``Merge``/``Switch``/``NextIteration`` ops instead of ``While``/``StatelessWhile`` functions.

``tf`` imports TensorFlow on its first use (``_TensorFlowV1``), not when this module is imported:
the front ends check a configuration and load every trainer type without it, and the runner
imports it on a thread of its own while the environments start (``runner.run.import_in_background``).
TensorFlow itself is imported without the imports its ``__init__`` makes only for Keras
(``_import_tensorflow_without_keras``), which are a second or more of every run's start-up.

Graphs are built inside an explicit ``tf.Graph().as_default()``, so eager execution never
touches them.
"""
from __future__ import annotations

import os
import sys
import threading
import types
from typing import Any, Callable, Dict, List, Mapping, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter out of the console

import numpy as np  # noqa: E402

#: What TensorFlow's ``__init__`` imports only to offer it to Keras, each import inside a ``try`` that
#: passes over an ``ImportError``: Keras itself (its optimizers, registered for SavedModels), and for
#: TensorFlow's internal legacy copy of Keras (``tensorflow.python.keras``, which ``tf.compat.v1``'s
#: layers import) h5py, for saving its models as ``.h5``, and SciPy, for its sparse inputs.
_SKIPPED_WHILE_IMPORTING = ("keras", "tf_keras", "h5py", "scipy")


def _import_tensorflow_without_keras():
    """``tensorflow``, imported without the imports its ``__init__`` makes only for Keras.

    Keras' import (all of Keras, IPython included) is about a third of TensorFlow's, a second or
    more of every run's start-up, and h5py's and SciPy's another 0.1-0.2 s; nothing here builds a
    Keras object (``_SKIPPED_WHILE_IMPORTING`` says who imports them and why). So these packages'
    names stand for "not installed" while TensorFlow imports, and are given back at once:
    ``tf.keras``, ``import keras``, ``import h5py`` and ``import scipy`` still import them on first
    use. Only the legacy copy keeps the answer it got: its ``.h5`` saving and SciPy sparse inputs
    are off, which nothing public reaches (``tf.keras`` is the standalone Keras). Where TensorFlow
    or Keras is already imported (a user's notebook), the import is left as it is, and a package
    already imported is used as it is.
    """
    if "tensorflow" in sys.modules or any(name in sys.modules for name in ("keras", "tf_keras")):
        import tensorflow
        return tensorflow
    skipped = [name for name in _SKIPPED_WHILE_IMPORTING if name not in sys.modules]
    for name in skipped:
        sys.modules[name] = None  # the import system's "not installed" marker
    try:
        import tensorflow
    finally:
        for name in skipped:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return tensorflow


class _TensorFlowV1(types.ModuleType):
    """``tensorflow.compat.v1``, imported and configured on first use.

    Importing TensorFlow is most of a run's start-up (1.5-2 s). Modules of ``trainers``
    name ``tf`` in function bodies only, so importing them (to read a trainer's settings, to check
    a configuration) costs nothing, and the runner can import TensorFlow on another thread while
    the environments start (``import_tensorflow``). On first use the real module's names are
    copied into this one, so every later ``tf.<name>`` is a plain module attribute.
    """

    _lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        import_tensorflow()
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module 'tensorflow.compat.v1' has no attribute {name!r}") from None

    def __dir__(self) -> List[str]:
        import_tensorflow()
        return list(self.__dict__)


#: ``tensorflow.compat.v1`` with the run-wide settings above, imported on first use.
tf: Any = _TensorFlowV1("tensorflow.compat.v1")


def import_tensorflow() -> None:
    """Import TensorFlow and apply the run-wide settings, once; any thread may call it, and a second
    caller waits for the first."""
    if "Graph" in tf.__dict__:
        return
    with _TensorFlowV1._lock:
        if "Graph" in tf.__dict__:
            return
        v1 = _import_tensorflow_without_keras().compat.v1
        v1.logging.set_verbosity(v1.logging.ERROR)
        v1.disable_resource_variables()
        v1.disable_control_flow_v2()
        tf.__dict__.update({k: v for k, v in vars(v1).items() if k not in ("__name__", "__spec__", "__loader__")})


def strip_default_attrs(graph_def):
    """``graph_def`` without the node attributes that equal their op's registered default value.

    What a loader fills back in from its own op registry; stripping them lets a TensorFlow 1.x-era
    runtime load a graph whose ops gained attributes since (e.g. ``explicit_paddings``,
    ``half_pixel_centers``). Done with the public ``export_meta_graph(strip_default_attrs=True)``
    rather than the private ``op_def_registry``, on an empty graph so no collection is exported.
    """
    with tf.Graph().as_default():
        meta = tf.train.export_meta_graph(graph_def=graph_def, collection_list=[], strip_default_attrs=True)
    return meta.graph_def


def compiled_call(sess, fetches: Sequence[Any], feeds: Sequence[tf.Tensor] = (), inline: bool = True
                  ) -> Callable[..., List[Any]]:
    """``fetches`` for the values of ``feeds``, as one callable compiled by the session once.

    ``fetches`` may mix tensors and ops (ops run and give None in their place). Why not the public
    ``Session.make_callable``: with a feed list it builds a feed dict and goes through
    ``Session.run`` on every call (TensorFlow 2.x's own source says so), ~400 us of Python for the
    acting graph; the session's callable (``_make_callable_from_options``, what Keras' graph mode
    runs on) takes the values as they are. With ``inline`` its run options execute the graph in
    the calling thread (``inter_op_thread_pool = -1``), which spares the hand-off to the inter-op
    thread pool and back for graphs of small ops (the matmuls still use the intra-op pool); without
    it, the session's inter-op pool runs independent branches side by side, which pays where the
    branches are large kernels (a recurrent SAC update's critics and policy, the two passes of
    MA-POCA's critic). Either way each op computes the same values. Each value is converted to its
    feed's dtype (a no-op for an array that already has it): the callable refuses, say, a float64
    array for a float32 feed where ``Session.run`` converts.
    """
    from tensorflow.core.protobuf import config_pb2

    make = getattr(sess, "_make_callable_from_options", None)
    fetches, feeds = list(fetches), list(feeds)
    is_op = [isinstance(f, tf.Operation) for f in fetches]
    if make is None:  # a session-like object without the compiled path
        run = sess.make_callable(fetches, feeds)
        return lambda *values: list(run(*values))
    options = config_pb2.CallableOptions()
    options.feed.extend(t.name for t in feeds)
    options.fetch.extend(f.name for f, op in zip(fetches, is_op) if not op)
    options.target.extend(f.name for f, op in zip(fetches, is_op) if op)
    if inline:
        options.run_options.inter_op_thread_pool = -1
    raw = make(options)
    dtypes = [t.dtype.as_numpy_dtype for t in feeds]
    n_ops = sum(is_op)
    if n_ops and not all(is_op[len(fetches) - n_ops:]):
        def call(*values: Any) -> List[Any]:
            out = iter(raw(*[np.asarray(v, d) for v, d in zip(values, dtypes)]))
            return [None if op else next(out) for op in is_op]
    else:  # the ops (if any) come last: their Nones are appended
        def call(*values: Any) -> List[Any]:
            return raw(*[np.asarray(v, d) for v, d in zip(values, dtypes)]) + [None] * n_ops
    return call


class CompiledRuns:
    """``sess.run(fetches, feed)`` with a dict of fetches and a feed dict, through ``compiled_call``.

    Each distinct set of fetch names and fed placeholders is compiled once, on first use: for the
    calls a trainer makes at every step or gradient step, where a feed dict through
    ``Session.run`` costs more Python than the small graph it runs. A fetch name must stand for
    the same tensor or op on every call.
    """

    def __init__(self, sess, inline: bool = True):
        self.sess = sess
        self.inline = inline
        self._calls: Dict[Any, Callable[..., List[Any]]] = {}

    def run(self, fetches: Mapping[str, Any], feed: Mapping[tf.Tensor, Any]) -> Dict[str, Any]:
        key = (tuple(fetches), tuple(feed))
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = compiled_call(self.sess, list(fetches.values()), list(feed), inline=self.inline)
        return dict(zip(fetches, call(*feed.values())))


__all__ = ["tf", "CompiledRuns", "compiled_call", "import_tensorflow", "strip_default_attrs"]
