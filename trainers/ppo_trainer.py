"""Proximal Policy Optimisation for one External brain.

Data flow, per environment step (see ``trainers.trainer`` for the loop that calls these):

1. ``take_action``: one ``sess.run`` acts for every agent of the brain (and, when training with
   ``normalize``, folds their states into the running normaliser in the same run).
2. ``add_experiences``: each agent present in both infos gets one transition in its own buffer.
   Agents whose ``info.local_done`` is set are *not* skipped: in API-2 the state that comes with
   ``done`` is already the first observation of the next episode, so it starts a valid
   transition (the original dropped it, ``reference/api2-facts.md`` §11.16).
3. ``process_experiences``: an agent that is done, or whose trajectory reached ``time_horizon``,
   gets GAE advantages (bootstrapped with V of its current state unless done; one batched
   ``sess.run`` for all such agents) and its trajectory moves to the update buffer.
4. ``update_model`` once the update buffer holds ``buffer_size`` steps: ``num_epoch`` shuffled
   passes over minibatches that together use every sample (whole sequences when recurrent).

What the update sees is exactly what the policy saw when acting: the stored action, its stored
log-probability, the stored value, the stored normalised state, and for recurrent brains the
stored memory at the start of each sequence. So the first minibatch of each update has ratio 1.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from trainers.buffer import Buffer
from trainers.ppo_models import create_agent_model, validate_memory_size
from trainers.tf_utils import tf
from trainers.trainer import (
    COMMON_HYPERPARAMETERS,
    Param,
    Trainer,
    TrainerConfigError,
    UnityTrainerException,
    non_negative,
    positive,
    unit_interval,
)
from unityagents.brain import BrainInfo, BrainParameters


def discount_rewards(
    rewards: Sequence[float],
    gamma: float = 0.99,
    value_next: float = 0.0,
    dones: Optional[Sequence[bool]] = None,
) -> np.ndarray:
    """Discounted returns ``G_t = r_t + gamma * G_{t+1}``, with ``G_T = value_next``.

    :param dones: optional per-step flags; ``dones[t]`` means step ``t`` ended an episode, so
        nothing after it (neither later rewards nor ``value_next``) flows back into ``G_t``.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    returns = np.empty_like(rewards)
    running = float(value_next)
    for t in range(len(rewards) - 1, -1, -1):
        if dones is not None and dones[t]:
            running = 0.0
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def get_gae(
    rewards: Sequence[float],
    value_estimates: Sequence[float],
    value_next: float = 0.0,
    gamma: float = 0.99,
    lambd: float = 0.95,
    dones: Optional[Sequence[bool]] = None,
) -> np.ndarray:
    """Generalised advantage estimates (Schulman et al. 2016).

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` with ``V_T = value_next`` (0 after a terminal step)
    and ``A_t = sum_k (gamma * lambd)^k delta_{t+k}``, cut at episode ends given by ``dones``.
    ``A + V`` are the TD(lambda) returns the value function regresses to.
    """
    values = np.asarray(value_estimates, dtype=np.float64)
    next_values = np.append(values[1:], float(value_next))
    if dones is not None:
        next_values[np.asarray(dones, dtype=bool)] = 0.0
    deltas = np.asarray(rewards, dtype=np.float64) + gamma * next_values - values
    return discount_rewards(deltas, gamma * lambd, 0.0, dones)


def _one_of(*options: str):
    return (lambda x: x in options, " or ".join(repr(o) for o in options))


PPO_HYPERPARAMETERS: Dict[str, Param] = {
    **COMMON_HYPERPARAMETERS,
    "batch_size": Param(int, 1024, check=(positive, "> 0"), doc="samples per minibatch (sequences x sequence_length when recurrent)"),
    "beta": Param(float, 5.0e-3, check=(non_negative, ">= 0"), doc="entropy bonus coefficient, for discrete and continuous actions"),
    "buffer_size": Param(int, 10240, check=(positive, "> 0"), doc="agent steps collected before each update"),
    "epsilon": Param(float, 0.2, check=(lambda x: 0.0 < x < 1.0, "in (0, 1)"), doc="PPO clip range of the ratio (and of the value when clip_value)"),
    "gamma": Param(float, 0.99, check=(unit_interval, "in [0, 1]"), doc="discount factor"),
    "hidden_units": Param(int, 128, check=(positive, "> 0"), doc="units per hidden layer of the policy and value MLPs"),
    "lambd": Param(float, 0.95, check=(unit_interval, "in [0, 1]"), doc="GAE lambda: bias (0) versus variance (1) of the advantages"),
    "learning_rate": Param(float, 3.0e-4, check=(positive, "> 0"), doc="Adam learning rate at step 0"),
    "learning_rate_schedule": Param(str, "linear", check=_one_of("linear", "constant"), doc="'linear' decays the learning rate to 0 at max_steps"),
    "normalize": Param(bool, True, doc="normalise continuous states by running mean and variance"),
    "num_epoch": Param(int, 3, check=(positive, "> 0"), doc="passes over the update buffer per update"),
    "num_layers": Param(int, 2, check=(non_negative, ">= 0"), doc="hidden layers of the policy and value MLPs"),
    "time_horizon": Param(int, 128, check=(positive, "> 0"), doc="steps after which an unfinished trajectory is cut and bootstrapped"),
    "sequence_length": Param(int, 32, check=(positive, "> 0"), doc="steps per training sequence when use_recurrent"),
    "use_recurrent": Param(bool, False, doc="LSTM whose state round-trips through the brain's memory (memorySize: even, > 0)"),
    "max_grad_norm": Param(float, 0.5, check=(positive, "> 0"), doc="global norm the gradients are clipped to"),
    "vf_coef": Param(float, 0.5, check=(non_negative, ">= 0"), doc="weight of the value loss"),
    "clip_value": Param(bool, True, doc="clip the value loss around the old value predictions (PPO2)"),
}


class PPOTrainer(Trainer):
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
        self.hp = {key: trainer_parameters.get(key, param.default) for key, param in self.hyperparameters.items()}
        self.use_recurrent = bool(self.hp["use_recurrent"])
        self.sequence_length = int(self.hp["sequence_length"]) if self.use_recurrent else 1
        self.is_continuous = self.brain.action_space_type == "continuous"

        scope = self.graph_scope
        with sess.graph.as_default(), (tf.variable_scope(scope) if scope else contextlib.nullcontext()):
            self.model = create_agent_model(
                self.brain,
                lr=float(self.hp["learning_rate"]),
                h_size=int(self.hp["hidden_units"]),
                epsilon=float(self.hp["epsilon"]),
                beta=float(self.hp["beta"]),
                normalize=bool(self.hp["normalize"]),
                use_recurrent=self.use_recurrent,
                num_layers=int(self.hp["num_layers"]),
                vf_coef=float(self.hp["vf_coef"]),
                max_grad_norm=float(self.hp["max_grad_norm"]),
                clip_value=bool(self.hp["clip_value"]),
            )
        self.training_buffer = Buffer()
        self.cumulative_rewards: Dict[Any, float] = {}
        self.episode_steps: Dict[Any, int] = {}
        # The fields each transition carries to the update buffer ('rewards' stays behind).
        self._update_keys = (
            (["states"] if self.model.state_in is not None else [])
            + [f"observations{k}" for k in range(len(self.model.observation_in))]
            + (["memory"] if self.use_recurrent else [])
            + ["actions", "log_probs", "value_estimates", "advantages", "discounted_returns", "masks"]
        )

    # ------------------------------------------------------------------ configuration checks
    @classmethod
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> None:
        """Settings that are each valid but cannot work together."""
        if params["batch_size"] > params["buffer_size"]:
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'batch_size': {params['batch_size']} is larger than buffer_size "
                f"{params['buffer_size']}, so no minibatch could ever be filled. Lower batch_size or raise buffer_size.")
        if params["use_recurrent"] and params["sequence_length"] > params["batch_size"]:
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'sequence_length': {params['sequence_length']} is longer than "
                f"batch_size {params['batch_size']}; a minibatch must hold at least one whole sequence.")

    @classmethod
    def check_environment(cls, brain_name: str, params: Dict[str, Any],
                          brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        """A recurrent brain needs a usable memorySize from the scene."""
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

    def take_action(self, all_info: Mapping[str, BrainInfo]) -> Tuple[np.ndarray, Optional[np.ndarray], np.ndarray, Any]:
        """Act for every agent of the brain with one ``sess.run``.

        Continuous actions get fresh N(0, 1) noise while training and act with the mean
        otherwise (as Unity's Internal brain does with ``epsilon`` left at 0).

        :return: ``(actions, memories or None, values, outputs)``; ``outputs`` carries what
            ``add_experiences`` stores (actions, their log-probs, values, normalised states, the
            memories the policy started from).
        """
        info = all_info[self.brain_name]
        n = len(info.agents)
        if n == 0:
            empty = np.zeros((0, self.brain.action_width), dtype=np.float32)
            return empty, (np.zeros((0, self.model.m_size), np.float32) if self.use_recurrent else None), np.zeros(0), None
        m = self.model
        feed = self._input_feed(info)
        if self.is_continuous and self.is_training:
            feed[m.epsilon] = self.rng.standard_normal((n, self.brain.action_space_size)).astype(np.float32)
        fetches = {"actions": m.output, "log_probs": m.log_prob, "values": m.value, "entropy": m.entropy}
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
        outputs = {
            "actions": out["actions"],
            "log_probs": out["log_probs"],
            "values": values,
            "states": out.get("states", info.states),
            "memories": feed[m.memory_in] if self.use_recurrent else None,
        }
        return out["actions"], out.get("memory_out"), values, outputs

    # ------------------------------------------------------------------ collecting
    def add_experiences(self, info: Mapping[str, BrainInfo], next_info: Mapping[str, BrainInfo], outputs) -> None:
        """Store one transition for each agent of ``info`` that is still present in ``next_info``.

        The reward and done of the transition are the ones ``next_info`` reports for the action
        taken from ``info``'s state.
        """
        if outputs is None:
            return
        current, following = info[self.brain_name], next_info[self.brain_name]
        next_index = {agent: j for j, agent in enumerate(following.agents)}
        actions = outputs["actions"]
        for i, agent in enumerate(current.agents):
            j = next_index.get(agent)
            if j is None:
                continue
            buffer = self.training_buffer[agent]
            if self.model.state_in is not None:
                buffer["states"].append(outputs["states"][i])
            for k, observation in enumerate(current.observations):
                buffer[f"observations{k}"].append(observation[i])
            if self.use_recurrent:
                buffer["memory"].append(outputs["memories"][i])
            buffer["actions"].append(actions[i] if self.is_continuous else actions[i, 0])
            buffer["log_probs"].append(outputs["log_probs"][i])
            buffer["value_estimates"].append(outputs["values"][i])
            reward = float(following.rewards[j])
            buffer["rewards"].append(reward)
            self.cumulative_rewards[agent] = self.cumulative_rewards.get(agent, 0.0) + reward
            self.episode_steps[agent] = self.episode_steps.get(agent, 0) + 1

    def process_experiences(self, info: Mapping[str, BrainInfo]) -> None:
        """Move finished (done) and long (``time_horizon``) trajectories to the update buffer."""
        current = info[self.brain_name]
        time_horizon = int(self.hp["time_horizon"])
        cut: List[int] = []
        for j, agent in enumerate(current.agents):
            length = len(self.training_buffer[agent]["actions"]) if agent in self.training_buffer else 0
            if current.local_done[j]:
                if length:
                    self._finish_trajectory(agent, 0.0)
                if agent in self.episode_steps:
                    self.add_stat("cumulative_reward", self.cumulative_rewards.pop(agent))
                    self.add_stat("episode_length", self.episode_steps.pop(agent))
            elif length >= time_horizon:
                cut.append(j)
        if cut:
            rows = np.asarray(cut)
            values = self.sess.run(self.model.value, self._input_feed(current, rows))[:, 0]
            for j, value in zip(cut, values):
                self._finish_trajectory(current.agents[j], float(value))

    def _finish_trajectory(self, agent: Any, value_next: float) -> None:
        """GAE for the agent's trajectory, then move it (as sequences if recurrent) to the update buffer."""
        buffer = self.training_buffer[agent]
        values = np.asarray(buffer["value_estimates"], dtype=np.float64)
        advantages = get_gae(
            buffer["rewards"], values, value_next, gamma=float(self.hp["gamma"]), lambd=float(self.hp["lambd"])
        )
        buffer["advantages"].set(advantages.astype(np.float32))
        buffer["discounted_returns"].set((advantages + values).astype(np.float32))
        buffer["masks"].set(np.ones(len(values), dtype=np.float32))
        self.training_buffer.append_update_buffer(
            agent, key_list=self._update_keys,
            training_length=self.sequence_length if self.use_recurrent else None,
        )
        buffer.reset_agent()

    def end_episode(self) -> None:
        """After a global reset: drop trajectories in progress (their continuation is gone)."""
        for buffer in self.training_buffer.values():
            buffer.reset_agent()
        self.cumulative_rewards.clear()
        self.episode_steps.clear()

    # ------------------------------------------------------------------ updating
    def update_buffer_steps(self) -> int:
        """Agent steps in the update buffer (padding included when recurrent)."""
        return len(self.training_buffer.update_buffer["actions"]) * self.sequence_length

    def is_ready_update(self) -> bool:
        return self.update_buffer_steps() >= int(self.hp["buffer_size"])

    def update_arrays(self) -> Dict[str, np.ndarray]:
        """The update buffer as one array per field (plus ``initial_memory`` when recurrent)."""
        update_buffer = self.training_buffer.update_buffer
        arrays = {key: np.asarray(update_buffer[key]) for key in self._update_keys}
        if self.use_recurrent:
            # Sequences are left-padded; each starts from the memory stored at its first real step.
            first_real = np.argmax(arrays["masks"] > 0, axis=1)
            arrays["initial_memory"] = arrays["memory"][np.arange(len(first_real)), first_real]
        return arrays

    def minibatch_feed(self, arrays: Mapping[str, np.ndarray], rows: np.ndarray, learning_rate: float) -> Dict[tf.Tensor, Any]:
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
        if self.use_recurrent:
            feed[m.memory_in] = arrays["initial_memory"][rows]
        return feed

    def update_model(self) -> None:
        """``num_epoch`` shuffled passes over the update buffer, then empty it."""
        m = self.model
        arrays = self.update_arrays()
        n = len(arrays["actions"])
        per_batch = max(int(self.hp["batch_size"]) // self.sequence_length, 1)
        n_batches = max(math.ceil(n / per_batch), 1)
        learning_rate = self.current_learning_rate()
        fetches = [m.policy_loss, m.value_loss, m.mean_entropy, m.approx_kl, m.clip_fraction, m.update_batch]
        metrics = []
        for _ in range(int(self.hp["num_epoch"])):
            for rows in np.array_split(self.rng.permutation(n), n_batches):
                metrics.append(self.sess.run(fetches, self.minibatch_feed(arrays, rows, learning_rate))[:-1])
        for key, value in zip(("policy_loss", "value_loss", "policy_entropy", "approx_kl", "clip_fraction"), np.mean(metrics, axis=0)):
            self.add_stat(key, value)
        self.add_stat("learning_rate", learning_rate)
        self.training_buffer.reset_update_buffer()

    # ------------------------------------------------------------------ export
    def export_nodes(self) -> List[str]:
        nodes = ["action", "value_estimate", "action_probs"]
        return nodes + (["recurrent_out"] if self.use_recurrent else [])
