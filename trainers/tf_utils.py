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


__all__ = ["tf", "strip_default_attrs"]
