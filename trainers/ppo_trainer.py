"""Proximal Policy Optimisation for one External brain, on ``trainers.bases.OnPolicyTrainer``.

The base collects per-agent trajectories (keeping the transition that starts from a done agent's
post-reset state: Unity resets done agents before sending their state, and the original trainer's
"skip if done" dropped each new episode's first transition), cuts them at done or ``time_horizon``
and calls the hooks below; PPO adds what is specific to it:

1. ``act``: one ``sess.run`` acts for every agent of the brain (and, when training with
   ``normalize``, folds their states into the running normaliser in the same run);
2. ``bootstrap_values``: V of the current state of trajectories cut at ``time_horizon`` (one
   batched ``sess.run``); ``process_trajectory``: GAE advantages and TD(lambda) returns;
3. ``update`` once the update buffer holds ``buffer_size`` steps: ``num_epoch`` shuffled passes
   over minibatches that together use every sample (whole sequences when recurrent).

What the update sees is exactly what the policy saw when acting: the stored action, its stored
log-probability, the stored value, the stored normalised state, and for recurrent brains the
stored memory at the start of each sequence. So the first minibatch of each update has ratio 1.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from trainers import bc
from trainers.bases import (
    ON_POLICY_HYPERPARAMETERS,
    OnPolicyTrainer,
    PolicyOutput,
    add_gae_fields,
    discount_rewards,
    get_gae,
)
from trainers.buffer import AgentBuffer
from trainers.ppo_models import create_agent_model, validate_memory_size
from trainers.reward_signals import REWARD_SIGNALS_PARAM, validate_reward_signals
from trainers.tf_utils import tf
from trainers.trainer import (
    Param,
    TrainerConfigError,
    UnityTrainerException,
    non_negative,
    positive,
    unit_interval,
)
from unityagents.brain import BrainInfo, BrainParameters


def _one_of(*options: str):
    return (lambda x: x in options, " or ".join(repr(o) for o in options))


PPO_HYPERPARAMETERS: Dict[str, Param] = {
    **ON_POLICY_HYPERPARAMETERS,  # max_steps, summary_freq, trainer, buffer_size, time_horizon, ...
    "batch_size": Param(int, 1024, check=(positive, "> 0"),
                        doc="samples per minibatch (sequences x sequence_length when recurrent)"),
    "beta": Param(float, 5.0e-3, check=(non_negative, ">= 0"),
                  doc="entropy bonus coefficient, for discrete and continuous actions"),
    "epsilon": Param(float, 0.2, check=(lambda x: 0.0 < x < 1.0, "in (0, 1)"),
                     doc="PPO clip range of the ratio (and of the value when clip_value)"),
    "gamma": Param(float, 0.99, check=(unit_interval, "in [0, 1]"), doc="discount factor"),
    "hidden_units": Param(int, 128, check=(positive, "> 0"), doc="units per hidden layer of the policy and value MLPs"),
    "lambd": Param(float, 0.95, check=(unit_interval, "in [0, 1]"),
                   doc="GAE lambda: bias (0) versus variance (1) of the advantages"),
    "learning_rate": Param(float, 3.0e-4, check=(positive, "> 0"), doc="Adam learning rate at step 0"),
    "learning_rate_schedule": Param(str, "linear", check=_one_of("linear", "constant"),
                                    doc="'linear' decays the learning rate to 0 at max_steps"),
    "normalize": Param(bool, True, doc="normalise continuous states by running mean and variance"),
    "num_epoch": Param(int, 3, check=(positive, "> 0"), doc="passes over the update buffer per update"),
    "num_layers": Param(int, 2, check=(non_negative, ">= 0"), doc="hidden layers of the policy and value MLPs"),
    "sequence_length": Param(int, 32, check=(positive, "> 0"), doc="steps per training sequence when use_recurrent"),
    "use_recurrent": Param(bool, False,
                           doc="LSTM whose state round-trips through the brain's memory (memorySize: even, > 0)"),
    "max_grad_norm": Param(float, 0.5, check=(positive, "> 0"), doc="global norm the gradients are clipped to"),
    "vf_coef": Param(float, 0.5, check=(non_negative, ">= 0"), doc="weight of the value loss"),
    "clip_value": Param(bool, True, doc="clip the value loss around the old value predictions (PPO2)"),
    "reward_signals": REWARD_SIGNALS_PARAM,
    "behavioral_cloning": bc.BEHAVIORAL_CLONING_PARAM,
}


class PPOTrainer(OnPolicyTrainer):
    """PPO for one brain: discrete or continuous actions and states, cameras, optional LSTM."""

    trainer_type = "ppo"
    hyperparameters = PPO_HYPERPARAMETERS

    def __init__(
        self,
        sess,
        brains: Mapping[str, BrainParameters],
        brain_name: str,
        trainer_parameters: Dict[str, Any],
        training: bool,
        seed: int = 0,
    ):
        super().__init__(sess, brains, brain_name, trainer_parameters, training, seed)
        self.use_recurrent = bool(self.hp["use_recurrent"])
        self.sequence_length = int(self.hp["sequence_length"]) if self.use_recurrent else 1
        # Reward signals (trainers.reward_signals): one value head each, then their own networks.
        signals = self.reward_signal_names()
        with self.build_scope():
            self.model = create_agent_model(self.brain, **self.model_arguments(self.hp), reward_signals=signals)
            self.signal_names = self.build_reward_signals()
            self.bc = bc.create_behavioral_cloning(self)  # behavioral cloning hook (trainers/bc.py)
        self.memory_size = self.model.m_size
        # The fields each transition carries to the update buffer ('rewards' stays behind).
        self.update_fields = (
            (["states"] if self.model.state_in is not None else [])
            + [f"observations{k}" for k in range(len(self.model.observation_in))]
            + (["memory"] if self.use_recurrent else [])
            + ["actions", "log_probs", "value_estimates", "advantages", "discounted_returns", "masks"]
            + (["action_masks"] if getattr(self.model, "action_masks", None) is not None else [])
            + self.reward_signal_update_fields()
        )

    @staticmethod
    def model_arguments(params: Mapping[str, Any]) -> Dict[str, Any]:
        """``create_agent_model`` keyword arguments for these hyperparameters (missing keys: defaults).

        The ghost trainer builds its acting copy of a PPO brain with exactly these, so the two
        networks always have the same variables.
        """
        def hp(key: str) -> Any:
            return params.get(key, PPO_HYPERPARAMETERS[key].default)

        return dict(
            lr=float(hp("learning_rate")), h_size=int(hp("hidden_units")), epsilon=float(hp("epsilon")),
            beta=float(hp("beta")), normalize=bool(hp("normalize")), use_recurrent=bool(hp("use_recurrent")),
            num_layers=int(hp("num_layers")), vf_coef=float(hp("vf_coef")),
            max_grad_norm=float(hp("max_grad_norm")), clip_value=bool(hp("clip_value")),
        )

    # ------------------------------------------------------------------ configuration checks
    @classmethod
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> None:
        """Settings that are each valid but cannot work together; the nested reward_signals block."""
        params["reward_signals"] = validate_reward_signals(brain_name, params.get("reward_signals"))
        params["behavioral_cloning"] = bc.validate_behavioral_cloning(brain_name, params.get("behavioral_cloning"))
        if params["batch_size"] > params["buffer_size"]:
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'batch_size': {params['batch_size']} is larger than buffer_size "
                f"{params['buffer_size']}, so no minibatch could ever be filled. "
                "Lower batch_size or raise buffer_size.")
        if params["use_recurrent"] and params["sequence_length"] > params["batch_size"]:
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'sequence_length': {params['sequence_length']} is longer than "
                f"batch_size {params['batch_size']}; a minibatch must hold at least one whole sequence.")

    @classmethod
    def check_environment(cls, brain_name: str, params: Dict[str, Any],
                          brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        """A recurrent brain needs a usable memorySize from the scene; BC's and GAIL's demonstrations must fit it."""
        if brain_name in brains:  # behavioral cloning hook (trainers/bc.py)
            bc.check_demonstrations(brain_name, params, brains[brain_name])
        if params["use_recurrent"]:
            try:
                validate_memory_size(brains[brain_name], None)
            except UnityTrainerException as e:
                raise TrainerConfigError(f"brain '{brain_name}', key 'use_recurrent': {e}") from None

    # ------------------------------------------------------------------ schedules
    def current_learning_rate(self) -> float:
        """The learning rate at the current agent step (linear: decays to 0 at ``max_steps``)."""
        lr = float(self.hp["learning_rate"])
        if self.hp["learning_rate_schedule"] == "linear":
            lr *= max(1.0 - self.step / self.get_max_steps, 0.0)
        return lr

    # ------------------------------------------------------------------ acting
    def _input_feed(self, info: BrainInfo, rows: Optional[np.ndarray] = None) -> Dict[tf.Tensor, Any]:
        """Feed for acting / evaluating on the agents ``rows`` of ``info`` (all when None)."""
        m = self.model
        select = (lambda x: x) if rows is None else (lambda x: np.asarray(x)[rows])
        n = len(info.agents) if rows is None else len(rows)
        feed: Dict[tf.Tensor, Any] = {m.batch_size: n, m.sequence_length: 1}
        if m.state_in is not None:
            feed[m.state_in] = select(info.states)
        for placeholder, observation in zip(m.observation_in, info.observations):
            feed[placeholder] = select(observation)
        if self.use_recurrent:
            feed[m.memory_in] = select(self._memories(info))
        return feed

    def _memories(self, info: BrainInfo) -> np.ndarray:
        """``info.memories``, or zeros when the environment sent none (e.g. the very first step)."""
        n, size = len(info.agents), self.model.m_size
        memories = info.memories
        if memories is None or np.size(memories) == 0:
            return np.zeros((n, size), dtype=np.float32)
        memories = np.asarray(memories, dtype=np.float32)
        if memories.shape != (n, size):
            raise UnityTrainerException(
                f"Brain '{self.brain_name}' expected memories of shape {(n, size)} (agents x memorySize) but the "
                f"environment sent {memories.shape}."
            )
        return memories

    def act(self, info: BrainInfo) -> PolicyOutput:
        """Act for every agent of the brain with one ``sess.run``.

        Continuous actions get fresh N(0, 1) noise while training and act with the mean
        otherwise (as Unity's Internal brain does with ``epsilon`` left at 0). The stored fields
        are the actions, their log-probs, the values, the normalised states the networks saw,
        the camera frames and the memories the policy started from.
        """
        n = len(info.agents)
        m = self.model
        feed = self._input_feed(info)
        if self.is_continuous and self.is_training:
            feed[m.epsilon] = self.rng.standard_normal((n, self.brain.action_space_size)).astype(np.float32)
        action_masks = None
        if getattr(m, "action_masks", None) is not None:  # modern-protocol discrete brains
            action_masks = (np.ones((n, int(sum(self.brain.action_branches))), np.float32)
                            if info.action_masks is None else np.asarray(info.action_masks, np.float32))
            feed[m.action_masks] = action_masks
        fetches = {"actions": m.output, "log_probs": m.log_prob, "values": m.value, "entropy": m.entropy}
        for name in self.signal_names[1:]:
            fetches[f"values_{name}"] = m.values[name]
        if m.normalize:
            fetches["states"] = m.vector_in
            if self.is_training:
                fetches["update_normalization"] = m.update_normalization
        if self.use_recurrent:
            fetches["memory_out"] = m.memory_out
        out = self.sess.run(fetches, feed)

        values = out["values"][:, 0]
        self.add_stat("value_estimate", float(np.mean(values)))
        self.add_stat("entropy", float(np.mean(out["entropy"])))
        actions = out["actions"]
        fields = {
            "actions": actions if self.is_continuous or actions.shape[1] > 1 else actions[:, 0],
            "log_probs": out["log_probs"],
            "value_estimates": values,
        }
        for name in self.signal_names[1:]:
            fields[self.value_field(self.signal_names, name)] = out[f"values_{name}"][:, 0]
        if m.state_in is not None:
            fields["states"] = out.get("states", info.states)
        for k, observation in enumerate(info.observations):
            fields[f"observations{k}"] = observation
        if action_masks is not None:
            fields["action_masks"] = action_masks
        if self.use_recurrent:
            fields["memory"] = feed[m.memory_in]
        return PolicyOutput(actions, fields, memories=out.get("memory_out"), values=values)

    # ------------------------------------------------------------------ trajectories
    def bootstrap_values(self, info: BrainInfo, rows: np.ndarray):
        """V of the current state of the agents at ``rows`` (trajectories cut at time_horizon);
        ``{signal: V}`` when the brain has reward signals."""
        if self.signal_names:
            values = self.sess.run(self.model.values, self._input_feed(info, rows))
            return {name: v[:, 0] for name, v in values.items()}
        return self.sess.run(self.model.value, self._input_feed(info, rows))[:, 0]

    def process_trajectory(self, trajectory: AgentBuffer, value_next) -> None:
        """GAE advantages and TD(lambda) returns (``advantages + value_estimates``); with reward
        signals, per signal (each its gamma), the advantages summed."""
        if self.signal_names:
            self.add_reward_signal_fields(trajectory, value_next, lambd=float(self.hp["lambd"]))
            return
        add_gae_fields(trajectory, value_next, gamma=float(self.hp["gamma"]), lambd=float(self.hp["lambd"]))

    # ------------------------------------------------------------------ updating
    def update_arrays(self) -> Dict[str, np.ndarray]:
        """The update buffer as one array per field (plus ``initial_memory`` when recurrent)."""
        arrays = super().update_arrays()
        if self.use_recurrent:
            # Sequences are left-padded; each starts from the memory stored at its first real step.
            first_real = np.argmax(arrays["masks"] > 0, axis=1)
            arrays["initial_memory"] = arrays["memory"][np.arange(len(first_real)), first_real]
        return arrays

    def minibatch_feed(self, arrays: Mapping[str, np.ndarray], rows: np.ndarray,
                       learning_rate: float) -> Dict[tf.Tensor, Any]:
        """The feed of one minibatch: ``rows`` index samples (sequences when recurrent)."""
        m = self.model

        def take(key):
            batch = arrays[key][rows]
            return batch.reshape((-1,) + batch.shape[2:]) if self.use_recurrent else batch

        feed: Dict[tf.Tensor, Any] = {
            m.batch_size: len(rows),
            m.sequence_length: self.sequence_length,
            m.taken_actions: take("actions"),
            m.old_log_probs: take("log_probs"),
            m.old_value: take("value_estimates"),
            m.advantages: take("advantages"),
            m.returns: take("discounted_returns"),
            m.masks: take("masks"),
            m.learning_rate: learning_rate,
            m.clip_epsilon: float(self.hp["epsilon"]),
            m.beta: float(self.hp["beta"]),
        }
        if m.state_in is not None:
            # Normalised brains replay the normalised input they acted on, not today's statistics.
            feed[m.vector_in if m.normalize else m.state_in] = take("states")
        for k, placeholder in enumerate(m.observation_in):
            feed[placeholder] = take(f"observations{k}")
        if getattr(m, "action_masks", None) is not None:
            feed[m.action_masks] = take("action_masks")
        if self.use_recurrent:
            feed[m.memory_in] = arrays["initial_memory"][rows]
        for name in self.signal_names[1:]:
            feed[m.signal_returns[name]] = take(self.returns_field(self.signal_names, name))
            feed[m.signal_old_values[name]] = take(self.value_field(self.signal_names, name))
        return feed

    def update(self, batch: Dict[str, np.ndarray]) -> None:
        """``num_epoch`` shuffled passes over the update buffer (the base empties it afterwards)."""
        m = self.model
        n = len(batch["actions"])
        per_batch = max(int(self.hp["batch_size"]) // self.sequence_length, 1)
        n_batches = max(math.ceil(n / per_batch), 1)
        learning_rate = self.current_learning_rate()
        fetches = [m.policy_loss, m.value_loss, m.mean_entropy, m.approx_kl, m.clip_fraction, m.update_batch]
        metrics = []
        signal_metrics: List[List[float]] = []
        signal_names: List[str] = []
        signal_fields = [key for key in batch if key.startswith("signal_")] + ["actions", "masks"]
        for _ in range(int(self.hp["num_epoch"])):
            for rows in np.array_split(self.rng.permutation(n), n_batches):
                feed = self.minibatch_feed(batch, rows, learning_rate)
                if not self.reward_signals:
                    metrics.append(self.sess.run(fetches, feed)[:-1])
                    continue
                # The intrinsic networks train on the same minibatch, in the same session.run.
                flat = {key: self._flat(batch[key][rows]) for key in signal_fields}
                signal_feed, signal_ops, signal_names = self.reward_signal_update(flat)
                feed.update(signal_feed)
                out = self.sess.run(fetches + signal_ops, feed)
                metrics.append(out[:len(fetches) - 1])
                signal_metrics.append(out[len(fetches):len(fetches) + len(signal_names)])
        if signal_metrics and signal_names:
            for name, value in zip(signal_names, np.mean(signal_metrics, axis=0)):
                self.add_signal_stat(name, value)
        for key, value in zip(("policy_loss", "value_loss", "policy_entropy", "approx_kl", "clip_fraction"),
                              np.mean(metrics, axis=0)):
            self.add_stat(key, value)
        self.add_stat("learning_rate", learning_rate)

    def update_model(self) -> None:
        """The RL update, then behavioral cloning (hook: trainers/bc.py) when configured."""
        super().update_model()
        bc.update_behavioral_cloning(self)

    def _flat(self, batch: np.ndarray) -> np.ndarray:
        """``[sequences, T, ...] -> [sequences*T, ...]`` when recurrent; unchanged otherwise."""
        return batch.reshape((-1,) + batch.shape[2:]) if self.use_recurrent else batch

    # ------------------------------------------------------------------ export
    def export_nodes(self) -> List[str]:
        nodes = ["action", "value_estimate", "action_probs"]
        return nodes + (["recurrent_out"] if self.use_recurrent else [])


__all__ = ["PPOTrainer", "PPO_HYPERPARAMETERS", "discount_rewards", "get_gae"]
