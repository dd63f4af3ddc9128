"""The ``gail`` reward signal: a discriminator between recorded demonstrations and the agent.

Why: a ``.demo`` recording tells the agent *how* a task is done even where the environment's
reward says nothing. Generative adversarial imitation learning (Ho & Ermon 2016) trains a
discriminator D to tell the recording's steps from the agent's, and rewards the agent for steps
that D takes for the expert's: ``r = -log(1 - D(s[, a, done]))``, times ``strength``. Configured
in the ``reward_signals`` block as ML-Agents users know it::

    reward_signals:
        extrinsic: {strength: 1.0, gamma: 0.99}
        gail: {strength: 0.01, gamma: 0.99, demo_path: demos/Pyramids.demo, use_actions: false}

What D sees and how it trains, after ML-Agents' GAIL provider:

* the state (one-hot if discrete; with ``normalize``, continuous states normalised by running
  statistics of the agent's and the recording's states, updated with each training step) and
  the cameras (the shared CNN encoder), and with
  ``use_actions`` also the action (one-hot per discrete branch, or the continuous vector) and the
  step's ``done`` flag. There is no absorbing state: ``done`` is only an input, and only with
  ``use_actions``; the signal's value is not bootstrapped past a true episode end, like the
  extrinsic one;
* ``num_layers`` (2) dense layers of ``encoding_size`` (swish), then a sigmoid output. With ``use_vail`` a
  variational bottleneck (Peng et al. 2018) of 128 units sits before the output: a code
  ``z = mu + sigma * eps`` while training (``mu`` for rewards), a KL term weighted by ``beta``, which
  follows dual ascent toward an information budget of 0.5 (``beta <- max(0, beta + 5e-4 (KL - 0.5))``);
* loss ``-mean[log D(expert)] - mean[log(1 - D(agent))]`` plus a gradient penalty
  ``gradient_penalty_weight * mean((|grad D| - 1)^2)`` at random mixtures of the two batches
  (Gulrajani et al. 2017), which keeps D smooth so that its reward stays informative;
* it trains on every PPO minibatch (in the same ``session.run``) against an expert minibatch of
  the same size drawn from the recording. Each recorded step is paired with the next one's
  ``done``, as the agent's steps are; steps that end an episode are not samples themselves.
"""
from __future__ import annotations

from typing import Any, ClassVar, Dict, List, Mapping, Optional

import numpy as np

from trainers.encoders import encode, observation_placeholders, state_placeholder, state_vector
from trainers.models import RunningNormalizer, dense, new_trainable_variables, swish
from trainers.reward_signals.base import GAMMA, RewardSignal, SignalInputs, layers_param, strength_param
from trainers.tf_utils import tf
from trainers.trainer.base import Param, TrainerConfigError, learning_rate_param, non_negative, positive
from unityagents.brain import BrainParameters
from unityagents.demo import DemonstrationError, load_demonstration

VAIL_CODE_SIZE = 128
VAIL_INFORMATION_BUDGET = 0.5
VAIL_BETA_STEP = 5e-4
_EPS = 1e-7


class GAILSignal(RewardSignal):
    """GAIL (see the module docstring). Public tensors: ``expert_estimate`` and ``policy_estimate``
    (D on the fed batches), ``reward`` (``[N]``, before ``strength``), ``loss``, ``kl`` and ``beta``
    (VAIL), ``update_op``."""

    name = "gail"
    title = "Gail"
    parameters: ClassVar[Dict[str, Param]] = {
        "strength": strength_param(1.0, "factor of -log(1 - D)"),
        "gamma": GAMMA,
        "demo_path": Param(str, None, required=True, doc="a .demo file, or a folder whose .demo files are all used"),
        "encoding_size": Param(int, 128, check=(positive, "> 0"), doc="width of the discriminator's layers"),
        "learning_rate": learning_rate_param(3.0e-4, "Adam learning rate of the discriminator"),
        "num_layers": layers_param("hidden layers of the discriminator"),
        "normalize": Param(bool, False, doc="the discriminator sees continuous states normalised by running "
                                            "statistics of the agent's and the recording's states"),
        "use_actions": Param(bool, False, doc="the discriminator also sees the action and the done flag"),
        "use_vail": Param(bool, False, doc="variational information bottleneck in the discriminator"),
        "gradient_penalty_weight": Param(float, 10.0, check=(non_negative, ">= 0"),
                                         doc="weight of the discriminator's gradient penalty (0: none)"),
    }

    def __init__(self, brain: BrainParameters, settings: Mapping[str, Any]):
        super().__init__(brain, settings)
        self.brain = brain
        self.use_actions = bool(settings["use_actions"])
        self.use_vail = bool(settings["use_vail"])
        self.needs_next_inputs = self.use_actions  # the done flag of each step comes with the next inputs
        self.continuous = brain.action_space_type == "continuous"
        self.branches = [] if self.continuous else list(brain.action_branches)
        self.action_size = brain.action_space_size if self.continuous else int(sum(self.branches))
        self.rng = np.random.default_rng(0)
        self._load_expert(settings["demo_path"])
        size = int(settings["encoding_size"])
        with tf.variable_scope("gail"):
            before = tf.trainable_variables()
            self.inputs = SignalInputs(brain, with_next=False)
            self.expert_state = state_placeholder(brain, "expert_state") if brain.state_space_size > 0 else None
            self.expert_observations = observation_placeholders(brain, "expert_observation")
            self.actions = tf.placeholder(tf.float32, [None, self.action_size], name="actions")
            self.expert_actions = tf.placeholder(tf.float32, [None, self.action_size], name="expert_actions")
            self.dones = tf.placeholder(tf.float32, [None, 1], name="dones")
            self.expert_dones = tf.placeholder(tf.float32, [None, 1], name="expert_dones")
            self.training = tf.placeholder_with_default(False, [], name="training")
            network = tf.make_template("discriminator", self._discriminator, size=size,
                                       layers=int(self.settings["num_layers"]))
            policy_vector = self.inputs.vector(self.inputs.state)
            expert_vector = None if self.expert_state is None else state_vector(brain, self.expert_state)
            statistics = self.state_statistics = None
            if self.settings["normalize"] and policy_vector is not None and brain.state_space_type == "continuous":
                # One set of statistics over both kinds of step, updated with each discriminator step.
                statistics = self.state_statistics = RunningNormalizer(
                    tf.concat([policy_vector, expert_vector], axis=0), name="state_normalizer")
                policy_vector, expert_vector = statistics.apply(policy_vector), statistics.apply(expert_vector)
            policy = self._parts(policy_vector, self.inputs.observations, self.actions, self.dones)
            expert = self._parts(expert_vector, self.expert_observations, self.expert_actions, self.expert_dones)
            self.policy_estimate, policy_mu = network(policy)
            self.expert_estimate, expert_mu = network(expert)
            self.reward = -tf.log(1.0 - self.policy_estimate[:, 0] * (1.0 - _EPS))
            loss = -tf.reduce_mean(tf.log(self.expert_estimate + _EPS)) - tf.reduce_mean(
                tf.log(1.0 - self.policy_estimate + _EPS))
            self.loss = loss
            weight = float(settings["gradient_penalty_weight"])
            if weight > 0:
                loss += weight * self._gradient_penalty(network, policy, expert)
            updates = []
            self.beta = tf.get_variable("vail_beta", [], initializer=tf.zeros_initializer(), trainable=False)
            self.kl = tf.constant(0.0)
            if self.use_vail:
                sigma = self._sigma
                self.kl = tf.reduce_mean(-tf.reduce_sum(
                    1.0 + tf.log(tf.square(sigma) + _EPS) - 0.5 * tf.square(policy_mu) - 0.5 * tf.square(expert_mu)
                    - tf.square(sigma), axis=1))
                loss += self.beta * (self.kl - VAIL_INFORMATION_BUDGET)
            train = self.adam_step(loss, new_trainable_variables(before))
            updates.append(train)
            if statistics is not None:
                with tf.control_dependencies([train]):
                    updates.append(tf.group(statistics.update))
            if self.use_vail:
                with tf.control_dependencies([train]):
                    updates.append(tf.assign(self.beta, tf.maximum(
                        0.0, self.beta + VAIL_BETA_STEP * (self.kl - VAIL_INFORMATION_BUDGET))))
            self.update_op = tf.group(*updates)
        self.metrics = {"Losses/GAIL Loss": self.loss, "Policy/GAIL Expert Estimate": tf.reduce_mean(
            self.expert_estimate), "Policy/GAIL Policy Estimate": tf.reduce_mean(self.policy_estimate)}
        if self.use_vail:
            self.metrics["Policy/GAIL Beta"] = self.beta
            self.metrics["Losses/GAIL KL Loss"] = self.kl

    # ------------------------------------------------------------------ the network
    def _parts(self, vector, observations, actions, dones) -> Dict[str, Any]:
        parts: Dict[str, Any] = {"vector": vector, "observations": list(observations)}
        if self.use_actions:
            parts["actions"], parts["dones"] = actions, dones
        return parts

    def _discriminator(self, parts: Dict[str, Any], size: int, layers: int):
        """D(parts) in [0, 1] and the VAIL mean code (None without VAIL)."""
        x = encode(parts["vector"], parts["observations"], size)
        if self.use_actions:
            x = tf.concat([x, parts["actions"], parts["dones"]], axis=1)
        for i in range(layers):
            x = dense(x, size, f"dense_{i}", swish)
        mu = None
        if self.use_vail:
            mu = dense(x, VAIL_CODE_SIZE, "vail_mu", gain=0.1)
            self._sigma = tf.get_variable("vail_sigma", [VAIL_CODE_SIZE], initializer=tf.ones_initializer())
            noise = tf.random_normal(tf.shape(mu))
            x = tf.cond(self.training, lambda: mu + noise * self._sigma, lambda: mu)
        return tf.sigmoid(dense(x, 1, "estimate", gain=0.2)), mu

    def _gradient_penalty(self, network, policy: Dict[str, Any], expert: Dict[str, Any]) -> tf.Tensor:
        """``mean((|grad_x D(x)| - 1)^2)`` at elementwise-random mixtures ``x`` of the two batches."""
        mixed: Dict[str, Any] = {}
        tensors: List[tf.Tensor] = []
        for key in policy:
            if key == "observations":
                mixed[key] = [self._mix(p, e) for p, e in zip(policy[key], expert[key])]
                tensors += mixed[key]
            elif policy[key] is None:
                mixed[key] = None
            else:
                mixed[key] = self._mix(policy[key], expert[key])
                tensors.append(mixed[key])
        estimate, _ = network(mixed)
        gradient = tf.gradients(estimate, tensors[0])[0]  # the first input, as ML-Agents
        axes = list(range(1, gradient.shape.ndims))
        norm = tf.sqrt(tf.reduce_sum(tf.square(gradient), axis=axes) + _EPS)
        return tf.reduce_mean(tf.square(norm - 1.0))

    @staticmethod
    def _mix(policy: tf.Tensor, expert: tf.Tensor) -> tf.Tensor:
        weight = tf.random_uniform(tf.shape(policy))
        return weight * policy + (1.0 - weight) * expert

    # ------------------------------------------------------------------ data
    def _load_expert(self, path: str) -> None:
        try:
            demo = load_demonstration(path, self.brain)
        except DemonstrationError as exc:
            raise TrainerConfigError(f"reward signal 'gail', key 'demo_path': {exc}") from None
        states, cameras = demo.brain_inputs(self.brain)
        samples = np.flatnonzero(~demo.dones[:-1])  # step i, with step i+1's done
        if not samples.size:
            raise TrainerConfigError(f"reward signal 'gail', key 'demo_path': {path} holds no step that does not end "
                                     "an episode, so there is nothing to imitate. Record longer episodes.")
        self.expert = {"state": states[samples], "observations": [c[samples] for c in cameras],
                       "actions": self._action_vector(demo.actions[samples]), "raw_actions": demo.actions[samples],
                       "dones": demo.dones[samples + 1].astype(np.float32)[:, None]}

    def _action_vector(self, actions: np.ndarray) -> np.ndarray:
        """Continuous actions as they are; discrete ones one-hot per branch, concatenated."""
        actions = np.asarray(actions)
        if self.continuous:
            return actions.astype(np.float32).reshape(len(actions), -1)
        actions = actions.reshape(len(actions), -1).astype(np.int64)
        return np.concatenate([np.eye(size, dtype=np.float32)[actions[:, k]] for k, size in enumerate(self.branches)],
                              axis=1)

    def _policy_feed(self, fields: Mapping[str, np.ndarray]) -> Dict[Any, Any]:
        feed = self.inputs.feed(fields, with_next=False)
        if self.use_actions:
            feed[self.actions] = self._action_vector(fields["actions"])
            feed[self.dones] = np.asarray(fields["signal_done"], np.float32).reshape(-1, 1)
        return feed

    def evaluate(self, sess, fields: Mapping[str, np.ndarray], training: bool) -> np.ndarray:
        return sess.run(self.reward, self._policy_feed(fields)).astype(np.float64)

    def update_feed(self, fields: Mapping[str, np.ndarray]) -> Dict[Any, Any]:
        """The agent's minibatch and an expert minibatch of the same size, drawn from the recording."""
        feed = self._policy_feed(fields)
        n = len(fields["actions"])
        rows = self.rng.integers(0, len(self.expert["actions"]), n)
        if self.expert_state is not None:
            feed[self.expert_state] = self.expert["state"][rows]
        for placeholder, camera in zip(self.expert_observations, self.expert["observations"]):
            feed[placeholder] = camera[rows]
        if self.use_actions:
            feed[self.expert_actions] = self.expert["actions"][rows]
            feed[self.expert_dones] = self.expert["dones"][rows]
        feed[self.training] = True
        return feed

    def expert_feed(self, n: Optional[int] = None) -> Dict[str, Any]:
        """``n`` expert samples (all when None) as the agent's fields would carry them (for tests)."""
        rows = np.arange(len(self.expert["actions"]))[:n]
        fields: Dict[str, Any] = {"actions": self.expert["raw_actions"][rows],
                                  "signal_done": self.expert["dones"][rows, 0]}
        if self.expert_state is not None:
            fields["signal_state"] = self.expert["state"][rows]
        for k, camera in enumerate(self.expert["observations"]):
            fields[f"signal_obs{k}"] = camera[rows]
        return fields


__all__ = ["GAILSignal"]
