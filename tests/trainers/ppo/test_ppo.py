"""PPO: the seed's model tests, the export contract, GAE, the loss on hand-built batches, and the
trainer driven by the controller's loop over the fake environment (``tests.fake_env``)."""
import numpy as np
import pytest

from tests.fake_env import FakeEnv, Loop, collector_of, end_episodes
from trainers.ppo.models import create_agent_model
from trainers.ppo.trainer import PPOTrainer
from trainers.returns import discount_rewards, get_gae
from trainers.tf_utils import tf
from trainers.trainer.base import Param
from unityagents.brain import BrainParameters


def seed_brain(action_type, cameras=()):
    """The seed's RealFakeBrain: state cont 3, action 2 (cont 1 / disc 0)."""
    return BrainParameters("RealFakeBrain", {
        "stateSize": 3, "actionSize": 2, "memorySize": 0, "cameraResolutions": list(cameras),
        "actionDescriptions": ["", ""], "actionSpaceType": action_type, "stateSpaceType": 1,
    })


# ---------------------------------------------------------------- the seed's model tests
def test_ppo_model_continuous():
    with tf.Graph().as_default(), tf.Session() as sess:
        with tf.variable_scope("FakeGraphScope"):
            model = create_agent_model(seed_brain(1))
            sess.run(tf.global_variables_initializer())
            run_list = [model.output, model.probs, model.value, model.entropy, model.learning_rate]
            feed_dict = {model.batch_size: 2, model.sequence_length: 1,
                         model.state_in: np.array([[1, 2, 3], [3, 4, 5]]), model.epsilon: np.random.randn(2, 2)}
            action, probs, value, entropy, lr = sess.run(run_list, feed_dict=feed_dict)
    assert action.shape == (2, 2) and probs.shape == (2, 2) and value.shape == (2, 1)
    assert entropy.shape == (2,) and lr == pytest.approx(1e-4)


def test_ppo_model_discrete():
    with tf.Graph().as_default(), tf.Session() as sess:
        with tf.variable_scope("FakeGraphScope"):
            model = create_agent_model(seed_brain(0, [{"width": 30, "height": 40, "blackAndWhite": False}]))
            sess.run(tf.global_variables_initializer())
            run_list = [model.output, model.probs, model.value, model.entropy, model.learning_rate]
            feed_dict = {model.batch_size: 2, model.sequence_length: 1,
                         model.state_in: np.array([[1, 2, 3], [3, 4, 5]]),
                         model.observation_in[0]: np.ones([2, 40, 30, 3])}
            action, probs, value, entropy, lr = sess.run(run_list, feed_dict=feed_dict)
    assert action.shape == (2, 1) and set(action[:, 0]) <= {0, 1}
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert value.shape == (2, 1) and entropy.shape == (2,)


# ---------------------------------------------------------------- export contract
@pytest.mark.parametrize("action_type, state_type", [(1, 1), (0, 0)])
def test_export_contract_names_and_dtypes(action_type, state_type):
    brain = BrainParameters("B", {"stateSize": 4, "actionSize": 3, "memorySize": 8, "actionSpaceType": action_type,
                                  "stateSpaceType": state_type,
                                  "cameraResolutions": [{"width": 20, "height": 20, "blackAndWhite": True}] * 2})
    with tf.Graph().as_default() as graph, tf.variable_scope("Scope"):
        create_agent_model(brain, use_recurrent=True)

    def node(name):
        return graph.get_tensor_by_name(f"Scope/{name}:0")

    float_state = [tf.float32, [None, 4]]
    int_state = [tf.int32, [None, 1]]
    assert [node("state").dtype, node("state").shape.as_list()] == (float_state if state_type else int_state)
    for k in range(2):
        assert node(f"observation_{k}").dtype == tf.float32
        assert node(f"observation_{k}").shape.as_list() == [None, 20, 20, 1]
    assert node("batch_size").dtype == tf.int32 and node("sequence_length").dtype == tf.int32
    assert node("recurrent_in").shape.as_list() == [None, 8] and node("recurrent_out").shape.as_list() == [None, 8]
    assert node("value_estimate").shape.as_list() == [None, 1]
    assert node("action_probs").shape.as_list() == [None, 3]
    if action_type:
        assert node("action").dtype == tf.float32 and node("action").shape.as_list() == [None, 3]
        assert node("epsilon").op.type == "PlaceholderWithDefault"
    else:
        assert node("action").dtype == tf.int64 and node("action").shape.as_list() == [None, 1]


def test_epsilon_defaults_to_zero_and_broadcasts():
    with tf.Graph().as_default(), tf.Session() as sess:
        model = create_agent_model(seed_brain(1))
        sess.run(tf.global_variables_initializer())
        feed = {model.state_in: np.array([[1, 2, 3], [3, 4, 5]])}
        mean = sess.run(model.mu, feed)
        np.testing.assert_array_equal(sess.run(model.output, feed), mean)  # not fed: zeros
        np.testing.assert_array_equal(sess.run(model.output, {**feed, model.epsilon: [0.0]}), mean)  # Unity's [0]
        noise = np.array([[1.0, -1.0], [0.5, 2.0]])
        np.testing.assert_allclose(sess.run(model.output, {**feed, model.epsilon: noise}), mean + noise, rtol=1e-5)


# ---------------------------------------------------------------- returns and GAE
def test_discount_rewards_by_hand():
    np.testing.assert_allclose(discount_rewards([1, 2, 3], gamma=0.5), [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3])
    np.testing.assert_allclose(discount_rewards([1, 2], gamma=0.5, value_next=4), [1 + 1 + 1, 2 + 2])
    # A done at step 0 stops step 1's reward and the bootstrap from flowing back into it.
    np.testing.assert_allclose(discount_rewards([1, 2], gamma=0.5, value_next=4, dones=[True, False]), [1, 4])


def test_gae_by_hand():
    r, v, gamma, lam = [1.0, 0.0, 2.0], [0.5, 1.0, 1.5], 0.9, 0.8
    # deltas with bootstrap V_3 = 2: 1+0.9*1-0.5 = 1.4; 0+0.9*1.5-1 = 0.35; 2+0.9*2-1.5 = 2.3
    d = [1.4, 0.35, 2.3]
    expected = [d[0] + 0.72 * d[1] + 0.72 ** 2 * d[2], d[1] + 0.72 * d[2], d[2]]
    advantages = get_gae(r, v, value_next=2.0, gamma=gamma, lambd=lam)
    np.testing.assert_allclose(advantages, expected)
    np.testing.assert_allclose(advantages + np.array(v), [3.34432, 3.006, 3.8])  # the returns
    # lambda = 1: advantages + values are the plain discounted returns.
    np.testing.assert_allclose(get_gae(r, v, 2.0, gamma, 1.0) + v, discount_rewards(r, gamma, 2.0))
    # A done at step 1: V_2 does not bootstrap step 1, and step 2's delta does not flow back.
    # deltas: 1+0.9*1-0.5 = 1.4; 0+0-1 = -1; 2.3 as before
    done = get_gae(r, v, 2.0, gamma, lam, dones=[False, True, False])
    np.testing.assert_allclose(done, [1.4 + 0.72 * -1.0, -1.0, 2.3])
    np.testing.assert_allclose(get_gae(r, v, 0.0, gamma, lam)[-1], 2.0 - 1.5)  # terminal: no bootstrap


# ---------------------------------------------------------------- the loss on hand-built batches
def _loss_fixture(clip_value=True):
    model = create_agent_model(seed_brain(1), clip_value=clip_value, epsilon=0.2)
    states = np.array([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0], [-1.0, 0.0, 1.0]])
    return model, states


@pytest.mark.parametrize("action_type", [0, 1])
def test_first_minibatch_has_ratio_one(action_type):
    with tf.Graph().as_default(), tf.Session() as sess:
        model = create_agent_model(seed_brain(action_type))
        sess.run(tf.global_variables_initializer())
        states = np.random.default_rng(0).normal(size=(5, 3))
        feed = {model.state_in: states}
        if action_type:
            feed[model.epsilon] = np.random.default_rng(1).normal(size=(5, 2))
        action, log_prob, value = sess.run([model.output, model.log_prob, model.value], feed)
        loss_feed = {model.state_in: states, model.taken_actions: action if action_type else action[:, 0],
                     model.old_log_probs: log_prob, model.old_value: value[:, 0],
                     model.advantages: [1.0, -2.0, 0.5, 3.0, 0.0], model.returns: [0.0] * 5}
        policy_loss, kl, clip_fraction = sess.run([model.policy_loss, model.approx_kl, model.clip_fraction], loss_feed)
    # ratio 1 -> the loss is -mean(normalised advantages) = 0
    assert policy_loss == pytest.approx(0.0, abs=1e-6)
    assert kl == pytest.approx(0.0, abs=1e-6) and clip_fraction == 0.0


@pytest.mark.parametrize("clip_value, expected", [(True, 0.5 * 1.8 ** 2), (False, 0.5 * 1.0)])
def test_value_loss_clipped_around_old_prediction(clip_value, expected):
    with tf.Graph().as_default(), tf.Session() as sess:
        model, states = _loss_fixture(clip_value)
        sess.run(tf.global_variables_initializer())
        value = sess.run(model.value, {model.state_in: states})[:, 0]
        # New value moved +1.0 from the old one (beyond the clip 0.2); the target is another +1.0 away.
        # unclipped error: 1.0^2; clipped prediction old+0.2 = value-0.8, error 1.8^2; the max is taken.
        feed = {model.state_in: states, model.old_value: value - 1.0, model.returns: value + 1.0}
        assert sess.run(model.value_loss, feed) == pytest.approx(expected, rel=1e-4)


def test_masked_steps_do_not_count():
    with tf.Graph().as_default(), tf.Session() as sess:
        model, states = _loss_fixture(clip_value=False)
        sess.run(tf.global_variables_initializer())
        value = sess.run(model.value, {model.state_in: states})[:, 0]
        feed = {model.state_in: states, model.old_value: value, model.returns: value + [1.0, 1.0, 100.0],
                model.masks: [1.0, 1.0, 0.0]}
        assert sess.run(model.value_loss, feed) == pytest.approx(0.5, rel=1e-4)


# ---------------------------------------------------------------- the trainer on the fake environment
def make_trainer(brain, **overrides):
    params = {"graph_scope": "", "summary_path": "", "batch_size": 8, "buffer_size": 48, "time_horizon": 5,
              "sequence_length": 4, "hidden_units": 16, "max_steps": 1000, "num_epoch": 2, **overrides}
    sess = tf.Session(graph=tf.Graph())
    trainer = PPOTrainer(sess, {brain.brain_name: brain}, brain.brain_name, params, training=True)
    with sess.graph.as_default():
        sess.run(tf.global_variables_initializer())
    sess.graph.finalize()  # as the controller does: any op created from now on fails
    return trainer


def first_minibatch_kl(trainer):
    arrays = trainer.update_arrays()
    feed = trainer.minibatch_feed(arrays, np.arange(len(arrays["actions"])), trainer.current_learning_rate())
    return trainer.sess.run([trainer.model.approx_kl, trainer.model.clip_fraction, trainer.model.policy_loss], feed)


BRAINS = {
    "continuous": dict(stateSize=4, actionSize=2, actionSpaceType=1, stateSpaceType=1),
    "discrete": dict(stateSize=5, actionSize=3, actionSpaceType=0, stateSpaceType=0),
    "recurrent": dict(stateSize=4, actionSize=2, actionSpaceType=1, stateSpaceType=1, memorySize=6),
    "recurrent-visual-discrete": dict(stateSize=2, actionSize=2, actionSpaceType=0, stateSpaceType=1, memorySize=4,
                                      cameraResolutions=[{"width": 20, "height": 20, "blackAndWhite": True}]),
}


def test_a_steps_experience_waits_only_where_it_cannot_reach_the_next_action(monkeypatch):
    """``experience_can_wait``: not when the steps it may hand over could fill the update buffer (48
    here), reach a summary or ``max_steps``, nor when acting moves what its bootstrap values read
    (a normaliser, when the step may bootstrap; memories, always)."""
    brain = BrainParameters("FakeBrain", BRAINS["discrete"])
    trainer = make_trainer(brain, normalize=False, summary_freq=100, max_steps=1000)
    assert trainer.acts_apart_from_experience and not trainer.bootstrap_reads_acting
    assert trainer.experience_can_wait(47, 1, True) and not trainer.experience_can_wait(48, 1, False)
    monkeypatch.setattr(trainer, "update_buffer_steps", lambda: 40)
    assert trainer.experience_can_wait(7, 1, False) and not trainer.experience_can_wait(8, 1, False)
    trainer.step = 98
    assert trainer.experience_can_wait(1, 1, False) and not trainer.experience_can_wait(1, 2, False)  # a summary
    trainer.step, trainer._last_summary_step = 997, 950
    assert trainer.experience_can_wait(1, 2, False) and not trainer.experience_can_wait(1, 3, False)  # max_steps
    continuous = BrainParameters("FakeBrain", BRAINS["continuous"])
    assert make_trainer(continuous, normalize=False).experience_can_wait(1, 1, True)
    normalised = make_trainer(continuous, normalize=True)  # acting folds states into what bootstraps read
    assert normalised.bootstrap_reads_acting
    assert normalised.experience_can_wait(1, 1, False) and not normalised.experience_can_wait(1, 1, True)
    curious = make_trainer(continuous, normalize=True, reward_signals={"extrinsic": {}, "curiosity": {}})
    assert not curious.acts_apart_from_experience and not curious.experience_can_wait(1, 1, False)
    recurrent = BrainParameters("FakeBrain", BRAINS["recurrent"])  # acting moves the memories on
    with_memory = make_trainer(recurrent, normalize=False, use_recurrent=True)
    assert not with_memory.acts_apart_from_experience and not with_memory.experience_can_wait(1, 1, False)


@pytest.mark.parametrize("kind, last_observation", [(kind, False) for kind in BRAINS] + [("continuous", True)],
                         ids=list(BRAINS) + ["continuous-modern"])
def test_trainer_collects_processes_and_updates(kind, last_observation):
    brain = BrainParameters("FakeBrain", BRAINS[kind])
    trainer = make_trainer(brain, use_recurrent="recurrent" in kind)
    Loop(FakeEnv(brain, reports_last_observation=last_observation)).until_ready(trainer)
    kl, clip_fraction, policy_loss = first_minibatch_kl(trainer)
    assert abs(kl) < 1e-5 and clip_fraction == 0.0 and abs(policy_loss) < 1e-5  # ratio 1 before any update
    trainer.update_model()
    assert len(trainer.update_buffer["actions"]) == 0
    for key in ("policy_loss", "value_loss", "approx_kl", "clip_fraction", "learning_rate",
                "cumulative_reward", "episode_length", "value_estimate", "entropy"):
        assert trainer.stats[key], key
    # Agent i's episodes last 7 + i steps and earn 0.1 per step, 1.0 on the last: no transition was dropped.
    lengths = np.array(trainer.stats["episode_length"])
    assert set(lengths) <= {7.0, 8.0, 9.0}
    np.testing.assert_allclose(trainer.stats["cumulative_reward"], 0.1 * (lengths - 1) + 1.0)
    if "recurrent" in kind:
        assert trainer.export_nodes() == ["action", "value_estimate", "action_probs", "recurrent_out"]


def test_transition_after_a_done_is_kept():
    brain = BrainParameters("FakeBrain", BRAINS["continuous"])
    trainer = make_trainer(brain, time_horizon=100, buffer_size=1000)
    Loop(FakeEnv(brain, n_agents=1, episode_length=3)).run(trainer, 4)  # step 4 starts from the post-reset state
    assert len(trainer.update_buffer["actions"]) == 3
    assert len(collector_of(trainer).trajectories[0]["actions"]) == 1  # the first step of episode 2
    advantages = np.array(trainer.update_buffer["discounted_returns"])
    np.testing.assert_allclose(advantages, [0.1 + 0.99 * (0.1 + 0.99), 0.1 + 0.99, 1.0], rtol=1e-5, atol=0.2)
    end_episodes(trainer)
    assert len(collector_of(trainer).trajectories[0]["actions"]) == 0


def test_time_horizon_cut_bootstraps_with_the_value_of_the_current_state():
    brain = BrainParameters("FakeBrain", BRAINS["continuous"])
    trainer = make_trainer(brain, time_horizon=2, buffer_size=1000, lambd=1.0, gamma=0.5)
    loop = Loop(FakeEnv(brain, n_agents=1, episode_length=100))
    loop.run(trainer, 2)  # the second step's processing cuts the trajectory
    bootstrap = trainer.sess.run(trainer.model.value, trainer._input_feed(loop.info["FakeBrain"]))[0, 0]
    returns = np.array(trainer.update_buffer["discounted_returns"])
    np.testing.assert_allclose(returns, [0.1 + 0.5 * 0.1 + 0.25 * bootstrap, 0.1 + 0.5 * bootstrap], rtol=1e-5)


def test_learning_rate_schedule():
    brain = BrainParameters("FakeBrain", BRAINS["continuous"])
    trainer = make_trainer(brain, learning_rate=1e-3, max_steps=100)
    trainer.increment_step(25)
    assert trainer.current_learning_rate() == pytest.approx(0.75e-3)
    trainer.set_state({"step": 150})
    assert trainer.current_learning_rate() == 0.0
    constant = make_trainer(brain, learning_rate=1e-3, learning_rate_schedule="constant")
    constant.increment_step(999)
    assert constant.current_learning_rate() == 1e-3


def test_beta_and_epsilon_schedules_decay_to_release_22s_floors_and_reach_the_update():
    brain = BrainParameters("FakeBrain", BRAINS["continuous"])
    trainer = make_trainer(brain, beta=0.01, epsilon=0.3, beta_schedule="linear", epsilon_schedule="linear",
                           max_steps=1000)
    assert (trainer.current_beta(), trainer.current_epsilon()) == (0.01, 0.3)
    trainer.set_state({"step": 500})
    assert trainer.current_beta() == pytest.approx((0.01 - 1e-5) * 0.5 + 1e-5)
    assert trainer.current_epsilon() == pytest.approx(0.2)
    trainer.set_state({"step": 5000})
    assert (trainer.current_beta(), trainer.current_epsilon()) == (pytest.approx(1e-5), pytest.approx(0.1))
    # The update feeds the decayed values (and reports them as Policy/Beta, Policy/Epsilon).
    trainer.set_state({"step": 750})
    Loop(FakeEnv(brain)).until_ready(trainer)
    fed = []
    original = trainer._update_call
    def recording(feeds, fetches):
        call = original(feeds, fetches)
        return lambda *args: fed.append(args[3:5]) or call(*args)  # (batch, sequence, lr, epsilon, beta, ...)

    trainer._update_call = recording
    trainer.update_model()
    assert fed and all(f == (pytest.approx(trainer.current_epsilon()), pytest.approx(trainer.current_beta()))
                       for f in fed)
    assert trainer.stats["beta"][-1] == pytest.approx(trainer.current_beta())
    constant = make_trainer(brain, beta=0.01, epsilon=0.3, max_steps=1000)
    constant.set_state({"step": 900})
    assert (constant.current_beta(), constant.current_epsilon()) == (0.01, 0.3)


def test_every_hyperparameter_is_declared_with_a_doc():
    expected = {"batch_size", "beta", "buffer_size", "epsilon", "gamma", "hidden_units", "lambd", "learning_rate",
                "learning_rate_schedule", "normalize", "num_epoch", "num_layers", "time_horizon",
                "sequence_length", "use_recurrent", "max_grad_norm", "vf_coef", "clip_value", "max_steps",
                "summary_freq"}
    assert expected <= set(PPOTrainer.hyperparameters)
    assert PPOTrainer.trainer_type == "ppo"
    for key, param in PPOTrainer.hyperparameters.items():
        assert isinstance(param, Param) and param.doc, key
        if param.check is not None and param.default is not None:
            assert param.check[0](param.default), key


# ---------------------------------------------------------------- the compiled update against a plain loop
def _reference_update(trainer, arrays, rng):
    """PPO's update written plainly: per epoch one permutation, split into minibatches, each fed by
    a dict straight from the model's placeholders and run with ``update_batch`` by ``Session.run``;
    the minibatches' five losses, in order."""
    m, recurrent = trainer.model, trainer.use_recurrent
    n = len(arrays["actions"])
    per_batch = max(trainer.settings.batch_size // trainer.sequence_length, 1)

    def flat(x):
        return x.reshape((-1,) + x.shape[2:]) if recurrent else x

    losses = []
    for _ in range(trainer.settings.num_epoch):
        for rows in np.array_split(rng.permutation(n), int(np.ceil(n / per_batch))):
            feed = {m.batch_size: len(rows), m.sequence_length: trainer.sequence_length,
                    m.learning_rate: trainer.current_learning_rate(), m.clip_epsilon: trainer.settings.epsilon,
                    m.beta: trainer.settings.beta, m.taken_actions: flat(arrays["actions"][rows]),
                    m.old_log_probs: flat(arrays["log_probs"][rows]),
                    m.old_value: flat(arrays["value_estimates"][rows]),
                    m.advantages: flat(arrays["advantages"][rows]), m.returns: flat(arrays["discounted_returns"][rows]),
                    m.masks: flat(arrays["masks"][rows]), m.vector_in if m.normalize else m.state_in:
                    flat(arrays["states"][rows])}
            for k, placeholder in enumerate(m.observation_in):
                feed[placeholder] = flat(arrays[f"observations{k}"][rows])
            if recurrent:
                feed[m.memory_in] = arrays["initial_memory"][rows]
            losses.append(trainer.sess.run(
                [m.policy_loss, m.value_loss, m.mean_entropy, m.approx_kl, m.clip_fraction, m.update_batch], feed)[:5])
    return losses


@pytest.mark.parametrize("kind", ["continuous", "recurrent-visual-discrete"])
def test_update_gives_the_weights_of_a_plain_minibatch_loop(kind):
    """The compiled, view-slicing update takes exactly the Adam steps of the plain loop: same
    minibatches (same generator state), same feeds, so the same weights and optimiser slots."""
    brain = BrainParameters("FakeBrain", BRAINS[kind])
    trainer = make_trainer(brain, use_recurrent="recurrent" in kind, normalize=True, num_epoch=3, batch_size=12)
    Loop(FakeEnv(brain)).until_ready(trainer)
    sess = trainer.sess
    arrays = trainer.update_arrays()
    variables = trainer.sess.graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)
    before, rng_state = sess.run(variables), trainer.rng.bit_generator.state
    trainer.update(arrays)
    compiled = sess.run(variables)
    for variable, value in zip(variables, before):  # back to the start (the graph is final: no new op)
        sess.run(variable.initializer, {variable.initializer.inputs[1]: value})
    rng = np.random.default_rng()
    rng.bit_generator.state = rng_state
    losses = _reference_update(trainer, arrays, rng)
    reference = sess.run(variables)
    assert any(not np.allclose(a, b) for a, b in zip(before, reference))  # the steps moved the weights
    for variable, a, b in zip(variables, compiled, reference):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7, err_msg=variable.name)
    # The losses it records are the means over the same minibatch steps.
    recorded = [trainer.stats[key][-1] for key in ("policy_loss", "value_loss", "policy_entropy", "approx_kl",
                                                     "clip_fraction")]
    np.testing.assert_allclose(recorded, np.mean(losses, axis=0), rtol=1e-5, atol=1e-7)


def test_compiled_act_matches_a_plain_session_run_and_folds_the_states_once():
    """The compiled acting call: the noise drawn from the trainer's generator, the outputs of the
    graph for the fed states, and exactly one normaliser update per call."""
    brain = BrainParameters("FakeBrain", BRAINS["continuous"])
    trainer = make_trainer(brain, normalize=True)
    m, sess = trainer.model, trainer.sess
    info = Loop(FakeEnv(brain, n_agents=5)).info["FakeBrain"]
    count = trainer.sess.graph.get_tensor_by_name("normalizer/normalization_steps:0")
    before, rng = sess.run(count), np.random.default_rng()
    rng.bit_generator.state = trainer.rng.bit_generator.state
    noise = rng.standard_normal((5, 2)).astype(np.float32)
    expected = sess.run([m.output, m.log_prob, m.value, m.vector_in], {m.state_in: info.states, m.epsilon: noise})
    out = trainer.act(info)
    assert sess.run(count) == pytest.approx(before + 5)
    np.testing.assert_allclose(out.actions, expected[0], rtol=1e-6)
    np.testing.assert_allclose(out.fields["log_probs"], expected[1], rtol=1e-6)
    np.testing.assert_allclose(out.values, expected[2][:, 0], rtol=1e-6)
    np.testing.assert_allclose(out.fields["states"], expected[3], rtol=1e-6)  # what the policy saw: before the fold


def test_acting_bootstrapping_and_the_update_never_go_through_session_run():
    """The hot path runs on the session's compiled callables: ``Session.run`` (and the public
    ``make_callable`` with a feed list, which builds a feed dict and calls it) is never called
    between the graph's finalisation and the end of an update."""
    brain = BrainParameters("FakeBrain", BRAINS["continuous"])
    trainer = make_trainer(brain, normalize=True, time_horizon=3)

    def refuse(*args, **kwargs):
        raise AssertionError("Session.run was called on the hot path")

    trainer.sess.run = refuse
    Loop(FakeEnv(brain)).until_ready(trainer)  # acts, folds the states, bootstraps cut trajectories
    trainer.update_model()
    assert trainer.stats["policy_loss"] and len(trainer.update_buffer["actions"]) == 0


def test_compiled_call_converts_the_values_to_the_feeds_dtypes_and_keeps_the_fetches_order():
    """``compiled_call`` takes Python floats and float64 arrays for float32 feeds (as ``Session.run``
    does) and returns one value per fetch in their order, None for each op, wherever it stands."""
    from trainers.tf_utils import compiled_call

    with tf.Graph().as_default() as graph, tf.Session(graph=graph) as sess:
        x = tf.placeholder(tf.float32, [None], name="x")
        k = tf.placeholder(tf.int32, [], name="k")
        counter = tf.Variable(0.0)
        bump = tf.assign_add(counter, 1.0).op
        doubled, total, plus_one = x * 2.0, tf.reduce_sum(x) * tf.cast(k, tf.float32), x + 1.0
        sess.run(tf.global_variables_initializer())
        graph.finalize()
        call = compiled_call(sess, [doubled, bump, total], [x, k])
        doubled, none, total = call(np.array([1.0, 2.5]), 3)
        assert doubled.dtype == np.float32 and doubled.tolist() == [2.0, 5.0]
        assert none is None and total == pytest.approx(10.5)
        assert sess.run(counter) == 1.0  # the op ran once
        last = compiled_call(sess, [plus_one, bump], [x])
        assert [v if v is None else v.tolist() for v in last([0.5])] == [[1.5], None]
        assert sess.run(counter) == 2.0


@pytest.mark.parametrize("inline", [True, False])
def test_compiled_call_runs_the_graph_in_the_calling_thread_only_when_inline(inline):
    """``inline`` runs every op in the caller's thread; otherwise the session's inter-op pool runs
    them (independent branches side by side), with the same values."""
    import threading

    from trainers.tf_utils import compiled_call

    threads = []

    def note_thread(v):
        threads.append(threading.get_ident())
        return v * 3.0

    with tf.Graph().as_default() as graph, tf.Session(graph=graph) as sess:
        x = tf.placeholder(tf.float32, [None], name="x")
        out = tf.py_func(note_thread, [x], tf.float32, stateful=True) + 1.0
        graph.finalize()
        call = compiled_call(sess, [out], [x], inline=inline)
        for _ in range(3):
            assert call(np.array([1.0, 2.0]))[0].tolist() == [4.0, 7.0]
    assert len(threads) == 3
    assert (set(threads) == {threading.get_ident()}) == inline


@pytest.mark.parametrize("schedule", ["constant", "linear"])
def test_the_update_steps_with_the_learning_rate_of_the_settings_at_the_current_step(schedule):
    """The learning rate reaches Adam only by the update's feed: Adam's first step moves each weight
    by the learning rate (its update is the gradient's sign then), so one update of one minibatch moves
    each weight by at most the schedule's value at the current step, and those whose gradient is far
    above Adam's epsilon by that value."""
    brain = BrainParameters("FakeBrain", BRAINS["continuous"])
    trainer = make_trainer(brain, learning_rate=0.0123, learning_rate_schedule=schedule, batch_size=24,
                           buffer_size=24, num_epoch=1, max_steps=200)
    Loop(FakeEnv(brain)).until_ready(trainer)
    expected = trainer.current_learning_rate()
    assert expected == pytest.approx(0.0123 if schedule == "constant" else 0.0123 * (1 - trainer.step / 200))
    variables = trainer.sess.graph.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES)
    before = trainer.sess.run(variables)
    trainer.update_model()
    moved = np.concatenate([np.abs(a - b).ravel() for a, b in zip(trainer.sess.run(variables), before)])
    assert moved.max() == pytest.approx(expected, rel=1e-2)  # a weight whose gradient is far above Adam's epsilon
