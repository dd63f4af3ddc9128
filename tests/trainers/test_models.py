"""Network building blocks: initialisation, encoder shapes, the LSTM unroll, the normaliser,
and every combination of inputs of the PPO model."""
import itertools
from functools import partial

import numpy as np
import pytest

from trainers.models import (
    RunningNormalizer,
    dense,
    fused_lstm,
    loop_gradients,
    lstm,
    training_lstm,
    visual_encoder,
    visual_encoder_min_size,
)
from trainers.ppo.models import create_agent_model
from trainers.sac.models import SACModel
from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException
from unityagents.brain import BrainParameters


def make_brain(state_size=3, state_type=1, action_type=1, action_size=2, memory=0, cameras=()):
    return BrainParameters("TestBrain", {
        "stateSize": state_size, "actionSize": action_size, "memorySize": memory,
        "cameraResolutions": list(cameras), "actionDescriptions": [""] * action_size,
        "actionSpaceType": action_type, "stateSpaceType": state_type,
    })


def test_dense_is_orthogonal_with_gain_and_zero_bias():
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.placeholder(tf.float32, [None, 16])
        dense(x, 16, "layer", gain=2.0)
        sess.run(tf.global_variables_initializer())
        kernel, bias = sess.run(tf.global_variables())
    np.testing.assert_allclose(kernel.T @ kernel, 4.0 * np.eye(16), atol=1e-4)
    np.testing.assert_array_equal(bias, np.zeros(16))


def test_visual_encoder_shapes():
    assert visual_encoder_min_size() == 20
    with tf.Graph().as_default() as graph, tf.Session() as sess:
        image = tf.placeholder(tf.float32, [None, 84, 84, 3])
        features = visual_encoder(image, 32, "enc")
        sess.run(tf.global_variables_initializer())
        assert sess.run(features, {image: np.ones((2, 84, 84, 3))}).shape == (2, 32)
        conv_shapes = [op.outputs[0].shape.as_list() for op in graph.get_operations() if op.type == "Conv2D"]
        assert conv_shapes == [[None, 20, 20, 16], [None, 9, 9, 32]]


def _lstm_graph(masks=False):
    inputs = tf.placeholder(tf.float32, [None, 3])
    memory = tf.placeholder(tf.float32, [None, 8])
    steps = tf.placeholder(tf.int32, [])
    mask = tf.placeholder(tf.float32, [None]) if masks else None
    out, memory_out = lstm(inputs, memory, steps, "lstm", masks=mask)
    return inputs, memory, steps, mask, out, memory_out


def test_lstm_one_step_at_a_time_equals_the_unrolled_sequence():
    rng = np.random.default_rng(0)
    n, t = 2, 5
    x = rng.normal(size=(n, t, 3)).astype(np.float32)
    m0 = rng.normal(size=(n, 8)).astype(np.float32)
    with tf.Graph().as_default(), tf.Session() as sess:
        inputs, memory, steps, _, out, memory_out = _lstm_graph()
        sess.run(tf.global_variables_initializer())
        seq_out, seq_mem = sess.run([out, memory_out], {inputs: x.reshape(n * t, 3), memory: m0, steps: t})
        state, step_outs = m0, []
        for i in range(t):
            o, state = sess.run([out, memory_out], {inputs: x[:, i], memory: state, steps: 1})
            step_outs.append(o)
    np.testing.assert_allclose(seq_out.reshape(n, t, 4), np.stack(step_outs, axis=1), atol=1e-5)
    np.testing.assert_allclose(seq_mem, state, atol=1e-5)


def test_lstm_masked_steps_hold_the_state():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1, 4, 3)).astype(np.float32)
    m0 = rng.normal(size=(1, 8)).astype(np.float32)
    with tf.Graph().as_default(), tf.Session() as sess:
        inputs, memory, steps, mask, out, memory_out = _lstm_graph(masks=True)
        sess.run(tf.global_variables_initializer())
        # Two padding steps (mask 0, as the Buffer pads) then the two real steps.
        padded = sess.run(memory_out, {inputs: x.reshape(4, 3), memory: m0, steps: 4, mask: [0, 0, 1, 1]})
        real = sess.run(memory_out, {inputs: x[0, 2:], memory: m0, steps: 2, mask: [1, 1]})
    np.testing.assert_allclose(padded, real, atol=1e-6)


def test_fused_lstm_without_masks_gives_the_loops_outputs_sequence_by_sequence():
    rng = np.random.default_rng(3)
    n, t = 3, 5
    with tf.Graph().as_default(), tf.Session() as sess:
        inputs, memory, steps, _, out, _ = _lstm_graph()
        fused = fused_lstm(out)
        sess.run(tf.global_variables_initializer())
        x = rng.normal(size=(n * t, 3))
        loop_out, fused_out = sess.run([out, fused], {inputs: x, memory: rng.normal(size=(n, 8)), steps: t})
    assert fused_out.shape == (n * t, 4) and np.abs(fused_out).min() > 0
    np.testing.assert_allclose(fused_out, loop_out, atol=1e-6)


@pytest.mark.parametrize("padding,run", [
    # Sequences of 6 steps left-padded by 0, 2 and 5 steps (the Buffer pads a trajectory's first one), and
    # one right-padded by 2 (recurrent SAC's replay pads a sequence cut by the episode's end).
    ([(0, 0), (2, 0), (5, 0), (0, 2)], 6),
    # Every sequence mostly padding (short episodes): the kernel stops after the batch's last real step.
    ([(4, 0), (5, 0), (0, 4), (0, 5)], 2),
])
def test_fused_lstm_gives_the_loops_outputs_and_gradient_with_the_buffers_padding(padding, run):
    rng = np.random.default_rng(2)
    n, t = 4, 6
    mask = np.ones((n, t), np.float32)
    for row, (before, after) in enumerate(padding):
        mask[row, :before] = 0
        mask[row, t - after:] = 0
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.placeholder(tf.float32, [None, 3])
        memory = tf.placeholder(tf.float32, [None, 8])
        steps = tf.placeholder(tf.int32, [])
        masks = tf.placeholder(tf.float32, [None])
        features = dense(x, 5, "encoder", tf.nn.tanh)  # a variable before the LSTM gets both paths
        out, _ = lstm(features, memory, steps, "lstm", masks=masks)
        head = dense(tf.concat([features, out], axis=1), 2, "head")
        loss = tf.reduce_sum(tf.reduce_sum(tf.square(head), axis=1) * masks)
        variables = tf.trainable_variables()
        fused = fused_lstm(out)
        expected = tf.gradients(loss, variables)
        split = loop_gradients(loss, variables)
        sess.run(tf.global_variables_initializer())
        feed = {x: rng.normal(size=(n * t, 3)), memory: rng.normal(size=(n, 8)), steps: t, masks: mask.reshape(-1)}
        with tf.variable_scope(tf.get_variable_scope(), reuse=True):  # the same variables, as SAC's next states
            training = training_lstm(features, memory, steps, "lstm", masks=masks)
        kernels = [op for op in tf.get_default_graph().get_operations() if op.type == "BlockLSTM"]
        loop_out, fused_out, training_out, expected, split, runs = sess.run(
            [out, fused, training, expected, split, [op.inputs[0] for op in kernels]], feed)
    assert len(runs) == 2 and all(r == run for r in runs), runs
    real = mask.reshape(-1) > 0
    np.testing.assert_allclose(fused_out[real], loop_out[real], atol=1e-6)
    np.testing.assert_array_equal(training_out, fused_out)
    assert not fused_out[~real].any()
    assert len(split) == len(variables) == 6
    for name, want, got in zip([v.name for v in variables], expected, split):
        assert np.abs(want).max() > 0, name
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_a_loss_that_reads_the_fused_twin_gets_the_loops_gradient():
    # Right-padded sequences (recurrent SAC's replay): the twin holds 0 where the loop holds its last state,
    # and the loss weighs those steps 0. loop_gradients splits at the twin as at the loop's outputs.
    rng = np.random.default_rng(5)
    n, t = 3, 5
    mask = np.ones((n, t), np.float32)
    mask[1, 3:] = 0
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.placeholder(tf.float32, [None, 3])
        memory = tf.placeholder(tf.float32, [None, 8])
        steps = tf.placeholder(tf.int32, [])
        masks = tf.placeholder(tf.float32, [None])
        features = dense(x, 5, "encoder", tf.nn.tanh)  # both paths reach it: the head's and the LSTM's
        out, _ = lstm(features, memory, steps, "lstm", masks=masks)
        twin = fused_lstm(out)

        def loss_of(remembered, reuse):
            with tf.variable_scope(tf.get_variable_scope(), reuse=reuse):
                head = dense(tf.concat([features, remembered], axis=1), 2, "head")
            return tf.reduce_sum(tf.reduce_sum(tf.square(head), axis=1) * masks)

        through_loop, through_twin = loss_of(out, False), loss_of(twin, True)
        variables = tf.trainable_variables()
        from_loop = loop_gradients(through_loop, variables)
        from_twin = loop_gradients(through_twin, variables)
        # The twin's loss reaches no loop: the loop's whole Enter/Exit frame stays out of its step.
        reached, stack = set(), [t.op for t in from_twin if t is not None] + [through_twin.op]
        while stack:
            op = stack.pop()
            if op.name not in reached:
                reached.add(op.name)
                stack += [t.op for t in op.inputs] + list(op.control_inputs)
        assert not any("/unroll/" in name for name in reached)
        sess.run(tf.global_variables_initializer())
        feed = {x: rng.normal(size=(n * t, 3)), memory: rng.normal(size=(n, 8)), steps: t, masks: mask.reshape(-1)}
        values = sess.run([through_loop, through_twin, from_loop, from_twin, out, twin], feed)
    real = mask.reshape(-1) > 0
    # Where this CPU's fused kernel gives the loop's values bit for bit on the real steps (TensorFlow's
    # x86 builds do), the split makes the twin's gradient the loop's bit for bit, and so keeps a run's
    # arithmetic; a kernel that rounds otherwise leaves them equal to rounding.
    exact = np.array_equal(values[4][real], values[5][real])
    same = np.testing.assert_array_equal if exact else partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-6)
    same(values[1], values[0])
    assert len(values[2]) == len(variables) == 6
    for name, want, got in zip([v.name for v in variables], values[2], values[3]):
        assert np.abs(want).max() > 0, name
        same(got, want, err_msg=name)


@pytest.mark.parametrize("trainer,action_type", [("ppo", 0), ("sac", 0), ("sac", 1)])
def test_recurrent_updates_take_the_lstm_gradients_from_the_fused_kernels(trainer, action_type):
    brain = make_brain(4, 1, action_type, action_size=3 if action_type == 0 else 2, memory=8)
    with tf.Graph().as_default() as graph:
        if trainer == "ppo":
            step = create_agent_model(brain, h_size=16, use_recurrent=True).update_batch
        else:
            step = SACModel(brain, h_size=16, num_layers=1, normalize=False, streams=["extrinsic"],
                            gammas={"extrinsic": 0.99}, use_dones={"extrinsic": True}, init_entcoef=0.1, tau=0.01,
                            learning_rate=3e-4, use_recurrent=True).train_op
        # The loops an update step runs: every op it reaches through inputs and control dependencies.
        reached, stack = set(), [step]
        while stack:
            op = stack.pop()
            if op.name not in reached:
                reached.add(op.name)
                stack += [t.op for t in op.inputs] + list(op.control_inputs)
        types = [op.type for op in graph.get_operations()]
        loops = [op.name for op in graph.get_operations() if op.type == "LoopCond" and "/unroll/" in op.name]
    # The loops act (and are exported); their gradient loops, which stack every step's intermediates,
    # are never built: each trained LSTM's gradient is one BlockLSTMGrad.
    assert "BlockLSTMGrad" in types and "Enter" in types
    assert not {"StackV2", "StackPushV2", "StackPopV2"} & set(types)
    # SAC's policy on the next states and its target critics run only in the update: no loop at all.
    # (Continuous SAC also runs its critics at the policy's own action, for the value it exports.)
    assert len(loops) == (1 if trainer == "ppo" else 5 if action_type else 3), loops
    # The losses read each LSTM through a fused kernel (the acting loop's twin, SAC's critics outright),
    # so an update step runs no loop at all.
    assert not [name for name in loops if name in reached]
    assert any(name.endswith("BlockLSTMGrad") for name in reached)


@pytest.mark.parametrize("action_type,branches", [(1, None), (0, None), (0, [3, 2]), (1, [3, 2])],
                         ids=["continuous", "discrete", "branches", "hybrid"])
def test_ppo_losses_read_the_fused_twin_with_the_acting_networks_values(action_type, branches):
    # The losses' log-probabilities, entropies and values come from the networks rebuilt over the LSTM's
    # fused twin; fed the acting graph's own (the loop's) as the old ones, every ratio is 1 and the value
    # loss is the plain squared error of the acting value.
    params = {"stateSize": 4, "actionSize": 2 if action_type else 3, "memorySize": 8, "actionSpaceType": action_type,
              "stateSpaceType": 1, "actionDescriptions": [""] * 3}
    if branches:
        params["actionBranches"] = branches
    brain = BrainParameters("TestBrain", params)
    rng = np.random.default_rng(3)
    n, t = 3, 4
    mask = np.ones((n, t), np.float32)
    mask[1, :2] = 0  # the Buffer's left padding
    with tf.Graph().as_default(), tf.Session() as sess:
        model = create_agent_model(brain, h_size=16, use_recurrent=True)
        sess.run(tf.global_variables_initializer())
        rows = n * t
        if brain.is_hybrid:
            taken = np.concatenate([rng.normal(size=(rows, 2)), rng.integers(0, 2, (rows, 2))], axis=1)
        elif action_type:
            taken = rng.normal(size=(rows, 2))
        else:
            taken = rng.integers(0, 2, (rows, 2) if branches else rows)
        feed = {model.batch_size: n, model.sequence_length: t, model.state_in: rng.normal(size=(rows, 4)),
                model.memory_in: rng.normal(size=(n, 8)), model.masks: mask.reshape(-1), model.taken_actions: taken}
        acting = sess.run({"log_prob": model._new_log_prob, "entropy": model.entropy, "value": model.value}, feed)
        returns = rng.normal(size=rows)
        feed.update({model.old_log_probs: acting["log_prob"], model.old_value: acting["value"][:, 0],
                     model.advantages: rng.normal(size=rows), model.returns: returns})
        kl, clipped, entropy, value_loss, trained_rows = sess.run(
            [model.approx_kl, model.clip_fraction, model.mean_entropy, model.value_loss, model._training_rows], feed)
    weights = mask.reshape(-1)
    # The networks after the LSTM run on the real rows alone: the padding's rows never reach them.
    assert len(trained_rows) == int(weights.sum()) < rows
    assert kl == pytest.approx(0.0, abs=1e-6) and clipped == 0.0
    assert entropy == pytest.approx(np.sum(acting["entropy"] * weights) / weights.sum(), rel=1e-5)
    error = np.square(acting["value"][:, 0] - returns)
    assert value_loss == pytest.approx(0.5 * np.sum(error * weights) / weights.sum(), rel=1e-5)


def test_running_normalizer_matches_numpy_and_acts_on_old_statistics():
    rng = np.random.default_rng(2)
    batches = [rng.normal(3.0, 2.0, size=(k, 4)) for k in (12, 1, 7, 30)]
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.placeholder(tf.float32, [None, 4])
        norm = RunningNormalizer(x, initial_count=0.0)
        sess.run(tf.global_variables_initializer())
        first, _ = sess.run([norm.normalized, norm.update], {x: batches[0]})
        np.testing.assert_allclose(first, np.clip(batches[0], -10, 10), rtol=1e-5)  # mean 0, var 1 before
        for batch in batches[1:]:
            sess.run(norm.update, {x: batch})
        mean, variance, count = sess.run([norm.mean, norm.variance, norm.count])
    data = np.concatenate(batches)
    np.testing.assert_allclose(mean, data.mean(axis=0), rtol=1e-4)
    np.testing.assert_allclose(variance, data.var(axis=0), rtol=1e-4)
    assert count == len(data)


@pytest.mark.parametrize("m_size", [0, 7, -2])
def test_bad_memory_size_is_a_clear_error(m_size):
    with tf.Graph().as_default():
        with pytest.raises(UnityTrainerException) as error:
            create_agent_model(make_brain(memory=m_size), use_recurrent=True)
    message = str(error.value)
    assert "TestBrain" in message and f"memorySize is {m_size}" in message and "even" in message


def test_too_small_camera_and_no_input_are_clear_errors():
    with tf.Graph().as_default():
        with pytest.raises(UnityTrainerException, match="16x16 pixels.*at least 20x20"):
            create_agent_model(make_brain(cameras=[{"width": 16, "height": 16, "blackAndWhite": False}]))
        with pytest.raises(UnityTrainerException, match="neither a state"):
            create_agent_model(make_brain(state_size=0))


CAMERA = {"width": 24, "height": 20, "blackAndWhite": False}
BW_CAMERA = {"width": 20, "height": 22, "blackAndWhite": True}
COMBINATIONS = [
    # (state size, state type, cameras, recurrent, action type)
    (s, st, cams, rec, act)
    for (s, st), cams, rec, act in itertools.product(
        [(0, 1), (5, 1), (6, 0)], [(), (CAMERA,), (CAMERA, BW_CAMERA)], [False, True], [0, 1]
    )
    if s or cams
]


@pytest.mark.slow
@pytest.mark.parametrize("state_size, state_type, cameras, recurrent, action_type", COMBINATIONS)
def test_every_input_combination_builds_runs_and_trains(state_size, state_type, cameras, recurrent, action_type):
    _build_run_and_train(state_size, state_type, cameras, recurrent, action_type)


@pytest.mark.parametrize("recurrent", [False, True])
def test_visual_vector_combination_builds_runs_and_trains(recurrent):
    _build_run_and_train(5, 1, (CAMERA, BW_CAMERA), recurrent, 1)


def _build_run_and_train(state_size, state_type, cameras, recurrent, action_type):
    brain = make_brain(state_size, state_type, action_type, action_size=3, memory=6 if recurrent else 0,
                       cameras=cameras)
    n, t = 4, 3 if recurrent else 1
    rng = np.random.default_rng(0)
    with tf.Graph().as_default(), tf.Session() as sess:
        model = create_agent_model(brain, h_size=16, use_recurrent=recurrent, normalize=True)
        sess.run(tf.global_variables_initializer())
        feed = {model.batch_size: n, model.sequence_length: t}
        if model.state_in is not None:
            feed[model.state_in] = (rng.normal(size=(n * t, state_size)) if state_type
                                    else rng.integers(0, state_size, size=(n * t, 1)))
        for placeholder in model.observation_in:
            feed[placeholder] = rng.uniform(size=[n * t] + placeholder.shape.as_list()[1:])
        if recurrent:
            feed[model.memory_in] = np.zeros((n, 6))
        fetches = [model.output, model.probs, model.value, model.entropy] + ([model.memory_out] if recurrent else [])
        action, probs, value, entropy, *memory = sess.run(fetches, feed)
        assert action.shape == ((n * t, 3) if action_type else (n * t, 1))
        assert value.shape == (n * t, 1) and entropy.shape == (n * t,)
        if recurrent:
            assert memory[0].shape == (n, 6)
        log_prob = sess.run(model.log_prob, feed)
        feed.update({
            model.taken_actions: action if action_type else action[:, 0],
            model.old_log_probs: log_prob, model.old_value: value[:, 0],
            model.advantages: rng.normal(size=n * t), model.returns: rng.normal(size=n * t),
        })
        loss_before, _ = sess.run([model.loss, model.update_batch], feed)
        assert np.isfinite(loss_before)
