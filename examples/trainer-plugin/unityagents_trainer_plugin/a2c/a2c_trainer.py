"""A2C: synchronous advantage actor-critic, as a plugin trainer on ``OnPolicyTrainer``.

The hyperparameters are the seed plugin's (ML-Agents' ``mlagents_trainer_plugin.a2c``, Release
22's on-policy keys), with its defaults, so its ``a2c_3DBall.yaml`` trains unchanged. The
controller's collector keeps one trajectory per agent and cuts it every ``time_horizon`` steps
(or at a done), and the base moves each to the update buffer; this trainer computes the critic's
values of the whole trajectory with the current weights, then GAE (``lambd``; 1 gives n-step
returns) and the returns ``A + V``. Once ``buffer_size`` steps are collected, the advantages
are standardised over them and the shuffled buffer gives one gradient step per whole
``batch_size`` of it (what is left over is dropped), once: each sample is used at most once.
``learning_rate`` and ``beta`` decay linearly to 1e-10 at ``max_steps`` unless their schedule
is ``constant``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Mapping

import numpy as np

from trainers.buffer import AgentBuffer
from trainers.encoders import VIS_ENCODE_TYPE_PARAM
from trainers.returns import add_gae_fields
from trainers.stopping import stop_requested
from trainers.tf_utils import tf
from trainers.trainer.base import (
    Param,
    TrainerConfigError,
    check_batch_fits,
    discount_param,
    learning_rate_param,
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

#: The value a decayed ``learning_rate`` or ``beta`` reaches at ``max_steps`` (the seed's floor).
DECAY_FLOOR = 1e-10

_SCHEDULE = (lambda x: x in ("linear", "constant"), "'linear' or 'constant'")
_BASE = ON_POLICY_HYPERPARAMETERS
A2C_HYPERPARAMETERS: Dict[str, Param] = {
    **_BASE,
    # The seed's keys and defaults (Release 22's on-policy hyperparameters and the seed's A2CSettings).
    "buffer_size": replace(_BASE["buffer_size"], default=10240),
    "time_horizon": replace(_BASE["time_horizon"], default=64),
    "batch_size": Param(int, 1024, check=(positive, "> 0"),
                        doc="steps per gradient step: an update takes one step per whole batch_size of its "
                            "shuffled buffer and drops the rest"),
    "learning_rate": learning_rate_param(3.0e-4, "optimiser learning rate"),
    "learning_rate_schedule": Param(str, "linear", check=_SCHEDULE,
                                    doc="'linear' decays the learning rate to 1e-10 at max_steps"),
    "beta": Param(float, 5.0e-3, check=(non_negative, ">= 0"), doc="entropy bonus coefficient"),
    "beta_schedule": Param(str, "linear", check=_SCHEDULE, doc="'linear' decays beta to 1e-10 at max_steps"),
    "lambd": Param(float, 0.95, check=(unit_interval, "in [0, 1]"),
                   doc="GAE lambda; 1 gives the plain n-step returns"),
    "num_epoch": Param(int, 1, check=(positive, "> 0"), doc="passes over each update's steps: A2C makes one, and "
                                                           "refuses any other number"),
    "shared_critic": Param(bool, False, doc="the value head reads the policy's hidden layers instead of its own"),
    "gamma": discount_param(),
    **network_params(128, "the policy and the critic"),
    "normalize": Param(bool, False, doc="normalise continuous states by running mean and variance"),
    "vis_encode_type": VIS_ENCODE_TYPE_PARAM,
    # This example's own keys; their defaults are the seed's algorithm.
    "optimizer": Param(str, "adam", check=(lambda x: x in ("rmsprop", "adam"), "'rmsprop' or 'adam'"),
                       doc="'adam' or 'rmsprop' (decay 0.99, as in the A3C paper)"),
    "vf_coef": Param(float, 0.5, check=(non_negative, ">= 0"), doc="weight of the value loss"),
    "max_grad_norm": Param(float, None, check=(positive, "> 0"),
                           doc="global norm the gradients are clipped to; unset: not clipped"),
    "normalize_advantages": Param(bool, True, doc="standardise the advantages over each update's steps"),
}


class A2CTrainer(OnPolicyTrainer):
    """A2C for one brain: continuous (Gaussian) or discrete (categorical) actions, states and cameras."""

    trainer_type = "a2c"
    hyperparameters = A2C_HYPERPARAMETERS

    @classmethod
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> None:
        """One pass over each update's steps (the seed's rule); a batch that fits in the buffer."""
        if params["num_epoch"] != 1:
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'num_epoch': A2C uses each sample once, so it makes one pass over the "
                f"steps of an update, got {params['num_epoch']}. Set num_epoch: 1 (or use trainer: ppo for "
                "several passes).")
        check_batch_fits(brain_name, params, "an update would take no gradient step")

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
                shared_critic=self.settings.shared_critic,
                vis_encode_type=self.settings.vis_encode_type,
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
        """The critic's values of the trajectory's steps with the current weights, then GAE and the
        returns ``A + V``."""
        inputs = self.model.inputs
        feed: Dict[tf.Tensor, Any] = {}
        if inputs.state is not None:
            feed[inputs.vector_in] = np.asarray(trajectory["states"])
        for k, placeholder in enumerate(inputs.observations):
            feed[placeholder] = np.asarray(trajectory[f"observations{k}"])
        trajectory["value_estimates"].set(self.sess.run(self.model.value, feed)[:, 0])
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

    def decayed(self, value: float, schedule: str) -> float:
        """``value``, or with ``schedule`` 'linear' its linear decay to 1e-10 at max_steps."""
        if schedule == "constant":
            return value
        return linear_schedule(value, DECAY_FLOOR, self.step, self.get_max_steps)

    def current_learning_rate(self) -> float:
        """``learning_rate`` on its ``learning_rate_schedule`` at the current step."""
        return self.decayed(self.settings.learning_rate, self.settings.learning_rate_schedule)

    def update(self, batch: Dict[str, np.ndarray]) -> None:
        """One gradient step per whole ``batch_size`` of the shuffled steps (the rest is dropped), with
        the advantages standardised over all of them."""
        m = self.model
        n = len(batch["actions"])
        if self.settings.normalize_advantages:
            advantages = batch["advantages"]
            batch = {**batch, "advantages": (advantages - advantages.mean()) / (advantages.std() + 1e-10)}
        size = min(self.settings.batch_size, n)
        order = self.rng.permutation(n)
        rates = {m.learning_rate: self.current_learning_rate(),
                 m.beta: self.decayed(self.settings.beta, self.settings.beta_schedule)}
        fetches = [m.policy_loss, m.value_loss, m.mean_entropy, m.update_batch]
        metrics = []
        for start in range(0, n - size + 1, size):
            if metrics and stop_requested():  # the run stops: the steps taken so far are the update
                break
            rows = order[start:start + size]
            feed = {**self.update_feed({k: v[rows] for k, v in batch.items()}), **rates}
            metrics.append(self.sess.run(fetches, feed)[:3])
        for key, value in zip(("policy_loss", "value_loss", "policy_entropy"), np.mean(metrics, axis=0)):
            self.add_stat(key, value)
        self.add_stat("learning_rate", rates[m.learning_rate])

    def export_nodes(self) -> List[str]:
        return ["action", "value_estimate", "action_probs"]
