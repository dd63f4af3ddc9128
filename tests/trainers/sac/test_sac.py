"""The SAC trainer: its networks' form, its target update, temperature, squashed log-probabilities, masks, saved replay,
configuration errors, exports (``.bytes`` and the ONNX contract), and one learning run on Basic."""
from __future__ import annotations

import json

import numpy as np
import onnxruntime
import pytest

from runner.settings.trainer_config import TrainerConfigError, load_trainer_config
from tests.conftest import learn, mean_rewards, run_academy, write
from tests.fake_env import FakeEnv, Loop, learn_from_step
from tests.onnx_contract import assert_contract
from trainers.export.frozen_graph import contract_inputs, export_graph, load_graph_def
from trainers.export.onnx_model import export_onnx
from trainers.sac import SACTrainer
from trainers.tf_utils import tf
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.registry import load_registry
from trainers.trainer.summaries import summary_tag
from unityagents.brain import BrainParameters

RECURRENT = {"use_recurrent": True, "memory_size": 8, "sequence_length": 4, "batch_size": 8}
CONTINUOUS = {"stateSize": 4, "actionSize": 2, "actionSpaceType": 1, "stateSpaceType": 1}
BRANCHED = {"stateSize": 4, "actionSize": 2, "actionSpaceType": 0, "stateSpaceType": 1,
            "actionBranches": [3, 2], "actionMasks": True}


def make_sac(spec, **overrides):
    brain = BrainParameters("Brain", spec)
    params = {"graph_scope": "", "summary_path": "", "batch_size": 16, "buffer_size": 200, "hidden_units": 16,
              "max_steps": 1000, **overrides}
    sess = tf.Session(graph=tf.Graph())
    trainer = SACTrainer(sess, {brain.brain_name: brain}, brain.brain_name, params, training=True, seed=3)
    with sess.graph.as_default():
        sess.run(tf.global_variables_initializer())
        saver = tf.train.Saver()
    sess.graph.finalize()  # as the controller does: any op created from now on fails
    trainer.saver = saver
    return trainer


def randomise_policy(trainer, rng, scale):
    """Policy weights far from the near-zero initial ones (``Variable.load`` runs existing ops only)."""
    with trainer.sess.graph.as_default():
        for var in trainer.model.policy_variables:
            var.load(rng.normal(scale=scale, size=var.shape.as_list()), trainer.sess)


def values(trainer, variables):
    return [v.copy() for v in trainer.sess.run(variables)]


def test_over_grpc_tanh_actions_are_sent_as_they_are():
    """A tanh policy's actions are already Unity's [-1, 1]: the unit contract sends them unchanged
    (not divided by 3 as a Gaussian policy's), which is what its ONNX ``continuous_actions`` gives Unity."""
    trainer = make_sac({**CONTINUOUS, "continuousActionContract": "unit"})
    randomise_policy(trainer, np.random.default_rng(0), 3.0)
    states = np.random.default_rng(1).normal(size=(64, 4)).astype(np.float32)
    info = BrainInfo([], states, agents=list(range(64)), reward=[0.0] * 64, local_done=[False] * 64,
                     action=np.zeros((64, 2), np.float32))
    sent, _, _, out = trainer.take_action({"Brain": info})
    np.testing.assert_array_equal(sent, out.actions)
    assert np.abs(sent).max() > 0.9, "the test needs saturated actions, which a division by 3 would shrink"
    assert np.abs(sent).max() <= 1.0


def test_targets_start_as_copies_then_move_by_tau():
    trainer = make_sac(CONTINUOUS, tau=0.25)
    m = trainer.model
    Loop(FakeEnv(trainer.brain)).run(trainer, 10, update=False)
    before_online = values(trainer, m.online_variables)
    assert any(not np.allclose(o, t) for o, t in zip(before_online, values(trainer, m.target_variables)))
    trainer.update_targets(hard=True)  # what update_model does before its first gradient step
    for o, t in zip(before_online, values(trainer, m.target_variables)):
        np.testing.assert_array_equal(o, t)
    for _ in range(2):
        target_before = values(trainer, m.target_variables)
        trainer.update(trainer.replay.sample(16, trainer.rng))
        online_after = values(trainer, m.online_variables)
        assert any(not np.allclose(a, b) for a, b in zip(online_after, before_online))  # the critics learnt
        for o, t_old, t_new in zip(online_after, target_before, values(trainer, m.target_variables)):
            np.testing.assert_allclose(t_new, 0.25 * o + 0.75 * t_old, rtol=1e-5, atol=1e-6)
        before_online = online_after


@pytest.mark.parametrize("spec", [CONTINUOUS, BRANCHED], ids=["continuous", "branches"])
def test_the_losses_match_numpy(spec):
    """Q backs up from the smaller target Q at the next policy's action less the entropy term, cut at
    episode ends; the policy loss reads the smaller of the two Qs at its own action; all against numpy,
    with the four critics apart and the next states' policy its own."""
    trainer = make_sac(spec, init_entcoef=0.3)
    m = trainer.model
    rng = np.random.default_rng(5)
    randomise_policy(trainer, rng, 0.5)
    with trainer.sess.graph.as_default():
        for var in m.online_variables + m.target_variables:
            var.load(rng.normal(scale=0.5, size=var.shape.as_list()), trainer.sess)
    Loop(FakeEnv(trainer.brain, episode_length=4)).run(trainer, 12, update=False)
    batch = trainer.replay.sample(16, trainer.rng)
    assert 0 < batch["dones"].sum() < 16
    parts = ("log_prob", "probs", "log_probs")
    out = trainer.sess.run({"metrics": m.metrics, "alpha": m.alpha,
                            "critics": {k: v["extrinsic"] for k, v in m.critic_outputs.items()},
                            "policy": {k: v for k, v in m.policy_tensors.items() if k in parts},
                            "next": {k: v for k, v in m.next_policy_tensors.items() if k in parts}},
                           trainer.update_feed(batch))
    c = {k: v.astype(np.float64) for k, v in out["critics"].items()}
    alpha = out["alpha"].astype(np.float64)
    gamma = trainer._model_arguments["gammas"]["extrinsic"]
    if spec is CONTINUOUS:
        next_value = np.minimum(c["target_q1"], c["target_q2"]) - alpha[0] * out["next"]["log_prob"]
        taken_q1, taken_q2 = c["q1"], c["q2"]
        policy_loss = np.mean(alpha[0] * out["policy"]["log_prob"] - np.minimum(c["q1_pi"], c["q2_pi"]))
    else:
        split = np.cumsum(BRANCHED["actionBranches"])[:-1]

        def branches(q):
            return np.split(q, split, axis=1)

        def soft_value(q, policy):  # per branch sum_a p (q - alpha_b log p), averaged over branches
            return np.mean([(p * (q_b - a * lp)).sum(axis=1) for p, lp, q_b, a in
                            zip(policy["probs"], policy["log_probs"], branches(q), alpha)], axis=0)

        rows = np.arange(16)
        next_value = soft_value(np.minimum(c["target_q1"], c["target_q2"]), out["next"])
        taken_q1, taken_q2 = (np.mean([q_b[rows, batch["actions"][:, k]] for k, q_b in enumerate(branches(c[q]))],
                                      axis=0) for q in ("q1", "q2"))
        p = out["policy"]
        policy_loss = np.mean(sum((pb * (a * lp - q_b)).sum(axis=1) for pb, lp, q_b, a in
                                  zip(p["probs"], p["log_probs"], branches(np.minimum(c["q1_pi"], c["q2_pi"])), alpha)))
    target = batch["rewards"] + gamma * (1.0 - batch["dones"]) * next_value
    expected_metrics = {"Losses/Q1 Loss": 0.5 * np.mean((taken_q1 - target) ** 2),
                        "Losses/Q2 Loss": 0.5 * np.mean((taken_q2 - target) ** 2),
                        "Losses/Policy Loss": policy_loss}
    for key, value in expected_metrics.items():
        assert out["metrics"][key] == pytest.approx(value, rel=1e-4, abs=1e-5), key
    assert not np.allclose(c["q1_pi"], c["q2_pi"]) and not np.allclose(c["target_q1"], c["target_q2"])


@pytest.mark.slow
def test_entropy_coefficient_moves_towards_the_target_entropy():
    """Branches of 3 and 2 actions: all allowed, the near-uniform policy's entropy (ln 3 + ln 2) is
    above the target (0.2 ln 3, 0.2 ln 2), so alpha falls; one action left per branch, the entropy is 0,
    below the target, so alpha rises."""
    for allowed, direction in (([1, 1, 1, 1, 1], -1), ([0, 1, 0, 1, 0], +1)):
        trainer = make_sac(BRANCHED, init_entcoef=0.5, learning_rate=1e-2)
        m = trainer.model
        Loop(FakeEnv(trainer.brain)).run(trainer, 10, update=False)
        start = trainer.sess.run(m.log_alpha)
        np.testing.assert_allclose(start, np.log([0.5, 0.5]), rtol=1e-6)
        for _ in range(5):
            batch = trainer.replay.sample(16, trainer.rng)
            masks = np.tile(np.float32(allowed), (16, 1))
            batch["action_masks"], batch["next_action_masks"] = masks, masks
            metrics = trainer.update(batch)
        entropy = metrics["Losses/Update Entropy"]
        # Either no choice is left (entropy 0) or the policy is still far above the target 0.2 ln 6.
        assert entropy == pytest.approx(0.0, abs=1e-6) if direction > 0 else entropy > 0.2 * np.log(6) + 0.5
        moved = trainer.sess.run(m.log_alpha) - start
        assert (direction * moved > 0.02).all(), (allowed, moved)


def test_squashed_log_prob_matches_numpy():
    """log pi(a) = log N(u; mu, sigma) - sum log(1 - tanh(u)^2) with a = tanh(u), also where tanh saturates."""
    trainer = make_sac(CONTINUOUS)
    m = trainer.model
    rng = np.random.default_rng(0)
    randomise_policy(trainer, rng, 0.8)
    state = rng.normal(size=(64, 4)).astype(np.float32)
    noise = (rng.normal(size=(64, 2)) * np.linspace(0.1, 8.0, 64)[:, None]).astype(np.float32)
    p = m.policy_tensors
    mu, log_sigma, pre, log_prob, action = trainer.sess.run(
        [p["mu"], p["log_sigma"], p["pre_tanh"], p["log_prob"], m.output], {m.state: state, m.epsilon: noise})
    mu, log_sigma = mu.astype(np.float64), log_sigma.astype(np.float64)
    u = mu + np.exp(log_sigma) * noise
    np.testing.assert_allclose(pre, u, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(action, np.tanh(u), rtol=1e-6, atol=1e-6)
    assert np.abs(u).max() > 10  # saturated rows are in the batch
    gaussian = -0.5 * noise.astype(np.float64) ** 2 - log_sigma - 0.5 * np.log(2 * np.pi)
    log_det = np.log(np.maximum(1.0 - np.tanh(u) ** 2, 1e-300))
    log_det = np.where(np.abs(u) > 15, 2 * (np.log(2) - np.abs(u)), log_det)  # tanh rounds to 1 in float64
    np.testing.assert_allclose(log_prob, (gaussian - log_det).sum(axis=1), rtol=1e-4, atol=1e-3)


def test_discrete_actions_respect_the_masks_and_the_replay_keeps_the_next_masks():
    trainer = make_sac(BRANCHED, buffer_size=3000)
    m = trainer.model
    rng = np.random.default_rng(1)
    randomise_policy(trainer, rng, 1.0)
    n = 3000
    masks = np.tile(np.float32([[1, 0, 1, 0, 1], [0, 1, 0, 1, 0], [0, 0, 1, 1, 1]]), (n // 3, 1))
    states = np.repeat(rng.normal(size=(1, 4)).astype(np.float32), n, axis=0)  # one state: one distribution
    info = BrainInfo([], states, None, [0.0] * n, list(range(n)), [False] * n, action_masks=masks)
    actions, _, _, outputs = trainer.take_action({"Brain": info})
    assert actions.shape == (n, 2)
    chosen = np.zeros_like(masks)
    chosen[np.arange(n), actions[:, 0]] = 1
    chosen[np.arange(n), 3 + actions[:, 1]] = 1
    assert (chosen <= masks).all()  # never a masked action
    assert set(actions[0::3, 0]) == {0, 2} and set(actions[2::3, 1]) == {0, 1}  # the allowed ones are sampled
    probs = trainer.sess.run(m.probs, {m.state: info.states, m.action_masks: masks})
    assert (probs[masks == 0] == 0).all()
    # Sampled as the masked policy says: action 1 of branch 0 holds real mass unmasked, and none masked.
    unmasked = trainer.sess.run(m.probs, {m.state: info.states[:1]})
    assert unmasked[0, 1] > 0.15, unmasked
    frequency = np.bincount(actions[0::3, 0], minlength=3) / (n // 3)
    np.testing.assert_allclose(frequency, probs[0, :3], atol=0.05)
    next_masks = np.roll(masks, 1, axis=0)
    following = BrainInfo([], info.states, None, [0.0] * n, list(range(n)), [False] * n, action_masks=next_masks)
    learn_from_step(trainer, {"Brain": info}, {"Brain": following}, outputs)
    np.testing.assert_array_equal(trainer.replay.fields["action_masks"][:n], masks)
    np.testing.assert_array_equal(trainer.replay.fields["next_action_masks"][:n], next_masks)


@pytest.mark.slow
def test_saved_replay_buffer_makes_the_next_update_identical(tmp_path):
    """A checkpoint (weights, Adam, state JSON with the replay) restored in a fresh graph takes exactly
    the gradient step the uninterrupted trainer takes next; without save_replay_buffer it starts empty."""
    first = make_sac(CONTINUOUS, save_replay_buffer=True, normalize=True)
    loop = Loop(FakeEnv(first.brain))
    loop.run(first, 20)
    assert first.gradient_step > 0
    with first.sess.graph.as_default():
        prefix = first.saver.save(first.sess, str(tmp_path / "model.cptk"))
    state = json.loads(json.dumps(first.get_state()))
    resumed = make_sac(CONTINUOUS, save_replay_buffer=True, normalize=True)
    with resumed.sess.graph.as_default():
        resumed.saver.restore(resumed.sess, prefix)
    resumed.set_state(state)
    assert len(resumed.replay) == len(first.replay) and resumed.gradient_step == first.gradient_step
    for trainer in (first, resumed):
        trainer.take_action(loop.info)  # the next decision draws its noise too
    expected = first.update(first.replay.sample(16, first.rng))
    assert resumed.update(resumed.replay.sample(16, resumed.rng)) == expected
    without = make_sac(CONTINUOUS)
    without.set_state(json.loads(json.dumps({**state, "replay": None})))
    assert "replay" not in make_sac(CONTINUOUS).get_state() and len(without.replay) == 0


@pytest.mark.parametrize("block, brain, key, words", [
    ("tau: 0.0", CONTINUOUS, "tau", "in (0, 1]"),
    ("tau: 1.5", CONTINUOUS, "tau", "in (0, 1]"),
    ("batch_size: 100\n    buffer_size: 10", CONTINUOUS, "batch_size", "larger than buffer_size"),
    ("{}", {**BRANCHED, "actionBranches": [3, 1]}, "trainer", "at least 2 actions"),
    ("{}", {**CONTINUOUS, "actionSize": 0}, "trainer", "at least one continuous action"),
])
def test_bad_settings_name_the_brain_and_the_key(tmp_path, block, brain, key, words):
    text = f"Brain:\n    trainer: sac\n    {block}\n" if block != "{}" else "Brain:\n    trainer: sac\n"
    path = write(tmp_path / "sac.yaml", text)
    brains = {"Brain": BrainParameters("Brain", brain)}
    with pytest.raises(TrainerConfigError) as error:
        load_trainer_config(path, load_registry()).settings_for_environment(brains, ["Brain"])
    message = str(error.value)
    assert "brain 'Brain'" in message and f"key '{key}'" in message and words in message, message


def test_a_replay_buffer_larger_than_memory_is_refused_with_its_size(tmp_path, monkeypatch):
    """The replay stores each camera frame twice (state and next state): a machine that holds the
    frames once (the generic check) but not twice is refused, with the size it would take."""
    brain = BrainParameters("Brain", {**CONTINUOUS, "cameraResolutions": [{"width": 84, "height": 84,
                                                                           "blackAndWhite": False}]})
    frame = 84 * 84 * 3
    memory = 10 ** 6 * 4 * int(1.5 * frame)  # 1.5 frames per transition
    monkeypatch.setattr("runner.settings.trainer_config.total_memory_bytes", lambda: memory)
    monkeypatch.setattr("trainers.sac.settings.total_memory_bytes", lambda: memory)
    path = write(tmp_path / "sac.yaml", "Brain:\n    trainer: sac\n    buffer_size: 1.0e6\n")
    config = load_trainer_config(path, load_registry())
    with pytest.raises(TrainerConfigError) as error:
        config.settings_for_environment({"Brain": brain}, ["Brain"])
    message = str(error.value)
    needed = 10 ** 6 * 4 * (2 * (4 + frame) + 2 + 2)
    assert "brain 'Brain', key 'buffer_size'" in message and f"{needed / 2 ** 30:.1f} GiB" in message, message
    path = write(tmp_path / "small.yaml", "Brain:\n    trainer: sac\n    buffer_size: 5.0e5\n")
    load_trainer_config(path, load_registry()).settings_for_environment({"Brain": brain}, ["Brain"])


def test_the_replay_size_check_counts_a_recurrent_actors_memories(tmp_path, monkeypatch):
    """Each stored step of a recurrent actor keeps the memory it started from and the one it returned:
    a machine that holds the states but not the memories is refused, with the size counting them."""
    memory = 10 ** 8  # 1e6 transitions of 48 bytes fit; with 2 x 64 memory floats and a mask they do not
    monkeypatch.setattr("runner.settings.trainer_config.total_memory_bytes", lambda: memory)
    monkeypatch.setattr("trainers.sac.settings.total_memory_bytes", lambda: memory)
    block = ("Brain:\n    trainer: sac\n    buffer_size: 1.0e6\n    use_recurrent: true\n    memory_size: 64\n"
             "    sequence_length: 16\n")
    brain = BrainParameters("Brain", CONTINUOUS)
    config = load_trainer_config(write(tmp_path / "sac.yaml", block), load_registry())
    with pytest.raises(TrainerConfigError) as error:
        config.settings_for_environment({"Brain": brain}, ["Brain"])
    needed = 10 ** 6 * 4 * (2 * 4 + 2 + 2 + 2 * 64 + 1)
    assert "key 'buffer_size'" in str(error.value) and f"{needed / 2 ** 30:.1f} GiB" in str(error.value), error.value
    memoryless = write(tmp_path / "plain.yaml", "Brain:\n    trainer: sac\n    buffer_size: 1.0e6\n")
    load_trainer_config(memoryless, load_registry()).settings_for_environment({"Brain": brain}, ["Brain"])


@pytest.mark.parametrize("spec", [CONTINUOUS, BRANCHED], ids=["continuous", "branches"])
def test_exports_keep_tanh_actions_unclipped_and_pass_the_onnx_contract(tmp_path, spec):
    trainer = make_sac(spec)
    rng = np.random.default_rng(2)
    randomise_policy(trainer, rng, 0.3)
    bytes_path = str(tmp_path / "env.bytes")
    export_graph(trainer.sess, trainer.export_nodes(), bytes_path, keep_nodes=contract_inputs(trainer.sess.graph, ""))
    (onnx_path,) = export_onnx(trainer.sess, [trainer], str(tmp_path))
    assert_contract(onnx_path, trainer.brain)
    session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(load_graph_def(bytes_path), name="")
    frozen = tf.Session(graph=graph)
    state = rng.normal(size=(500, 4)).astype(np.float32)
    if spec is CONTINUOUS:
        mean = frozen.run("action:0", {"state:0": state, "batch_size:0": 500})  # epsilon left at 0
        np.testing.assert_allclose(mean, trainer.sess.run(trainer.model.deterministic_output,
                                                          {trainer.model.state: state}), atol=1e-6)
        sampled, deterministic = session.run(["continuous_actions", "deterministic_continuous_actions"],
                                             {"obs_0": state})
        np.testing.assert_allclose(deterministic, mean, atol=1e-5)  # tanh(mu): not clipped, not divided by 3
        assert np.abs(mean).max() > 0.5 and np.abs(sampled).max() > 0.9 and np.abs(sampled).max() <= 1.0
        assert np.abs(sampled - deterministic).max() > 0.1  # the stochastic output samples
    else:
        masks = np.tile(np.float32([1, 0, 1, 0, 1]), (500, 1))
        sampled, greedy = session.run(["discrete_actions", "deterministic_discrete_actions"],
                                      {"obs_0": state, "action_masks": masks})
        assert set(sampled[:, 0]) <= {0, 2} and set(sampled[:, 1]) == {1}
        probs = frozen.run("action_probs:0", {"state:0": state, "action_masks:0": masks, "batch_size:0": 500})
        np.testing.assert_array_equal(greedy[:, 0], np.argmax(probs[:, :3], axis=1))


@pytest.mark.slow
def test_discrete_sac_solves_basic(tmp_path):
    """The shipped Basic settings, shortened: >= 0.9 (the optimum is 0.94), and the export scores it too."""
    with open(f"{__file__.rsplit('/tests/', 1)[0]}/config/sac/Basic.yaml") as f:
        text = f.read().replace("max_steps: 6.0e3", "max_steps: 4.0e3")
    assert "max_steps: 4.0e3" in text
    config = write(tmp_path / "sac_basic.yaml", text)
    code, out = learn(tmp_path, "Basic", "--train", "--trainer-config", config, "--run-path", "sac", timeout=300)
    assert code == 0, out
    rewards = mean_rewards(out, "BasicBrain")
    assert rewards[-1] >= 0.9, rewards
    bytes_path = tmp_path / "models" / "sac" / "Basic.bytes"
    assert run_academy("Basic", "--brain", f"BasicBrain=internal:{bytes_path}", "--episodes", "10") >= 0.9


@pytest.mark.parametrize("spec, coefficient", [(CONTINUOUS, "Policy/Continuous Entropy Coeff"),
                                               (BRANCHED, "Policy/Discrete Entropy Coeff")])
def test_sac_writes_ml_agents_tag_names(spec, coefficient):
    """The tags ML-Agents' SAC writes, so a Release 22 user's dashboards read these runs."""
    trainer = make_sac(spec)
    Loop(FakeEnv(trainer.brain)).run(trainer, 40)
    tags = {summary_tag(key) for key in trainer.stats}
    expected = {"Losses/Q1 Loss", "Losses/Q2 Loss", "Losses/Policy Loss", "Policy/Extrinsic Value",
                "Policy/Learning Rate", coefficient}
    assert expected <= tags, sorted(expected - tags)


def test_the_networks_are_release22s_swish_layers_with_its_initialisation():
    """As ML-Agents' ``LinearEncoder`` and heads: swish hidden layers with kernels N(0, 1/fan_in), the
    discrete logits N(0, 0.1^2/fan_in), the Gaussian's N(0, 0.2^2/fan_in), Glorot-uniform Q heads, zero
    biases; the discrete policy's probabilities are those of that forward pass."""
    h = 256
    for spec in (BRANCHED, CONTINUOUS):
        trainer = make_sac(spec, hidden_units=h)
        variables = {v.name.split(":")[0]: v for v in trainer.sess.graph.get_collection("trainable_variables")}
        got = dict(zip(variables, trainer.sess.run(list(variables.values()))))
        hidden = got["policy/actor/hidden/dense_1/kernel"]
        assert hidden.shape == (h, h)
        assert np.std(hidden) == pytest.approx(1.0 / np.sqrt(h), rel=0.03)
        assert abs(np.mean(hidden)) < 0.1 / np.sqrt(h)
        heads = ["policy/actor/logits_0/kernel", "policy/actor/logits_1/kernel"] if spec is BRANCHED else \
            ["policy/actor/mu/kernel", "policy/actor/log_sigma/kernel"]
        gain = 0.1 if spec is BRANCHED else 0.2
        kernels = np.concatenate([got[name].ravel() for name in heads])
        assert np.std(kernels) == pytest.approx(gain / np.sqrt(h), rel=0.2)
        q_head = got["q1/head_extrinsic/kernel"]
        limit = np.sqrt(6.0 / sum(q_head.shape))
        assert np.abs(q_head).max() <= limit and np.std(q_head) == pytest.approx(limit / np.sqrt(3.0), rel=0.2)
        assert all(not value.any() for name, value in got.items() if name.endswith("/bias"))

    def swish(x):
        return x / (1.0 + np.exp(-x))

    trainer = make_sac(BRANCHED, num_layers=2)
    m = trainer.model
    randomise_policy(trainer, np.random.default_rng(0), 0.7)
    w = {v.name.split(":")[0].split("policy/actor/")[1]: value
         for v, value in zip(m.policy_variables, trainer.sess.run(m.policy_variables))}
    state = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
    x = swish(state @ w["hidden/dense_0/kernel"] + w["hidden/dense_0/bias"])
    x = swish(x @ w["hidden/dense_1/kernel"] + w["hidden/dense_1/bias"])
    expected = []
    for k in range(2):
        logits = x @ w[f"logits_{k}/kernel"] + w[f"logits_{k}/bias"]
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        expected.append(e / e.sum(axis=1, keepdims=True))
    probs = trainer.sess.run(m.probs, {m.state: state, m.batch_size: 5})
    np.testing.assert_allclose(probs, np.concatenate(expected, axis=1), rtol=1e-4, atol=1e-6)
    # Swish is written with tanh: a Sigmoid times its input is what the graph optimizer fuses into a
    # oneDNN kernel many times slower than the layer on CPU.
    hidden_ops = [op.type for op in trainer.sess.graph.get_operations() if "/hidden/" in op.name]
    assert "Tanh" in hidden_ops and "Sigmoid" not in hidden_ops


def test_a_steps_experience_waits_only_where_no_update_summary_or_end_can_come_of_it():
    """``experience_can_wait``: not where the transitions it may store make a gradient step due
    before the next action (one per 4 after the first 16: at 20, 24, ...), nor where the count reaches a
    summary or ``max_steps``; a ``threaded`` trainer updates after the next send either way; a
    recurrent one never waits (storing an episode's end forgets the memories the next action reads)."""
    trainer = make_sac(CONTINUOUS, buffer_init_steps=16, steps_per_update=4, summary_freq=100)
    assert trainer.acts_apart_from_experience
    assert trainer.experience_can_wait(19, 1, True) and not trainer.experience_can_wait(20, 1, True)
    trainer.transitions_seen, trainer.gradient_step = 21, 1  # the second gradient step is due at 24
    trainer.replay.add({"rewards": np.zeros(21, np.float32)})
    assert trainer.experience_can_wait(2, 1, False) and not trainer.experience_can_wait(3, 1, False)
    trainer.step = 98
    assert trainer.experience_can_wait(1, 1, False) and not trainer.experience_can_wait(1, 2, False)  # a summary
    trainer.step, trainer._last_summary_step = 997, 950
    assert trainer.experience_can_wait(1, 2, False) and not trainer.experience_can_wait(1, 3, False)  # max_steps
    threaded = make_sac(CONTINUOUS, buffer_init_steps=16, steps_per_update=4, threaded=True)
    assert threaded.experience_can_wait(100, 1, False)
    recurrent = make_sac(CONTINUOUS, threaded=True, **RECURRENT)
    assert not recurrent.acts_apart_from_experience and not recurrent.experience_can_wait(1, 1, False)
