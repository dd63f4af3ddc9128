"""The off-policy base: a replay buffer of past transitions, minibatch updates, target networks.

See ``trainers.trainer.rl_trainer`` for how the bases divide the work, and
``trainers.trainer.trajectory`` for how two steps pair into transitions.
"""
from __future__ import annotations

from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from trainers.buffer import ReplayBuffer
from trainers.tf_utils import tf
from trainers.trainer.base import (
    COMMON_HYPERPARAMETERS,
    Param,
    TrainerConfigError,
    UnityTrainerException,
    non_negative,
    positive,
    positive_fraction,
)
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.rl_trainer import RLTrainer
from trainers.trainer.trajectory import PolicyOutput, step_rewards

OFF_POLICY_HYPERPARAMETERS: Dict[str, Param] = {
    **COMMON_HYPERPARAMETERS,
    "buffer_size": Param(int, 50000, check=(positive, "> 0"),
                         doc="replay capacity in transitions; the oldest are overwritten"),
    "batch_size": Param(int, 64, check=(positive, "> 0"), doc="transitions sampled for each gradient step"),
    "learning_starts": Param(int, 1000, check=(non_negative, ">= 0"),
                             doc="transitions collected before the first update (warm-up)"),
    "train_every": Param(int, 4, check=(positive, "> 0"), doc="new transitions (agent steps) per round of updates"),
    "gradient_steps": Param(int, 1, check=(positive, "> 0"), doc="gradient steps per round of updates"),
    "target_update_interval": Param(int, 250, check=(positive, "> 0"),
                                    doc="gradient steps between target-network updates"),
    "tau": Param(float, 1.0, check=(positive_fraction, "in (0, 1]"),
                 doc="target update: 1 copies the online weights, < 1 moves target <- tau*online + (1-tau)*target"),
}


class OffPolicyTrainer(RLTrainer):
    """Learns from a replay buffer of past transitions, with optional target networks.

    Hooks (called with the graph already finalized; none may create ops):

    * ``act(info) -> PolicyOutput``: its ``fields`` (at least ``actions``) are stored with each
      transition;
    * ``update(batch)``: one gradient step on a sampled minibatch: ``{field: [batch_size, ...]}``
      with ``rewards``, ``dones`` (1.0 where the transition ended an episode), the ``fields`` of
      ``act``, and each input of ``observation_fields`` twice: ``<name>`` for the state acted
      from and ``next_<name>`` for the state reached (meaningless where ``dones`` is 1).

    Target networks: call ``create_target_updates(online, target)`` inside ``build_scope`` in
    ``setup``. The base copies the online weights into the target before the first gradient
    step, then every ``target_update_interval`` gradient steps applies a hard copy (``tau`` 1) or
    a soft update (``tau`` < 1). Trainers without target networks do not call it.
    """

    hyperparameters: ClassVar[Dict[str, Param]] = OFF_POLICY_HYPERPARAMETERS

    def setup(self) -> None:
        super().setup()
        self.replay = ReplayBuffer(self.settings.buffer_size)
        self.gradient_step = 0
        self._new_transitions = 0  # since the last round of updates
        self.target_hard_update: Optional[tf.Operation] = None
        self.target_soft_update: Optional[tf.Operation] = None

    @classmethod
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> None:
        """The warm-up and a minibatch must fit in the replay buffer, or training never starts."""
        needed = max(params["learning_starts"], params["batch_size"])
        if needed > params["buffer_size"]:
            key = "batch_size" if params["batch_size"] >= params["learning_starts"] else "learning_starts"
            raise TrainerConfigError(
                f"brain '{brain_name}', key '{key}': {params[key]} is larger than buffer_size {params['buffer_size']}, "
                "so the replay buffer could never hold enough transitions to start training. "
                f"Lower {key} or raise buffer_size.")

    # ------------------------------------------------------------------ building
    def create_target_updates(self, online: Sequence[tf.Variable], target: Sequence[tf.Variable]) -> None:
        """Build, once, the ops that copy (hard) or blend (soft, ``tau``) ``online`` into ``target``.

        Call inside ``build_scope`` in ``setup``; pairs are matched by position, so create
        both networks with the same code (``models.new_trainable_variables`` lists them in
        creation order).
        """
        if len(online) != len(target) or not online:
            raise UnityTrainerException(
                f"create_target_updates needs one target variable per online variable, got {len(online)} online "
                f"and {len(target)} target variables. Build both networks with the same function.")
        for o, t in zip(online, target):
            if o.shape != t.shape:
                raise UnityTrainerException(
                    f"Target variable {t.name} has shape {t.shape} but its online variable {o.name} has {o.shape}; "
                    "create both networks in the same order with the same sizes.")
        tau = self.settings.tau
        with tf.name_scope("target_updates"):
            self.target_hard_update = tf.group(*[tf.assign(t, o) for o, t in zip(online, target)], name="hard")
            self.target_soft_update = tf.group(
                *[tf.assign(t, tau * o + (1.0 - tau) * t) for o, t in zip(online, target)], name="soft")

    def update_targets(self, hard: bool = False) -> None:
        """Apply the target update: a copy if ``hard`` or ``tau`` is 1, else the soft blend."""
        if self.target_hard_update is None:
            return
        copy = hard or self.settings.tau >= 1.0
        self.sess.run(self.target_hard_update if copy else self.target_soft_update)

    # ------------------------------------------------------------------ hooks
    def observation_fields(self, info: BrainInfo) -> Dict[str, np.ndarray]:
        """The inputs stored per transition (and as ``next_<name>``): the state and each camera."""
        fields: Dict[str, np.ndarray] = {}
        if self.brain.state_space_size > 0:
            fields["states"] = np.asarray(info.states, dtype=np.float32)
        for k, observation in enumerate(info.observations):
            fields[f"observations{k}"] = np.asarray(observation, dtype=np.float32)
        return fields

    @staticmethod
    def observation_feed(inputs: Mapping[str, np.ndarray], state: Optional[tf.Tensor],
                         observations: Sequence[tf.Tensor], prefix: str = "") -> Dict[tf.Tensor, Any]:
        """``{placeholder: array}`` of the stored inputs of ``observation_fields``: ``states`` into
        ``state`` (unless None), ``observations<k>`` into ``observations[k]``; ``prefix`` ``"next_"``
        reads the states reached instead."""
        feed: Dict[tf.Tensor, Any] = {}
        if state is not None:
            feed[state] = inputs[f"{prefix}states"]
        for k, placeholder in enumerate(observations):
            feed[placeholder] = inputs[f"{prefix}observations{k}"]
        return feed

    def update(self, batch: Dict[str, np.ndarray]) -> None:
        """One gradient step on ``batch`` (see the class docstring for its fields)."""
        raise UnityTrainerException(f"{type(self).__name__} must implement update(batch).")

    # ------------------------------------------------------------------ collecting
    def transitions_of(self, info: Mapping[str, BrainInfo], next_info: Mapping[str, BrainInfo],
                       outputs: PolicyOutput) -> Optional[Tuple[Dict[str, np.ndarray], List[Tuple[int, int, Any]]]]:
        """The transitions of the agents present in both infos, as arrays, with their (row, next row,
        agent) pairs; None when there are none. Fields: ``rewards``, ``dones``, the policy's fields,
        the observations and the next observations (``next_<field>``)."""
        info, outputs = self._with_late_decisions(info, next_info, outputs)
        pairs = list(self._pairs(info, next_info))
        if not pairs:
            return None
        rows = np.asarray([i for i, _, _ in pairs])
        next_rows = np.asarray([j for _, j, _ in pairs])
        following = next_info[self.brain_name]
        transitions: Dict[str, np.ndarray] = {
            "rewards": step_rewards(following).astype(np.float32)[next_rows],
            "dones": np.asarray(following.local_done, dtype=np.float32)[next_rows],
        }
        for key, values in outputs.fields.items():
            transitions[key] = np.asarray(values)[rows]
        for key, values in self.observation_fields(info[self.brain_name]).items():
            transitions[key] = values[rows]
        for key, values in self.observation_fields(following).items():
            transitions[f"next_{key}"] = values[next_rows]
        return transitions, pairs

    def add_experiences(self, info: Mapping[str, BrainInfo], next_info: Mapping[str, BrainInfo],
                        outputs: Optional[PolicyOutput]) -> None:
        """Store one transition per agent present in both infos, all in one ``ReplayBuffer.add``."""
        found = None if outputs is None else self.transitions_of(info, next_info, outputs)
        if found is None:
            return
        transitions, pairs = found
        transitions = self.complete_transitions(transitions, pairs, next_info[self.brain_name])
        self.replay.add(transitions)
        self.count_transitions(len(pairs))
        for (_, _, agent), reward in zip(pairs, transitions["rewards"]):
            self._count_reward(agent, float(reward))

    def complete_transitions(self, transitions: Dict[str, np.ndarray], pairs: List[Tuple[int, int, Any]],
                             following: BrainInfo) -> Dict[str, np.ndarray]:
        """Hook: the transitions as stored; ``following`` is the info their next states come from."""
        return transitions

    def count_transitions(self, n: int) -> None:
        """Hook: ``n`` transitions were just stored; they count towards ``train_every`` after the warm-up."""
        if self._warm():  # transitions of the warm-up do not queue a burst of updates
            self._new_transitions += n

    def process_experiences(self, info: Mapping[str, BrainInfo]) -> None:
        """Record the episodes that ended (transitions were stored by ``add_experiences``)."""
        current = info[self.brain_name]
        for j, agent in enumerate(current.agents):
            if current.local_done[j]:
                self._close_episode(agent)

    # ------------------------------------------------------------------ updating
    def _warm(self) -> bool:
        return len(self.replay) >= max(self.settings.learning_starts, self.settings.batch_size)

    def is_ready_update(self) -> bool:
        return self._warm() and self._new_transitions >= self.settings.train_every

    def update_model(self) -> None:
        """``gradient_steps`` updates per ``train_every`` transitions that arrived since the last round.

        A brain with 12 agents adds 12 transitions per step, so it may get several rounds at once;
        the ratio of gradient steps to transitions does not depend on the number of agents.
        """
        train_every = self.settings.train_every
        rounds = self._new_transitions // train_every
        self._new_transitions -= rounds * train_every
        if self.gradient_step == 0:
            self.update_targets(hard=True)  # the target starts as a copy of the initialised network
        interval = self.settings.target_update_interval
        for _ in range(rounds * self.settings.gradient_steps):
            self.update(self.replay.sample(self.settings.batch_size, self.rng))
            self.gradient_step += 1
            if self.gradient_step % interval == 0:
                self.update_targets()

    # ------------------------------------------------------------------ state beyond TF variables
    def get_state(self) -> Dict[str, Any]:
        """Adds the gradient-step count (it times target updates; the replay is not saved)."""
        return {**super().get_state(), "gradient_step": self.gradient_step}

    def set_state(self, state: Dict[str, Any]) -> None:
        super().set_state(state)
        self.gradient_step = int(state.get("gradient_step", 0))


__all__ = ["OFF_POLICY_HYPERPARAMETERS", "OffPolicyTrainer"]
