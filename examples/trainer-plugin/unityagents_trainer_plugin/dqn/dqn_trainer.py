"""DQN as a plugin trainer on ``OffPolicyTrainer``: replay, target network, epsilon-greedy.

The base stores every transition in the replay buffer, decides when to learn (warm-up,
``train_every``, ``gradient_steps``) and runs the target-network updates; this trainer builds
the Q-networks, explores epsilon-greedily with a linear schedule, and takes one Huber-loss
gradient step per ``update`` call. Discrete actions only: Q-learning needs ``argmax_a Q``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

from trainers.tf_utils import tf
from trainers.trainer.base import (
    Param,
    TrainerConfigError,
    UnityTrainerException,
    discount_param,
    learning_rate_param,
    max_grad_norm_param,
    network_params,
    positive_fraction,
    unit_interval,
)
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.off_policy import OFF_POLICY_HYPERPARAMETERS, OffPolicyTrainer
from trainers.trainer.rl_trainer import linear_schedule
from trainers.trainer.trajectory import PolicyOutput
from unityagents.brain import BrainParameters

from .dqn_model import DQNModel

DQN_HYPERPARAMETERS: Dict[str, Param] = {
    **OFF_POLICY_HYPERPARAMETERS,
    "gamma": discount_param(),
    "learning_rate": learning_rate_param(1.0e-3, "Adam learning rate"),
    **network_params(64, "the Q-network"),
    "exploration_initial_eps": Param(float, 1.0, check=(unit_interval, "in [0, 1]"),
                                     doc="probability of a random action at step 0"),
    "exploration_final_eps": Param(float, 0.05, check=(unit_interval, "in [0, 1]"),
                                   doc="probability of a random action after the schedule"),
    "exploration_fraction": Param(float, 0.1, check=(positive_fraction, "in (0, 1]"),
                                  doc="fraction of max_steps over which epsilon decays linearly"),
    "exploration_schedule": Param(str, "linear", check=(lambda x: x in ("linear", "constant"),
                                                         "'linear' or 'constant'"),
                                  doc="'linear' decays epsilon over exploration_fraction of max_steps; 'constant' "
                                      "keeps exploration_initial_eps"),
    "learning_rate_schedule": Param(str, "constant", check=(lambda x: x in ("linear", "constant"),
                                                           "'linear' or 'constant'"),
                                    doc="'linear' decays the learning rate to 0 at max_steps"),
    "steps_per_update": Param(float, None, check=(lambda x: x > 0, "> 0"),
                              doc="agent steps per gradient step (Release 22's name); when given it sets the "
                                  "ratio instead of train_every and gradient_steps"),
    "save_replay_buffer": Param(bool, False, check=(lambda x: not x, "false (the replay buffer is not saved with "
                                                                     "checkpoints; a resumed run refills it)"),
                                doc="must stay false: a resumed run starts with an empty replay buffer"),
    "double_dqn": Param(bool, True,
                        doc="pick the next action with the online network, evaluate it with the target (double DQN)"),
    "max_grad_norm": max_grad_norm_param(10.0),
}


class DQNTrainer(OffPolicyTrainer):
    """DQN for one brain with discrete actions (discrete or continuous states, cameras)."""

    trainer_type = "dqn"
    hyperparameters = DQN_HYPERPARAMETERS

    @classmethod
    def check_environment(cls, brain_name: str, params: Dict[str, Any],
                          brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        """Refuse a continuous-action brain before the run starts."""
        brain = brains[brain_name]
        if brain.action_space_type != "discrete":
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'trainer': the dqn trainer needs discrete actions, but the brain's "
                f"action space is {brain.action_space_type} ({brain.action_space_size} values). "
                "Use an actor-critic trainer (trainer: ppo or trainer: a2c) for continuous actions.")

    def setup(self) -> None:
        super().setup()
        if self.is_continuous:
            raise UnityTrainerException(
                f"DQNTrainer needs a brain with discrete actions, but '{self.brain_name}' has continuous actions "
                f"({self.brain.action_space_size} values). Use PPOTrainer or A2CTrainer instead.")
        with self.build_scope():
            self.model = DQNModel(
                self.brain,
                h_size=self.settings.hidden_units,
                num_layers=self.settings.num_layers,
                learning_rate=self.settings.learning_rate,
                gamma=self.settings.gamma,
                double_dqn=self.settings.double_dqn,
                max_grad_norm=self.settings.max_grad_norm,
            )
            self.create_target_updates(self.model.online_variables, self.model.target_variables)

    def update_ratio(self) -> Tuple[int, int]:
        """``steps_per_update`` when given: one gradient step per that many agent steps (several per step below 1)."""
        ratio = self.settings.steps_per_update
        if ratio is None:
            return super().update_ratio()
        return (max(int(round(ratio)), 1), 1) if ratio >= 1 else (1, max(int(round(1 / ratio)), 1))

    def current_learning_rate(self) -> float:
        """``learning_rate``, decayed linearly to 0 at max_steps with ``learning_rate_schedule: linear``."""
        if self.settings.learning_rate_schedule == "constant":
            return self.settings.learning_rate
        return max(linear_schedule(self.settings.learning_rate, 0.0, self.step, self.get_max_steps), 1e-10)

    def exploration_epsilon(self) -> float:
        """The probability of a random action at the current agent step (``exploration_schedule``)."""
        if self.settings.exploration_schedule == "constant":
            return self.settings.exploration_initial_eps
        return linear_schedule(self.settings.exploration_initial_eps, self.settings.exploration_final_eps,
                               self.step, self.settings.exploration_fraction * self.get_max_steps)

    def _feed(self, inputs: Mapping[str, np.ndarray], prefix: str = "") -> Dict[tf.Tensor, Any]:
        """Feed ``states`` / ``observations<k>`` (or their ``next_`` versions) to the matching placeholders."""
        m = self.model
        if prefix:
            return self.observation_feed(inputs, m.next_state, m.next_observations, prefix)
        return self.observation_feed(inputs, m.state, m.observations)

    def act(self, info: BrainInfo) -> PolicyOutput:
        """Greedy actions from the Q-network; while training, each is replaced by a random one
        with probability ``exploration_epsilon()``."""
        n = len(info.agents)
        feed = self._feed(self.observation_fields(info))
        feed[self.model.batch_size] = n
        greedy, values = self.sess.run([self.model.output, self.model.value], feed)
        actions = greedy.copy()
        if self.is_training:
            epsilon = self.exploration_epsilon()
            explore = self.rng.random(n) < epsilon
            actions[explore, 0] = self.rng.integers(0, self.brain.action_space_size, int(explore.sum()))
            self.add_stat("epsilon", epsilon)
        self.add_stat("q_value", float(np.mean(values)))
        return PolicyOutput(actions, {"actions": actions[:, 0]}, values=values[:, 0])

    def update(self, batch: Dict[str, np.ndarray]) -> None:
        """One Huber-loss gradient step on a sampled minibatch."""
        m = self.model
        feed = {**self._feed(batch), **self._feed(batch, "next_"),
                m.taken_actions: batch["actions"], m.rewards: batch["rewards"], m.dones: batch["dones"]}
        if self.settings.learning_rate_schedule != "constant":
            feed[m.learning_rate] = self.current_learning_rate()
        loss, _ = self.sess.run([m.loss, m.update_batch], feed)
        self.add_stat("q_loss", loss)

    def export_nodes(self) -> List[str]:
        return ["action", "value_estimate"]
