"""The one place TensorFlow is imported and configured for graph mode.

Every module of ``trainers`` (and ``academy.internal``) imports ``tf`` from here, so the run-wide
settings below are applied before any op is built:

* ``disable_resource_variables``: classic ``VariableV2`` variables, which freeze into plain
  ``Const`` nodes that a TensorFlow 1.x-era runtime (Unity's TensorFlowSharp) can load;
* ``disable_control_flow_v2``: ``while_loop`` (the LSTM unroll) builds v1 ``Enter``/``Exit``/
  ``Merge``/``Switch``/``NextIteration`` ops instead of ``While``/``StatelessWhile`` functions.

Graphs are built inside an explicit ``tf.Graph().as_default()``, so eager execution never
touches them.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter out of the console

import tensorflow as _tf  # noqa: E402

tf = _tf.compat.v1
tf.logging.set_verbosity(tf.logging.ERROR)
tf.disable_resource_variables()
tf.disable_control_flow_v2()

__all__ = ["tf"]
