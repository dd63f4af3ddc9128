"""The encoder of variable-length observations: entity embedding, masked residual self-attention.

A variable-length sensor (``Sensor.variable_length``: Unity's BufferSensor) holds up to ``N_max``
entities of ``F`` floats, its unused rows all zeros. Its values sit in the brain's state like a
vector sensor's, row after row, so buffers, trainers and the ONNX export carry them unchanged;
this module reads them back as ``[N, N_max, F]`` and encodes them as a set, the way ML-Agents'
trainer does (``torch_entities/attention.py`` and ``networks.py``, release 21):

* **mask**: a row whose squared values sum below 0.01 is an absent entity (ML-Agents'
  ``get_zero_entities_mask``); real rows must therefore carry a value of magnitude (a one-hot).
* **entity embedding**: one dense layer with swish on each entity concatenated with the agent's
  own (normalised) vector observations, ``h_size`` units, its kernel drawn from
  N(0, 0.125 / h_size) (ML-Agents' ``EntityEmbedding`` with T-Fixup initialisation). The dense
  layer on the concatenation is written as the sum of one layer on the entity and one on the
  vector, which is the same function without tiling the vector ``N_max`` times.
* **residual self-attention**: parameter-free layer norm; query, key and value projections;
  ``heads`` heads (4 when ``h_size`` allows), logits scaled by ``1/sqrt(h_size)`` and set to
  -1e6 at absent keys; an output projection added to the normed input; layer norm again; then
  the mean over the present entities (``ResidualSelfAttention``, pooled with 1e-7 in the
  denominator, so an agent that sees no entity gets zeros rather than NaN).

The pooled ``[N, h_size]`` joins the other features (the vector observations, the cameras)
before the policy and value networks. Several variable-length sensors are embedded each on its
own and attend together, their masks concatenated. The running normaliser covers only the vector
sensors: the entity rows reach the network raw, as in ML-Agents, so that zero rows stay zero.

Every op is created once, while the graph is built; all are ONNX opset-9 ops that Unity's
engines import (MatMul, Transpose, Reshape, Softmax, ReduceSum, ReduceMean, Less, Cast); the
batched products are TF 1.x's ``BatchMatMul``, so the ``.bytes`` export takes the graph too.
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

from trainers.models import RunningNormalizer
from trainers.tf_utils import tf
from unityagents.brain import BrainParameters, Sensor

#: A row whose squared values sum below this is padding (``get_zero_entities_mask``).
ZERO_ROW = 0.01
#: The logit of an absent entity (ML-Agents' ``MultiHeadAttention.NEG_INF``).
NEG_INF = -1e6
#: Added to the count of present entities in the mean (``ResidualSelfAttention.EPSILON``).
POOL_EPSILON = 1e-7
LAYER_NORM_EPSILON = 1e-5


def variable_length_sensors(brain: BrainParameters) -> List[Sensor]:
    """The brain's variable-length sensors, in sensor order."""
    return [s for s in getattr(brain, "sensors", ()) if getattr(s, "variable_length", False)]


def entity_mask(entities: tf.Tensor) -> tf.Tensor:
    """``[N, N_max]`` float: 1 where the row of ``entities`` ``[N, N_max, F]`` is absent (all zeros)."""
    return tf.cast(tf.reduce_sum(tf.square(entities), axis=2) < ZERO_ROW, tf.float32)


def _init(units: int) -> tf.Initializer:
    return tf.random_normal_initializer(stddev=math.sqrt(0.125 / units))


def _linear(x: tf.Tensor, units: int, name: str, bias: bool = True) -> tf.Tensor:
    """``x @ W (+ b)`` over the last axis of a rank-3 ``x`` ``[N, M, d]`` (a 2-D MatMul between reshapes)."""
    rows, width = int(x.shape[1]), int(x.shape[2])
    with tf.variable_scope(name):
        kernel = tf.get_variable("kernel", [width, units], initializer=_init(units))
        y = tf.matmul(tf.reshape(x, [-1, width]), kernel)
        if bias:
            y = tf.nn.bias_add(y, tf.get_variable("bias", [units], initializer=tf.zeros_initializer()))
    return tf.reshape(y, [-1, rows, units])


def _batch_matmul(x: tf.Tensor, y: tf.Tensor, adj_y: bool = False) -> tf.Tensor:
    """The TF 1.x ``BatchMatMul`` op (``tf.matmul`` of rank-4 tensors makes ``BatchMatMulV2``, which the
    ``.bytes`` export refuses: Unity's TensorFlow 1.x runtime lacks it)."""
    return tf.raw_ops.BatchMatMul(x=x, y=y, adj_x=False, adj_y=adj_y)


def layer_norm(x: tf.Tensor) -> tf.Tensor:
    """Zero mean and unit variance over the last axis, without learned scale or shift (ML-Agents' ``LayerNorm``)."""
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    centred = x - mean
    variance = tf.reduce_mean(centred * centred, axis=-1, keepdims=True)
    return centred / tf.sqrt(variance + LAYER_NORM_EPSILON)


def entity_embedding(x_self: Optional[tf.Tensor], entities: tf.Tensor, size: int, name: str) -> tf.Tensor:
    """``[N, N_max, size]``: swish of one dense layer on each entity next to ``x_self`` ``[N, d]`` (or alone)."""
    with tf.variable_scope(name):
        y = _linear(entities, size, "entity")
        if x_self is not None:
            with tf.variable_scope("self"):
                kernel = tf.get_variable("kernel", [int(x_self.shape[-1]), size], initializer=_init(size))
            y = y + tf.expand_dims(tf.matmul(x_self, kernel), 1)
        return y * tf.sigmoid(y)


def attention_heads(size: int) -> int:
    """4 heads when ``size`` splits into 4 (ML-Agents' choice), else 2, else 1."""
    return next(h for h in (4, 2, 1) if size % h == 0)


def residual_self_attention(embedded: tf.Tensor, mask: tf.Tensor, name: str,
                            heads: Optional[int] = None) -> tf.Tensor:
    """``[N, size]``: one masked multi-head self-attention block over ``embedded`` ``[N, M, size]``,
    with its residual and layer norms, mean-pooled over the entities where ``mask`` (``[N, M]``) is 0."""
    rows, size = int(embedded.shape[1]), int(embedded.shape[2])
    heads = heads or attention_heads(size)
    width = size // heads
    with tf.variable_scope(name):
        x = layer_norm(embedded)

        def split(t: tf.Tensor) -> tf.Tensor:  # [N, M, size] -> [N, heads, M, width]
            return tf.transpose(tf.reshape(t, [-1, rows, heads, width]), [0, 2, 1, 3])

        query, key, value = (split(_linear(x, size, n)) for n in ("query", "key", "value"))
        logits = _batch_matmul(query, key, adj_y=True) / math.sqrt(size)  # [N, heads, M, M]
        absent = tf.reshape(mask, [-1, 1, 1, rows])
        logits = logits * (1.0 - absent) + absent * NEG_INF
        weights = tf.nn.softmax(logits, axis=-1)
        attended = tf.reshape(tf.transpose(_batch_matmul(weights, value), [0, 2, 1, 3]), [-1, rows, size])
        out = layer_norm(_linear(attended, size, "output") + x)
        present = 1.0 - mask
        total = tf.reduce_sum(out * tf.expand_dims(present, 2), axis=1)
        return total / (tf.reduce_sum(present, axis=1, keepdims=True) + POOL_EPSILON)


def encode_entities(x_self: Optional[tf.Tensor], entity_sets: List[tf.Tensor], size: int,
                    name: str = "entities") -> tf.Tensor:
    """``[N, size]`` for the entity sets (each ``[N, N_max_k, F_k]``): each embedded with ``x_self``, then
    one attention block over all of them together."""
    with tf.variable_scope(name):
        embedded = [entity_embedding(x_self, e, size, f"embedding_{k}") for k, e in enumerate(entity_sets)]
        masks = [entity_mask(e) for e in entity_sets]
        joined = embedded[0] if len(embedded) == 1 else tf.concat(embedded, axis=1)
        mask = masks[0] if len(masks) == 1 else tf.concat(masks, axis=1)
        return residual_self_attention(joined, mask, "attention")


def variable_length_inputs(brain: BrainParameters, state: tf.Tensor, h_size: int, normalize: bool,
                           vector_name: Optional[str] = "vector_in"
                           ) -> Tuple[tf.Tensor, Optional[tf.Operation], bool, List[tf.Tensor]]:
    """What ``encoders.create_inputs`` needs for a state that holds variable-length sensors.

    Returns ``(vector_in, update_normalization, normalize, features)``: ``vector_in`` is the state
    in its own layout with the vector sensors normalised (when ``normalize`` and there are any) and
    the entity rows raw, feedable like any ``vector_in``; the features are the vector sensors'
    values (if any) and the pooled attention encoding.
    """
    sensors = [s for s in brain.sensors if not s.is_camera]
    vectors = [s for s in sensors if not s.variable_length]
    update = None
    normalize = bool(normalize and vectors)

    def cut(t: tf.Tensor, sensor: Sensor) -> tf.Tensor:
        return t[:, sensor.offset:sensor.offset + sensor.size]

    if normalize:
        raw = tf.concat([cut(state, s) for s in vectors], axis=1) if len(vectors) > 1 else cut(state, vectors[0])
        normalizer = RunningNormalizer(raw)
        update, position, parts = normalizer.update, 0, []
        for sensor in sensors:
            if sensor.variable_length:
                parts.append(cut(state, sensor))
            else:
                parts.append(normalizer.normalized[:, position:position + sensor.size])
                position += sensor.size
        vector_in = tf.concat(parts, axis=1, name=vector_name or "vector_in")
    else:
        vector_in = state if vector_name is None else tf.identity(state, name=vector_name)
    x_self = None
    if vectors:
        x_self = tf.concat([cut(vector_in, s) for s in vectors], axis=1) if len(vectors) > 1 \
            else cut(vector_in, vectors[0])
    entity_sets = [tf.reshape(cut(vector_in, s), [-1, *s.shape]) for s in sensors if s.variable_length]
    pooled = encode_entities(x_self, entity_sets, h_size)
    return vector_in, update, normalize, ([x_self] if x_self is not None else []) + [pooled]


__all__ = [
    "attention_heads",
    "encode_entities",
    "entity_embedding",
    "entity_mask",
    "layer_norm",
    "residual_self_attention",
    "variable_length_inputs",
    "variable_length_sensors",
]
