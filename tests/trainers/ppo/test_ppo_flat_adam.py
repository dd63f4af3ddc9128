"""PPO, its reward signals and POCA take, with ``FlatAdam``, the steps ``tf.train.AdamOptimizer`` takes, bit for bit.

Each trainer is built twice: as it is, and with ``FlatAdam`` replaced by ``AdamOptimizerStep``, the
per-variable optimizer it stands for (``tf.gradients``, ``tf.clip_by_global_norm``, a barrier, one
fused ``ApplyAdam`` per variable). Both start from the same weights, see the same stream (continuous
actions: the noise comes from the trainer's generator) and update on the same minibatches, so
every weight must come out equal.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

import trainers.poca.trainer as poca_trainer
import trainers.ppo.models as ppo_models
import trainers.reward_signals.base as signals_base
from tests.fake_env import learn_from_step
from trainers.flat_adam import OPTIMIZER_STATE
from trainers.poca.trainer import POCATrainer
from trainers.ppo.trainer import PPOTrainer
from trainers.tf_utils import tf
from trainers.trainer.brain_info import BrainInfo
from unityagents.brain import BrainParameters

STATE = 4
BRAIN = BrainParameters("B", {"stateSize": STATE, "actionSize": 2, "memorySize": 0, "cameraResolutions": [],
                              "actionDescriptions": ["", ""], "actionSpaceType": 1, "stateSpaceType": 1})


class AdamOptimizerStep:
    """``FlatAdam``'s interface over one ``tf.train.AdamOptimizer`` (slots per variable): the reference."""

    #: ``(name, epsilon, clip_norm)`` of each one built, to check the call sites' settings.
    built: List[Tuple[str, float, Optional[float]]] = []

    def __init__(self, groups, learning_rate, epsilon=1e-8, clip_norm=None, allow_unused=False, name="adam"):
        AdamOptimizerStep.built.append((name, epsilon, clip_norm))
        pairs = [(g, v) for loss, group in groups for g, v in zip(tf.gradients(loss, list(group)), group)
                 if g is not None]
        self._gradients = [g for g, _ in pairs]
        self._variables = [v for _, v in pairs]
        self.gradient_norm = None
        if clip_norm is not None:
            self._gradients, self.gradient_norm = tf.clip_by_global_norm(self._gradients, clip_norm)
        self._optimizer = tf.train.AdamOptimizer(learning_rate, epsilon=epsilon, name=name)

    def apply(self, wait_for=(), name=None):
        # Every gradient before the first ApplyAdam, or a kernel may overwrite a weight that another
        # gradient still reads (a race, which a reward signal's ``minimize`` was open to).
        with tf.control_dependencies(self._gradients + list(wait_for)):
            gradients = [tf.identity(g) for g in self._gradients]
        return self._optimizer.apply_gradients(list(zip(gradients, self._variables)), name=name)


def build(make, reference: bool, monkeypatch):
    with monkeypatch.context() as patch:
        if reference:
            for module in (ppo_models, poca_trainer, signals_base):
                patch.setattr(module, "FlatAdam", AdamOptimizerStep)
        sess = tf.Session(graph=tf.Graph())
        trainer = make(sess)
        with sess.graph.as_default():
            sess.run(tf.global_variables_initializer())
        sess.graph.finalize()
    assert bool(sess.graph.get_collection(OPTIMIZER_STATE)) != reference
    return trainer


def weights(trainer) -> Dict[str, tf.Variable]:
    return {v.op.name: v for v in trainer.sess.graph.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES)}


def copy_weights(source, target) -> None:
    """``source``'s weights into ``target`` (running only existing ops: the graphs are final)."""
    values = source.sess.run(weights(source))
    targets = weights(target)
    target.sess.run([v.initializer for v in targets.values()],
                    {v.initializer.inputs[1]: values[name] for name, v in targets.items()})


def brain_info(rng, agents, done, groups=None):
    n = len(agents)
    return BrainInfo([], rng.normal(size=(n, STATE)).astype(np.float32), None, list(rng.normal(size=n)),
                     list(agents), list(done), np.zeros((n, 1)),
                     **({} if groups is None else {"group_id": list(groups), "group_rewards": [0.5] * n}))


def train(trainer, updates: int, groups=None) -> None:
    rng = np.random.default_rng(7)
    agents = [1, 2]
    info = {trainer.brain_name: brain_info(rng, agents, [False, False], groups)}
    done = 0
    for t in range(400):
        _, _, _, out = trainer.take_action(info)
        following = {trainer.brain_name: brain_info(rng, agents, [t % 6 == 5] * 2, groups)}
        learn_from_step(trainer, info, following, out)
        if trainer.is_ready_update():
            trainer.update_model()
            done += 1
            if done == updates:
                return
        info = following
    raise AssertionError(f"only {done} of {updates} updates in 400 steps")


def assert_same_training(make, monkeypatch, optimizers, groups=None, updates=3):
    """``optimizers``: the ``(name, epsilon, clip_norm)`` of each Adam the trainer builds (those of
    the code before ``FlatAdam``: epsilon 1e-5 and ``max_grad_norm`` for the policy, Adam's defaults
    for a reward signal)."""
    flat = build(make, False, monkeypatch)
    AdamOptimizerStep.built = []
    reference = build(make, True, monkeypatch)
    assert AdamOptimizerStep.built == optimizers
    copy_weights(flat, reference)
    initial = flat.sess.run(weights(flat))
    train(flat, updates, groups)
    train(reference, updates, groups)
    after = flat.sess.run(weights(flat))
    assert all(not np.array_equal(initial[name], value) for name, value in after.items()), "every weight moved"
    for name, value in reference.sess.run(weights(reference)).items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)


PARAMS = {"graph_scope": "", "summary_path": "", "batch_size": 8, "hidden_units": 8, "num_layers": 2,
          "max_steps": 1000, "num_epoch": 2, "summary_freq": 1000}


def test_ppo_with_curiosity_trains_bit_for_bit_as_with_adam_optimizer(monkeypatch):
    """The policy's Adam and the signal's, in one call per minibatch. (Not RND: its ``evaluate``
    reads the error statistics it assigns in the same call, so two runs of it differ now and then
    whichever optimizer trains it.)"""
    signals = {"extrinsic": {"strength": 1.0, "gamma": 0.99}, "curiosity": {"strength": 0.1, "gamma": 0.9}}
    params = {**PARAMS, "buffer_size": 16, "time_horizon": 4, "normalize": True, "reward_signals": signals}
    assert_same_training(lambda sess: PPOTrainer(sess, {"B": BRAIN}, "B", params, training=True, seed=3),
                         monkeypatch, [("adam", 1e-5, 0.5), ("adam", 1e-8, None)])


def test_ppo_with_every_step_clipped_trains_bit_for_bit_as_with_adam_optimizer(monkeypatch):
    params = {**PARAMS, "buffer_size": 16, "time_horizon": 4, "max_grad_norm": 1e-3}
    assert_same_training(lambda sess: PPOTrainer(sess, {"B": BRAIN}, "B", params, training=True, seed=3),
                         monkeypatch, [("adam", 1e-5, 1e-3)])


def test_poca_trains_bit_for_bit_as_with_adam_optimizer(monkeypatch):
    params = {**PARAMS, "buffer_size": 12, "time_horizon": 50}
    assert_same_training(lambda sess: POCATrainer(sess, {"B": BRAIN}, "B", params, training=True, seed=3),
                         monkeypatch, [("adam", 1e-5, 0.5), ("poca_adam", 1e-5, 0.5)], groups=[5, 5], updates=1)
