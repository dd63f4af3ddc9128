"""DQN as a plugin trainer on ``OffPolicyTrainer``: replay, target network, epsilon-greedy.

The hyperparameters are the seed plugin's (ML-Agents' ``mlagents_trainer_plugin.dqn``, Release
22's off-policy keys), with its defaults, so its ``dqn_basic.yaml`` trains unchanged: one
gradient step per ``steps_per_update`` agent steps once the replay holds ``batch_size``
transitions, a soft target update (``tau``) after every gradient step, and epsilon decaying
linearly from ``exploration_initial_eps`` to ``exploration_final_eps`` over the first 20000
agent steps. The base stores every transition and decides when to learn; this trainer builds the
Q-networks, explores epsilon-greedily, and takes one Huber-loss gradient step per ``update``
call. Discrete actions only: Q-learning needs ``argmax_a Q``.

The next action of the target is chosen by the online network at the next state (double DQN);
``double_dqn: false`` takes the target network's own argmax.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

from trainers.encoders import VIS_ENCODE_TYPE_PARAM
from trainers.tf_utils import tf
from trainers.trainer.base import (
    Param,
    TrainerConfigError,
    UnityTrainerException,
    discount_param,
    learning_rate_param,
    network_params,
    non_negative,
    positive,
    positive_fraction,
    unit_interval,
)
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.off_policy import OFF_POLICY_HYPERPARAMETERS, OffPolicyTrainer
from trainers.trainer.rl_trainer import linear_schedule
from trainers.trainer.trajectory import PolicyOutput
from unityagents.brain import BrainParameters

from .dqn_model import DQNModel

#: Agent steps over which epsilon decays when ``exploration_fraction`` is not given (the seed's DQN).
EXPLORATION_STEPS = 20000

_BASE = OFF_POLICY_HYPERPARAMETERS
DQN_HYPERPARAMETERS: Dict[str, Param] = {
    **_BASE,
    # The base's keys with the seed's defaults (Release 22's off-policy hyperparameters).
    "batch_size": replace(_BASE["batch_size"], default=128),
    "buffer_size": replace(_BASE["buffer_size"], default=50000),
    "learning_starts": replace(_BASE["learning_starts"], default=0,
                               doc="transitions collected before the first update, beyond a first minibatch"),
    "train_every": replace(_BASE["train_every"], default=1),
    "tau": replace(_BASE["tau"], default=0.005),
    "target_update_interval": replace(
        _BASE["target_update_interval"], default=1,
        doc="gradient steps between target updates (1: after every gradient step, as the seed's optimizer, "
            "which declares this key but never reads it)"),
    "buffer_init_steps": Param(int, None, check=(non_negative, ">= 0"),
                               doc="Release 22's name of learning_starts; when given it sets the warm-up"),
    "steps_per_update": Param(float, None, check=(lambda x: x > 0, "> 0"),
                              doc="agent steps per gradient step (Release 22's name); when given it sets the "
                                  "ratio instead of train_every and gradient_steps"),
    "reward_signal_steps_per_update": Param(float, None, check=(lambda x: x > 0, "> 0"),
                                            doc="agent steps per update of a reward signal's model (Release 22's "
                                                "key; Release 22 fills it from steps_per_update); this DQN trains "
                                                "on the extrinsic reward, which has no model to update"),
    "save_replay_buffer": Param(bool, False, check=(lambda x: not x, "false (the replay buffer is not saved with "
                                                                     "checkpoints; a resumed run refills it)"),
                                doc="must stay false: a resumed run starts with an empty replay buffer"),
    "gamma": discount_param(),
    "learning_rate": learning_rate_param(3.0e-4, "Adam learning rate"),
    "learning_rate_schedule": Param(str, "constant", check=(lambda x: x in ("linear", "constant"),
                                                           "'linear' or 'constant'"),
                                    doc="'linear' decays the learning rate to 1e-10 at max_steps"),
    **network_params(128, "the Q-network"),
    "normalize": Param(bool, False, doc="normalise continuous states by running mean and variance"),
    "vis_encode_type": VIS_ENCODE_TYPE_PARAM,
    "exploration_schedule": Param(str, "linear", check=(lambda x: x in ("linear", "constant"),
                                                         "'linear' or 'constant'"),
                                  doc="'linear' decays epsilon from exploration_initial_eps to exploration_final_eps; "
                                      "'constant' keeps exploration_initial_eps"),
    "exploration_initial_eps": Param(float, 0.1, check=(unit_interval, "in [0, 1]"),
                                     doc="probability of a random action at step 0"),
    "exploration_final_eps": Param(float, 0.05, check=(unit_interval, "in [0, 1]"),
                                   doc="probability of a random action after the schedule"),
    "exploration_fraction": Param(float, None, check=(positive_fraction, "in (0, 1]"),
                                  doc=f"fraction of max_steps over which epsilon decays; unset: the first "
                                      f"{EXPLORATION_STEPS} agent steps"),
    "double_dqn": Param(bool, True,
                        doc="pick the next action with the online network, evaluate it with the target (double DQN)"),
    "max_grad_norm": Param(float, None, check=(positive, "> 0"),
                           doc="global norm the gradients are clipped to; unset: not clipped"),
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
                normalize=self.settings.normalize,
                vis_encode_type=self.settings.vis_encode_type,
            )
            self.create_target_updates(self.model.online_variables, self.model.target_variables)

    def update_ratio(self) -> Tuple[int, int]:
        """``steps_per_update`` when given: one gradient step per that many agent steps (several per step below 1)."""
        ratio = self.settings.steps_per_update
        if ratio is None:
            return super().update_ratio()
        return (max(int(round(ratio)), 1), 1) if ratio >= 1 else (1, max(int(round(1 / ratio)), 1))

    def _warm(self) -> bool:
        """``buffer_init_steps``, when given, is the warm-up (``learning_starts``)."""
        if self.settings.buffer_init_steps is None:
            return super()._warm()
        return len(self.replay) >= max(self.settings.buffer_init_steps, self.settings.batch_size)

    def current_learning_rate(self) -> float:
        """``learning_rate``, decayed linearly to 1e-10 at max_steps with ``learning_rate_schedule: linear``."""
        if self.settings.learning_rate_schedule == "constant":
            return self.settings.learning_rate
        return linear_schedule(self.settings.learning_rate, 1e-10, self.step, self.get_max_steps)

    def exploration_epsilon(self) -> float:
        """The probability of a random action at the current agent step (``exploration_schedule``)."""
        if self.settings.exploration_schedule == "constant":
            return self.settings.exploration_initial_eps
        fraction = self.settings.exploration_fraction
        duration = EXPLORATION_STEPS if fraction is None else fraction * self.get_max_steps
        return linear_schedule(self.settings.exploration_initial_eps, self.settings.exploration_final_eps,
                               self.step, duration)

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
        fetches = [self.model.output, self.model.value]
        if self.model.update_normalization is not None and self.is_training:
            fetches.append(self.model.update_normalization)
        greedy, values = self.sess.run(fetches, feed)[:2]
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
