"""A2C: synchronous advantage actor-critic, as a plugin trainer on ``OnPolicyTrainer``.

The controller's collector keeps one trajectory per agent and cuts it every ``time_horizon``
steps (or at a done), and the base moves each to the update buffer; this trainer computes
n-step returns (``lambd: 1``, n = ``time_horizon``) or GAE (``lambd`` < 1) and takes **one**
gradient step on every ``buffer_size`` collected steps, then throws them away. With 12 agents,
``time_horizon: 8`` and ``buffer_size: 96`` that is the classic A2C batch: every agent's last
8 steps.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Mapping

import numpy as np

from trainers.buffer import AgentBuffer
from trainers.returns import add_gae_fields
from trainers.stopping import stop_requested
from trainers.tf_utils import tf
from trainers.trainer.base import (
    Param,
    discount_param,
    learning_rate_param,
    max_grad_norm_param,
    network_params,
    non_negative,
    positive,
    unit_interval,
)
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.on_policy import ON_POLICY_HYPERPARAMETERS, OnPolicyTrainer
from trainers.trainer.rl_trainer import linear_schedule
from trainers.trainer.trajectory import PolicyOutput

from .a2c_model import A2CModel

A2C_HYPERPARAMETERS: Dict[str, Param] = {
    **ON_POLICY_HYPERPARAMETERS,
    # The base's keys with A2C's defaults: short trajectories, one small batch per update.
    "buffer_size": replace(ON_POLICY_HYPERPARAMETERS["buffer_size"], default=96,
                           doc="agent steps collected for each gradient step"),
    "time_horizon": replace(ON_POLICY_HYPERPARAMETERS["time_horizon"], default=8,
                            doc="n of the n-step returns: steps after which a trajectory is cut and bootstrapped"),
    "gamma": discount_param(),
    "lambd": Param(float, 1.0, check=(unit_interval, "in [0, 1]"),
                   doc="GAE lambda; 1 gives the plain n-step returns of A2C"),
    "learning_rate": learning_rate_param(7.0e-4, "optimiser learning rate"),
    "batch_size": Param(int, None, check=(positive, "> 0"),
                        doc="samples per gradient step (the update's steps split into that many or more each); "
                            "unset, or buffer_size: the whole buffer in one step (classic A2C)"),
    "num_epoch": Param(int, 1, check=(positive, "> 0"), doc="passes over the collected steps per update"),
    "learning_rate_schedule": Param(str, "constant", check=(lambda x: x in ("linear", "constant"),
                                                           "'linear' or 'constant'"),
                                    doc="'linear' decays the learning rate to 0 at max_steps"),
    "optimizer": Param(str, "rmsprop", check=(lambda x: x in ("rmsprop", "adam"), "'rmsprop' or 'adam'"),
                       doc="'rmsprop' (decay 0.99, as in the A3C paper) or 'adam'"),
    "beta": Param(float, 0.0, check=(non_negative, ">= 0"), doc="entropy bonus coefficient"),
    "vf_coef": Param(float, 0.5, check=(non_negative, ">= 0"), doc="weight of the value loss"),
    "max_grad_norm": max_grad_norm_param(0.5),
    **network_params(64, "the policy and value MLPs"),
    "normalize": Param(bool, True, doc="normalise continuous states by running mean and variance"),
    "normalize_advantages": Param(bool, False, doc="standardise the advantages of each batch"),
}


class A2CTrainer(OnPolicyTrainer):
    """A2C for one brain: continuous (Gaussian) or discrete (categorical) actions, states and cameras."""

    trainer_type = "a2c"
    hyperparameters = A2C_HYPERPARAMETERS

    def setup(self) -> None:
        super().setup()
        with self.build_scope():
            self.model = A2CModel(
                self.brain,
                h_size=self.settings.hidden_units,
                num_layers=self.settings.num_layers,
                normalize=self.settings.normalize,
                learning_rate=self.settings.learning_rate,
                optimizer=self.settings.optimizer,
                beta=self.settings.beta,
                vf_coef=self.settings.vf_coef,
                max_grad_norm=self.settings.max_grad_norm,
                normalize_advantages=self.settings.normalize_advantages,
            )
        inputs = self.model.inputs
        self.update_fields = (
            (["states"] if inputs.state is not None else [])
            + [f"observations{k}" for k in range(len(inputs.observations))]
            + ["actions", "value_estimates", "advantages", "discounted_returns"]
        )

    def _feed(self, info: BrainInfo, rows: np.ndarray) -> Dict[tf.Tensor, Any]:
        inputs = self.model.inputs
        feed: Dict[tf.Tensor, Any] = {self.model.batch_size: len(rows)}
        if inputs.state is not None:
            feed[inputs.state] = np.asarray(info.states)[rows]
        for placeholder, observation in zip(inputs.observations, info.observations):
            feed[placeholder] = np.asarray(observation)[rows]
        return feed

    def act(self, info: BrainInfo) -> PolicyOutput:
        """Sample from the policy while training (the mean for continuous actions otherwise)."""
        n = len(info.agents)
        m, inputs = self.model, self.model.inputs
        feed = self._feed(info, np.arange(n))
        if self.is_continuous and self.is_training:
            feed[m.epsilon] = self.rng.standard_normal((n, self.brain.action_space_size)).astype(np.float32)
        fetches: Dict[str, Any] = {"actions": m.output, "values": m.value, "entropy": m.entropy}
        if inputs.vector_in is not None:
            fetches["states"] = inputs.vector_in
        if inputs.update_normalization is not None and self.is_training:
            fetches["update_normalization"] = inputs.update_normalization
        out = self.sess.run(fetches, feed)
        values = out["values"][:, 0]
        self.add_stat("value_estimate", float(np.mean(values)))
        self.add_stat("entropy", float(np.mean(out["entropy"])))
        actions = out["actions"]
        fields = {"actions": actions if self.is_continuous else actions[:, 0], "value_estimates": values}
        if inputs.state is not None:
            fields["states"] = out["states"]  # what the networks saw (normalised), replayed by the update
        for k, observation in enumerate(info.observations):
            fields[f"observations{k}"] = observation
        return PolicyOutput(actions, fields, values=values)

    def bootstrap_values(self, info: BrainInfo, rows: np.ndarray) -> np.ndarray:
        """V of the current state of the agents whose trajectory was cut at ``time_horizon``."""
        return self.sess.run(self.model.value, self._feed(info, rows))[:, 0]

    def process_trajectory(self, trajectory: AgentBuffer, value_next: float) -> None:
        """n-step returns (``lambd`` 1) or GAE, and the advantages ``returns - V``."""
        add_gae_fields(trajectory, value_next, gamma=self.settings.gamma, lambd=self.settings.lambd)

    def update_feed(self, batch: Mapping[str, np.ndarray]) -> Dict[tf.Tensor, Any]:
        """The feed of one update; states are fed to ``vector_in``, exactly what the policy saw."""
        m, inputs = self.model, self.model.inputs
        feed: Dict[tf.Tensor, Any] = {
            m.batch_size: len(batch["actions"]),
            m.taken_actions: batch["actions"],
            m.advantages: batch["advantages"],
            m.returns: batch["discounted_returns"],
        }
        if inputs.state is not None:
            feed[inputs.vector_in] = batch["states"]
        for k, placeholder in enumerate(inputs.observations):
            feed[placeholder] = batch[f"observations{k}"]
        return feed

    def current_learning_rate(self) -> float:
        """``learning_rate``, decayed linearly to 0 at max_steps with ``learning_rate_schedule: linear``."""
        if self.settings.learning_rate_schedule == "constant":
            return self.settings.learning_rate
        return max(linear_schedule(self.settings.learning_rate, 0.0, self.step, self.get_max_steps), 1e-10)

    def update(self, batch: Dict[str, np.ndarray]) -> None:
        """One gradient step on the whole batch (A2C uses each sample once), or, with ``batch_size`` below
        it, ``num_epoch`` shuffled passes of minibatches of about ``batch_size`` that use every sample."""
        m = self.model
        n = len(batch["actions"])
        n_batches = max(n // self.settings.batch_size, 1) if self.settings.batch_size else 1
        fetches = [m.policy_loss, m.value_loss, m.mean_entropy, m.update_batch]
        metrics = []
        for _ in range(self.settings.num_epoch):
            parts = np.array_split(self.rng.permutation(n), n_batches) if n_batches > 1 else [None]
            for rows in parts:
                if metrics and stop_requested():  # the run stops: the steps taken so far are the update
                    break
                feed = self.update_feed(batch if rows is None else {k: v[rows] for k, v in batch.items()})
                if self.settings.learning_rate_schedule != "constant":
                    feed[m.learning_rate] = self.current_learning_rate()
                metrics.append(self.sess.run(fetches, feed)[:3])
        for key, value in zip(("policy_loss", "value_loss", "policy_entropy"), np.mean(metrics, axis=0)):
            self.add_stat(key, value)

    def export_nodes(self) -> List[str]:
        return ["action", "value_estimate", "action_probs"]
