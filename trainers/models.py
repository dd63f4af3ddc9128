"""Network building blocks, written with ``tf.get_variable`` so that they need no Keras.

Every block creates its variables under ``tf.variable_scope(name)`` inside whatever scope the
caller is in, so a brain built under ``variable_scope(graph_scope)`` owns all its variables and a
second brain (or a ghost copy) never collides with it.

Choices that matter for training (as in today's PPO implementations):

* orthogonal kernels with a gain and zero biases (``dense``, ``conv2d``): hidden layers use
  ``sqrt(2)``, the policy head ``0.01`` (near-uniform first policy), the value head ``1``;
* the LSTM is unrolled by a v1 ``tf.while_loop`` whose trip count is the ``sequence_length``
  placeholder, so one graph serves training (sequences of 32) and inference (``sequence_length``
  fed as 1 by Unity's Internal brain), and the frozen graph holds only op types a TensorFlow
  1.x-era runtime knows (``Enter``/``Exit``/``Merge``/``Switch``/``NextIteration``, TensorArrayV3);
* the update never runs that loop: its losses read the loop's fused twin, one ``BlockLSTM`` kernel
  over the same variables with the same values (``fused_lstm``), and take the gradient from it
  (``loop_gradients``); networks that only the update runs use that kernel outright
  (``training_lstm``). The loop costs a few dozen small ops per step forward and a few hundred
  for its own gradient;
* the observation normaliser keeps exact running statistics (Chan et al.'s parallel combination
  of mean, variance and count), updated by an op built once, not per-step batch means.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from trainers.tf_utils import tf

Activation = Optional[Callable[["tf.Tensor"], "tf.Tensor"]]

#: gain for hidden layers followed by tanh/ReLU (Saxe et al.; the baselines/CleanRL default).
HIDDEN_GAIN = math.sqrt(2.0)


def dense(
    x: tf.Tensor,
    units: int,
    name: str,
    activation: Activation = None,
    gain: float = HIDDEN_GAIN,
) -> tf.Tensor:
    """``activation(x @ W + b)`` with ``W`` orthogonal (scaled by ``gain``) and ``b = 0``."""
    in_size = int(x.shape[-1])
    with tf.variable_scope(name):
        kernel = tf.get_variable("kernel", [in_size, units], initializer=tf.orthogonal_initializer(gain))
        bias = tf.get_variable("bias", [units], initializer=tf.zeros_initializer())
    y = tf.nn.bias_add(tf.matmul(x, kernel), bias)
    return activation(y) if activation is not None else y


def relu(x: tf.Tensor) -> tf.Tensor:
    """``tf.nn.relu``, named here so that a default argument does not import TensorFlow."""
    return tf.nn.relu(x)


def tanh(x: tf.Tensor) -> tf.Tensor:
    """``tf.nn.tanh``, named here so that a default argument does not import TensorFlow."""
    return tf.nn.tanh(x)


def swish(x: tf.Tensor) -> tf.Tensor:
    """``x * sigmoid(x)`` after a dense layer, written ``x * (0.5 tanh(x / 2) + 0.5)``: the same
    function, in plain Tanh, Mul and Add ops that every loader of a frozen graph or ONNX file takes.
    Written with ``Sigmoid``, TensorFlow's graph optimizer fuses MatMul, BiasAdd and the swish into
    one oneDNN kernel that costs several times the layer's time on CPU (5-10x for a decision's
    handful of rows, 2x at 256); with ``tanh`` it does not, and the gradient stays finite for every
    ``x`` (``x / (1 + exp(-x))``'s does not). After a convolution the fused kernel is not slower."""
    return x * (0.5 * tf.tanh(0.5 * x) + 0.5)


def conv2d(
    x: tf.Tensor,
    filters: int,
    kernel_size: int,
    stride: int,
    name: str,
    activation: Activation = relu,
    gain: float = HIDDEN_GAIN,
) -> tf.Tensor:
    """A VALID-padded NHWC convolution with an orthogonal kernel and zero bias."""
    in_channels = int(x.shape[-1])
    with tf.variable_scope(name):
        kernel = tf.get_variable(
            "kernel", [kernel_size, kernel_size, in_channels, filters], initializer=tf.orthogonal_initializer(gain)
        )
        bias = tf.get_variable("bias", [filters], initializer=tf.zeros_initializer())
    y = tf.nn.bias_add(tf.nn.conv2d(x, kernel, strides=[1, stride, stride, 1], padding="VALID"), bias)
    return activation(y) if activation is not None else y


def flatten(x: tf.Tensor) -> tf.Tensor:
    """``[N, d1, d2, ...] -> [N, d1*d2*...]``; the trailing dimensions must be known."""
    size = int(np.prod(x.shape.as_list()[1:]))
    return tf.reshape(x, [-1, size])


def mlp(x: tf.Tensor, h_size: int, num_layers: int, name: str, activation: Activation = tanh) -> tf.Tensor:
    """``num_layers`` dense layers of ``h_size`` units (``x`` itself when ``num_layers`` is 0)."""
    with tf.variable_scope(name):
        for i in range(num_layers):
            x = dense(x, h_size, f"dense_{i}", activation)
    return x


#: (filters, kernel, stride) of the two convolutions: the small encoder of the original trainer.
VISUAL_ENCODER_CONVS = ((16, 8, 4), (32, 4, 2))


def visual_encoder_min_size() -> int:
    """The smallest height/width the VALID convolutions of the visual encoder accept."""
    size = 1
    for _, kernel, stride in reversed(VISUAL_ENCODER_CONVS):
        size = (size - 1) * stride + kernel
    return size


def visual_encoder(image: tf.Tensor, h_size: int, name: str, activation: Activation = relu) -> tf.Tensor:
    """Camera frame ``[N, H, W, C]`` in 0..1 -> ``[N, h_size]``: conv 16x8x8/4, conv 32x4x4/2, dense."""
    with tf.variable_scope(name):
        x = image
        for i, (filters, kernel, stride) in enumerate(VISUAL_ENCODER_CONVS):
            x = conv2d(x, filters, kernel, stride, f"conv_{i}", activation)
        return dense(flatten(x), h_size, "dense", activation)


def _lstm_variables(inputs: tf.Tensor, memory_in: tf.Tensor, name: str) -> Tuple[int, int, tf.Variable, tf.Variable]:
    """``units``, the input width, and the ``name/kernel`` (``i, j, f, o`` gates of ``[in + units, 4 * units]``)
    and ``name/bias`` that ``lstm`` and ``training_lstm`` share, created or reused by the variable scope."""
    units = int(memory_in.shape[-1]) // 2
    in_size = int(inputs.shape[-1])
    with tf.variable_scope(name):
        kernel = tf.get_variable("kernel", [in_size + units, 4 * units], initializer=tf.orthogonal_initializer(1.0))
        bias = tf.get_variable("bias", [4 * units], initializer=tf.zeros_initializer())
    return units, in_size, kernel, bias


def lstm(
    inputs: tf.Tensor,
    memory_in: tf.Tensor,
    sequence_length: tf.Tensor,
    name: str,
    masks: Optional[tf.Tensor] = None,
    forget_bias: float = 1.0,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Run an LSTM over ``[N*T, d]`` inputs laid out as N sequences of T = ``sequence_length`` steps.

    :param memory_in: ``[N, 2*units]``, the state at the start of each sequence: ``c`` then ``h``
        (the layout of the original's ``recurrent_in``, which Unity stores as the agent's memory).
    :param sequence_length: int32 scalar T; the loop runs T iterations, so the same graph serves
        training sequences and single inference steps.
    :param masks: optional ``[N*T]`` floats; a step with mask 0 leaves the state unchanged. The
        Buffer left-pads the first sequence of a trajectory with zeros, so holding the state over
        that padding makes the sequence's stored start memory reach its first real step intact.
    :return: ``(outputs [N*T, units], memory_out [N, 2*units])``.
    """
    units, in_size, kernel, bias = _lstm_variables(inputs, memory_in, name)
    with tf.name_scope(name):
        steps = tf.reshape(sequence_length, [])
        time_major = tf.transpose(tf.reshape(inputs, tf.stack([-1, steps, in_size])), [1, 0, 2])
        inputs_ta = tf.TensorArray(tf.float32, size=steps, name="inputs").unstack(time_major)
        if masks is not None:
            masks_tm = tf.transpose(tf.reshape(masks, tf.stack([-1, steps, 1])), [1, 0, 2])
            masks_ta = tf.TensorArray(tf.float32, size=steps, name="masks").unstack(masks_tm)
        outputs_ta = tf.TensorArray(tf.float32, size=steps, name="outputs")

        def body(t, c, h, outputs):
            gates = tf.nn.bias_add(tf.matmul(tf.concat([inputs_ta.read(t), h], axis=1), kernel), bias)
            i, j, f, o = tf.split(gates, 4, axis=1)
            new_c = c * tf.sigmoid(f + forget_bias) + tf.sigmoid(i) * tf.tanh(j)
            new_h = tf.tanh(new_c) * tf.sigmoid(o)
            if masks is not None:
                keep = masks_ta.read(t)
                new_c = keep * new_c + (1.0 - keep) * c
                new_h = keep * new_h + (1.0 - keep) * h
            return t + 1, new_c, new_h, outputs.write(t, new_h)

        _, c_out, h_out, outputs_ta = tf.while_loop(
            lambda t, *_: t < steps,
            body,
            [tf.constant(0), memory_in[:, :units], memory_in[:, units:], outputs_ta],
            name="unroll",
        )
        outputs = tf.reshape(tf.transpose(outputs_ta.stack(), [1, 0, 2]), [-1, units])
        _loops(outputs.graph).append(
            _Loop(inputs, memory_in, sequence_length, masks, kernel, bias, forget_bias, outputs))
        return outputs, tf.concat([c_out, h_out], axis=1)


@dataclasses.dataclass
class _Loop:
    """One ``lstm`` as built: what its fused twin needs, and the twin once built."""
    inputs: tf.Tensor
    memory_in: tf.Tensor
    sequence_length: tf.Tensor
    masks: Optional[tf.Tensor]
    kernel: tf.Variable
    bias: tf.Variable
    forget_bias: float
    outputs: tf.Tensor
    fused: Optional[tf.Tensor] = None


def _loops(graph: tf.Graph) -> List[_Loop]:
    """Every ``lstm`` of ``graph``, in the order built (``loop_gradients`` splits its gradient at them).

    Kept on the graph itself, so the list goes when the graph does.
    """
    loops = getattr(graph, "_trainers_lstm_loops", None)
    if loops is None:
        loops = []
        graph._trainers_lstm_loops = loops
    return loops


def fused_lstm(outputs: tf.Tensor) -> tf.Tensor:
    """The outputs of the ``lstm`` that returned ``outputs``, on its real steps, from one fused ``BlockLSTM``.

    What this is for: the update. ``lstm``'s ``while_loop`` stays the graph that acts and is
    exported, but it runs a few dozen small ops per step, and its gradient is a second loop that
    pushes and pops every intermediate of every step, a few hundred more; on an update's short,
    narrow batches (Hallway: 2 sequences of 64 steps) the executor's cost per op is most of a
    minibatch step. A model's losses read this twin in place of the loop's outputs (the same
    values on the real steps), so the update runs the kernel forward and ``BlockLSTMGrad``
    backward and no loop; ``loop_gradients`` splits the gradient at the twin.
    ``BlockLSTM``/``BlockLSTMGrad`` run the whole sequence in one kernel each over the same
    variables, with the same gate layout (``i, j, f, o`` of one ``[in + units, 4 * units]`` kernel,
    ``forget_bias`` added to ``f``), so ``loop_gradients`` takes the gradient through here.

    ``BlockLSTM`` cannot hold its state over a step, so each sequence is first rotated to start at
    its first real step (the Buffer's padding is a prefix: those steps move to the end, after every
    real one) and rotated back after. The kernel runs only as far as the batch's last real step
    (``seq_len_max``): short episodes' sequences, mostly padding, cost their real steps, and the
    steps it skips are ones whose outputs are masked, so the values and gradient are the same to the
    bit. A padded step's output is multiplied by its mask, so nothing flows back through it. In
    ``lstm`` nothing flows from a prefix of padding into a variable either (the state held there is
    ``memory_in``); padding after the real steps (recurrent SAC's) holds the last real state, whose
    gradient from padded steps is dropped here: the losses weigh padded steps 0. Built once per
    loop, beside it.

    :return: ``[N*T, units]``: the loop's outputs on every real step; the padded steps hold 0.
    """
    loop = next((loop for loop in _loops(outputs.graph) if loop.outputs is outputs), None)
    if loop is None:
        raise ValueError(f"{outputs.name} is not the outputs of a trainers.models.lstm; pass the first tensor "
                         "that lstm returned.")
    if loop.fused is not None:
        return loop.fused
    with tf.name_scope(loop.outputs.op.name.rsplit("/", 1)[0] + "_fused/"):
        loop.fused = _block_lstm(loop.inputs, loop.memory_in, loop.sequence_length, loop.masks, loop.kernel,
                                 loop.bias, loop.forget_bias)
    return loop.fused


def _block_lstm(inputs: tf.Tensor, memory_in: tf.Tensor, sequence_length: tf.Tensor, masks: Optional[tf.Tensor],
                kernel: tf.Variable, bias: tf.Variable, forget_bias: float) -> tf.Tensor:
    """``fused_lstm``'s arithmetic: rotate each sequence to its first real step, one ``BlockLSTM``, rotate back.

    The kernel wants its steps time-major (``[T, N, d]``) while the rows come sequence after
    sequence; one gather of the rows in the kernel's order does the rotation and the transposition
    at once, and one gather takes the outputs back (each row is read once, so the gradient, a
    scatter-add of single rows, is exact).
    """
    units = int(memory_in.shape[-1]) // 2
    steps = tf.reshape(sequence_length, [])
    count = tf.shape(inputs)[0] // steps
    sequence = tf.range(count)
    step = tf.range(steps)[:, None]  # [T, 1]: the kernel's step t reads step t of each sequence
    run = steps
    if masks is not None:
        first = tf.argmax(tf.cast(tf.reshape(masks, tf.stack([count, steps])) > 0, tf.int32), axis=1,
                          output_type=tf.int32)
        step = tf.math.floormod(step + first[None, :], steps)  # [T, N]: from the sequence's first real step
    rows = sequence[None, :] * steps + step  # [T, N]: the input row of each kernel step
    if masks is not None:
        # After the rotation each sequence's real steps come first; the kernel stops after the
        # batch's last real step and gives 0 past it, where every output is masked anyway.
        real = tf.cast(tf.gather(masks, rows) > 0, tf.int32)
        last = steps - tf.argmax(tf.reverse(real, [0]), axis=0, output_type=tf.int32)
        run = tf.minimum(tf.reduce_max(tf.concat([last, [1]], 0)), steps)
    zeros = tf.zeros([units])
    h = tf.raw_ops.BlockLSTM(
        seq_len_max=tf.cast(run, tf.int64), x=tf.gather(inputs, rows),
        cs_prev=memory_in[:, :units], h_prev=memory_in[:, units:], w=kernel, wci=zeros, wcf=zeros,
        wco=zeros, b=bias, forget_bias=forget_bias, cell_clip=-1.0, use_peephole=False).h
    # Output row (s, u) is the kernel's step u - first[s] (mod T) of sequence s: row t * N + s of h.
    back = tf.range(steps)[None, :]
    if masks is not None:
        back = tf.math.floormod(back - first[:, None], steps)
    h = tf.gather(tf.reshape(h, [-1, units]), tf.reshape(back * count + sequence[:, None], [-1]))
    return h * masks[:, None] if masks is not None else h


def training_lstm(
    inputs: tf.Tensor,
    memory_in: tf.Tensor,
    sequence_length: tf.Tensor,
    name: str,
    masks: Optional[tf.Tensor] = None,
    forget_bias: float = 1.0,
) -> tf.Tensor:
    """``lstm``'s outputs on the real steps (0 on padded ones) from one ``BlockLSTM``, for a network
    that never acts.

    The same variables as ``lstm`` (``name/kernel``, ``name/bias``, created or reused the same way)
    and its arithmetic on every real step, in one kernel instead of a loop of a few dozen ops per
    step; no final memory. For what only the update runs (SAC's target critics and its policy on the
    next states): ``BlockLSTM`` has no TensorFlow 1.x or ONNX counterpart, so a network that acts or
    is exported keeps ``lstm``. The losses must weigh padded steps 0, as for ``fused_lstm``.
    """
    _, _, kernel, bias = _lstm_variables(inputs, memory_in, name)
    with tf.name_scope(name):
        return _block_lstm(inputs, memory_in, sequence_length, masks, kernel, bias, forget_bias)


def loop_gradients(loss: tf.Tensor, variables: Sequence[tf.Variable]) -> List[Optional[tf.Tensor]]:
    """``tf.gradients(loss, variables)``, with the part through each ``lstm`` taken by its ``fused_lstm``.

    The chain rule, split at the loops' outputs: the gradient of ``loss`` to the variables with
    every loop's outputs held constant, plus the gradient of each loop's fused twin (the same
    values, one kernel) weighted by ``d loss / d outputs``. The loops run forward only; their
    gradient loops are never built. A loss that reads a twin itself (``fused_lstm``: then no loop
    runs) is split at the twin in the same way, so it gets the same arithmetic as one that reads
    the loop. The sum is the same gradient up to float rounding (the kernel
    adds in another order than the loop), and the same as ``tf.gradients`` in a graph without
    ``lstm``. A gradient through a loop's final memory, which no loss here reads, would still go
    through the loop.
    """
    variables = list(variables)
    loops = list(_loops(loss.graph))
    # Each loop's outputs, and its fused twin where one is built (a loss may read the twin itself).
    points = [(loop, loop.outputs) for loop in loops] + [(loop, loop.fused) for loop in loops
                                                         if loop.fused is not None]
    outputs = [point for _, point in points]
    gradients = tf.gradients(loss, variables + outputs, stop_gradients=outputs)
    direct, cotangents = gradients[:len(variables)], gradients[len(variables):]
    used = [(fused_lstm(loop.outputs), cotangent) for (loop, _), cotangent in zip(points, cotangents)
            if cotangent is not None]
    if not used:
        return direct
    through = tf.gradients([fused for fused, _ in used], variables, grad_ys=[cotangent for _, cotangent in used])
    return [a if b is None else b if a is None else a + b for a, b in zip(direct, through)]


class RunningNormalizer:
    """Normalises ``x`` by running statistics of everything ``update`` has seen.

    ``normalized = clip((x - mean) / sqrt(var + 1e-8), -clip, clip)``. Running ``update`` (built
    once, here) folds the batch currently fed to ``x`` into the statistics with the exact parallel
    mean/variance combination, so 12 agents x 1 step and 1 agent x 12 steps give the same result.
    The statistics are non-trainable variables, so checkpoints (and ``--load``) carry them.

    The update runs after ``normalized`` has been computed (a control dependency), so the action
    chosen in the same ``sess.run`` sees the statistics from before the update, deterministically.
    With ``with_scaled``, ``scaled = x / sqrt(var + 1e-8)`` (not centred, not clipped) is built too,
    and computed before the update in the same way.
    """

    def __init__(self, x: tf.Tensor, name: str = "normalizer", clip: float = 10.0, initial_count: float = 1e-4,
                 with_scaled: bool = False):
        size = int(x.shape[-1])
        self.clip = clip
        with tf.variable_scope(name):
            self.mean = tf.get_variable("running_mean", [size], initializer=tf.zeros_initializer(), trainable=False)
            self.variance = tf.get_variable(
                "running_variance", [size], initializer=tf.ones_initializer(), trainable=False
            )
            self.count = tf.get_variable(
                "normalization_steps", [], initializer=tf.constant_initializer(initial_count), trainable=False
            )
        with tf.name_scope(name):
            scaled = (x - self.mean) / tf.sqrt(self.variance + 1e-8)
            self.normalized = tf.maximum(tf.minimum(scaled, clip), -clip, name="normalized_state")
            self.scaled = x / tf.sqrt(self.variance + 1e-8) if with_scaled else None

            batch_mean, batch_variance = tf.nn.moments(x, axes=[0])
            batch_count = tf.cast(tf.shape(x)[0], tf.float32)
            total = self.count + batch_count
            delta = batch_mean - self.mean
            new_mean = self.mean + delta * batch_count / total
            new_m2 = (
                self.variance * self.count + batch_variance * batch_count
                + tf.square(delta) * self.count * batch_count / total
            )
            new_variance = new_m2 / total
            # Every read of the old statistics (and the normalised input) happens before any write.
            reads = [self.normalized, new_mean, new_variance, total] + ([self.scaled] if with_scaled else [])
            with tf.control_dependencies(reads):
                self.update = tf.group(
                    tf.assign(self.mean, new_mean),
                    tf.assign(self.variance, new_variance),
                    tf.assign(self.count, total),
                    name="update_normalization",
                )


    def apply(self, x: tf.Tensor) -> tf.Tensor:
        """Another tensor of the same width normalised by these statistics (not folded into them)."""
        scaled = (x - self.mean) / tf.sqrt(self.variance + 1e-8)
        return tf.clip_by_value(scaled, -self.clip, self.clip)


def new_trainable_variables(before: List[tf.Variable]) -> List[tf.Variable]:
    """The trainable variables of the default graph that are not in ``before``, in creation order."""
    known = {id(v) for v in before}
    return [v for v in tf.trainable_variables() if id(v) not in known]
