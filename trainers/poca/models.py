"""MA-POCA's centralised critic: one value over a group, one counterfactual baseline per member.

The critic reads a variable number of group members as *entities* and pools them with residual
self-attention, so one network serves a group of three and the same group after two members left:

1. each entity is embedded by one dense layer: members seen by their observation only through
   ``obs_encoder``; members seen with the action they took through ``obs_action_encoder``
   (observation next to the action: continuous values, or one-hot per discrete branch);
2. ``residual_self_attention``: layer norm, multi-head scaled dot-product attention whose keys
   of absent members are pushed to -1e6 (so they get no weight), an output projection added back
   to the entities (residual), layer norm, and a mean over the *present* entities only;
3. an MLP, then the members' count normalised to [-1, 1] by the largest group seen so far
   (``2 n / n_max - 1``), then one linear head.

``value`` is V(s): every member by its observation. ``baseline`` is member i's counterfactual
baseline b_i: member i by its observation alone, its mates by observation and action, so i's own
action is marginalised out and ``G - b_i`` credits i for what its action added. Both passes share
every weight (as ML-Agents' ``POCAValueNetwork``). The critic is for training only: the exported
policy is the brain's ordinary PPO policy graph, which acts on each agent's own observation.
"""
from __future__ import annotations

import math
from typing import List

from trainers.models import dense, mlp, new_trainable_variables
from trainers.tf_utils import tf

#: Attention heads (ML-Agents' ``ResidualSelfAttention`` default).
HEADS = 4
#: Logit given to the keys of absent members.
MASKED_LOGIT = -1e6


def dense_nd(x: tf.Tensor, units: int, name: str, activation=None, gain: float = math.sqrt(2.0)) -> tf.Tensor:
    """``dense`` over the last axis of an ``[..., d]`` tensor (entities ``[B, E, d]``)."""
    shape = tf.shape(x)
    flat = tf.reshape(x, [-1, int(x.shape[-1])])
    y = dense(flat, units, name, activation=activation, gain=gain)
    return tf.reshape(y, tf.concat([shape[:-1], [units]], axis=0))


def layer_norm(x: tf.Tensor, name: str, epsilon: float = 1e-5) -> tf.Tensor:
    """Normalise the last axis to zero mean and unit (biased) variance, then a learnt gain and bias.

    The normalisation is one ``FusedBatchNormV3`` kernel forward and one gradient kernel back, in
    place of the dozen element-wise ops (and twice as many in the gradient) of ``(x - mean) /
    sqrt(variance + epsilon)``: laid out as ``[1, rows, size, 1]`` in NCHW, each row is a channel,
    and batch normalisation in training mode scales each channel by its own mean and biased variance,
    which is what layer normalisation does to each row. The values agree with the formula's to
    float32 rounding. The critic normalises each of its entities twice per pass, about 14,000 rows of
    512 in a SoccerTwos minibatch, where the fused kernels spare about 6 % of the update's CPU. The
    critic is trained only, never exported, so this op's lack of a TensorFlow 1.x or ONNX
    counterpart costs nothing.
    """
    size = int(x.shape[-1])
    with tf.variable_scope(name):
        gain = tf.get_variable("gain", [size], initializer=tf.ones_initializer())
        bias = tf.get_variable("bias", [size], initializer=tf.zeros_initializer())
    rows_as_channels = tf.reshape(x, [1, -1, size, 1])
    rows = tf.shape(rows_as_channels)[1:2]
    normalised = tf.raw_ops.FusedBatchNormV3(
        x=rows_as_channels, scale=tf.ones(rows), offset=tf.zeros(rows), mean=tf.zeros([0]), variance=tf.zeros([0]),
        epsilon=epsilon, data_format="NCHW", is_training=True)[0]
    return tf.reshape(normalised, tf.shape(x)) * gain + bias


def residual_self_attention(own: tf.Tensor, mate_sets: List[tf.Tensor], present: tf.Tensor,
                            heads: int = HEADS, name: str = "attention") -> List[tf.Tensor]:
    """Pool ``[own, mates]`` for each of ``mate_sets`` into ``[B, h]``, one tensor per set.

    ``own`` ``[B, 1, h]`` is the entity every set starts with; each set ``[B, M, h]`` holds the same
    ``M`` mate slots embedded its own way; ``present`` ``[B, 1 + M]`` (1 or 0) marks the entities
    there, ``own`` first (always 1). Absent mates neither attend (their keys are masked) nor count
    in the mean. ``h`` must be divisible by ``heads``. The layer norm and projections work on each
    entity alone, so ``own``'s are computed once for every set (the critic's value and baseline
    passes share them): the critic's largest products are these projections, and this spares a
    quarter of them.
    """
    h = int(own.shape[-1])
    if h % heads:
        raise ValueError(f"The attention width {h} must be divisible by its {heads} heads; choose hidden_units "
                         f"as a multiple of {heads}.")
    depth = h // heads
    gain = math.sqrt(0.125 / h)  # ML-Agents' small initial gain for the attention's linears
    mask = (1.0 - present)[:, None, None, :] * MASKED_LOGIT
    weights = present[:, :, None]
    count = tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)
    with tf.variable_scope(name):
        batch = tf.shape(own)[0]

        def projections(entities: tf.Tensor) -> List[tf.Tensor]:
            x = layer_norm(entities, "input_norm")
            return [dense_nd(x, h, part, gain=gain) for part in ("query", "key", "value")]

        def split(t: tf.Tensor) -> tf.Tensor:  # [B, E, h] -> [B, heads, E, depth]
            return tf.transpose(tf.reshape(t, [batch, -1, heads, depth]), [0, 2, 1, 3])

        own_qkv = projections(own)
        pooled = []
        for mates in mate_sets:
            q, k, v = (split(tf.concat([o, m], axis=1)) for o, m in zip(own_qkv, projections(mates)))
            logits = tf.matmul(q, k, transpose_b=True) / math.sqrt(depth) + mask  # [B, heads, E, E]
            attended = tf.matmul(tf.nn.softmax(logits, axis=-1), v)              # [B, heads, E, depth]
            attended = tf.reshape(tf.transpose(attended, [0, 2, 1, 3]), [batch, -1, h])
            entities = tf.concat([own, mates], axis=1)
            out = layer_norm(dense_nd(attended, h, "output", gain=gain) + entities, "output_norm")
            pooled.append(tf.reduce_sum(out * weights, axis=1) / count)
        return pooled


class POCACritic:
    """The critic's placeholders and its ``value`` and ``baseline`` (``[B]``), built once.

    Rows are member-steps: ``own_state`` ``[B, S]`` is the member's observation; ``mate_states``
    ``[B, M, S]`` and ``mate_actions`` ``[B, M, A]`` are its mates' at the same step, padded to
    ``M`` with ``mate_present`` ``[B, M]`` = 0. ``max_members`` is the largest group seen
    (a checkpointed variable raised by ``raise_max_members``, fed through ``members_seen``).
    """

    def __init__(self, state_size: int, action_size: int, h_size: int, num_layers: int, name: str = "poca_critic"):
        self.own_state = tf.placeholder(tf.float32, [None, state_size], name="critic_own_state")
        self.mate_states = tf.placeholder(tf.float32, [None, None, state_size], name="critic_mate_states")
        self.mate_actions = tf.placeholder(tf.float32, [None, None, action_size], name="critic_mate_actions")
        self.mate_present = tf.placeholder(tf.float32, [None, None], name="critic_mate_present")
        variables_before = tf.trainable_variables()
        with tf.variable_scope(name, reuse=tf.AUTO_REUSE):
            self.max_members = tf.get_variable("max_members", [], initializer=tf.ones_initializer(), trainable=False)
            self.members_seen = tf.placeholder(tf.float32, [], name="members_seen")
            self.raise_max_members = tf.assign(self.max_members, tf.maximum(self.max_members, self.members_seen))
            own = dense_nd(self.own_state, h_size, "obs_encoder", tf.nn.relu)[:, None, :]
            mates_seen = dense_nd(self.mate_states, h_size, "obs_encoder", tf.nn.relu)
            mates_acting = dense_nd(tf.concat([self.mate_states, self.mate_actions], axis=-1), h_size,
                                    "obs_action_encoder", tf.nn.relu)
            self.present = tf.concat([tf.ones_like(self.mate_present[:, :1]), self.mate_present], axis=1)
            pooled = residual_self_attention(own, [mates_seen, mates_acting], self.present)
            self.value, self.baseline = (self._head(p, h_size, num_layers) for p in pooled)
        self.variables: List[tf.Variable] = new_trainable_variables(variables_before)

    def _head(self, pooled: tf.Tensor, h_size: int, num_layers: int) -> tf.Tensor:
        hidden = mlp(pooled, h_size, num_layers, "body") if num_layers > 0 else pooled
        members = tf.reduce_sum(self.present, axis=1, keepdims=True)
        count = 2.0 * members / tf.maximum(self.max_members, members) - 1.0
        return dense(tf.concat([hidden, count], axis=1), 1, "value_head", gain=1.0)[:, 0]


__all__ = ["HEADS", "POCACritic", "dense_nd", "layer_norm", "residual_self_attention"]
