"""The off-policy base: a replay buffer of past transitions, minibatch updates, target networks.

See ``trainers.trainer.rl_trainer`` for how the bases divide the work, and
``runner.collector`` for how two steps pair into transitions.
"""
from __future__ import annotations

from typing import Any, ClassVar, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from trainers.buffer import ReplayBuffer
from trainers.stopping import stop_requested
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
from trainers.trainer.trajectory import Experience, Transitions

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
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """The warm-up and a minibatch must fit in the replay buffer, or training never starts."""
        needed = max(params["learning_starts"], params["batch_size"])
        if needed > params["buffer_size"]:
            key = "batch_size" if params["batch_size"] >= params["learning_starts"] else "learning_starts"
            raise TrainerConfigError(
                f"brain '{brain_name}', key '{key}': {params[key]} is larger than buffer_size {params['buffer_size']}, "
                "so the replay buffer could never hold enough transitions to start training. "
                f"Lower {key} or raise buffer_size.")
        return super().check_parameters(brain_name, params)

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

    # ------------------------------------------------------------------ learning from transitions
    def transitions_of(self, transitions: Transitions) -> Dict[str, np.ndarray]:
        """The step's transitions as the replay stores them: ``rewards``, ``dones``, the policy's
        fields, the observations and the next observations (``next_<field>``).

        An episode that ended is reached at its last observation where the environment sends it
        (the modern protocol's terminal steps; API-2 sends the next episode's first, masked by
        ``dones``); one cut by its max step is not terminal: ``dones`` is 0 there, so the target
        bootstraps from that last observation.
        """
        rows, next_rows, following = transitions.rows, transitions.next_rows, transitions.after
        stored: Dict[str, np.ndarray] = {
            "rewards": transitions.rewards.astype(np.float32),
            "dones": transitions.dones.astype(np.float32),
        }
        for key, values in transitions.outputs.fields.items():
            stored[key] = np.asarray(values)[rows]
        for key, values in self.observation_fields(transitions.before).items():
            stored[key] = values[rows]
        for key, values in self.observation_fields(following).items():
            stored[f"next_{key}"] = values[next_rows]
        last = self.last_observations(transitions)
        if last is not None:
            ended, terminal_rows = last
            for key, values in self.observation_fields(following.terminal_info).items():
                stored[f"next_{key}"][ended] = values[terminal_rows]
            interrupted = np.asarray(following.max_reached, dtype=bool)[next_rows[ended]]
            stored["dones"][ended] = (~interrupted).astype(np.float32)
        return stored

    @staticmethod
    def last_observations(transitions: Transitions) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """``(k, r)``: the transitions ``k`` that ended an episode whose last observation is row ``r``
        of ``transitions.after.terminal_info``; None when there are none."""
        terminal = transitions.after.terminal_info
        dones = transitions.dones
        if terminal is None or not dones.any():
            return None
        where = {agent: r for r, agent in enumerate(terminal.agents)}
        found = [(k, where[agent]) for k, agent in enumerate(transitions.agents) if dones[k] and agent in where]
        if not found:
            return None
        ended, rows = zip(*found)
        return np.asarray(ended), np.asarray(rows)

    def process_experience(self, experience: Experience) -> None:
        """Store the step's transitions (all in one ``ReplayBuffer.add``) and record the ended episodes."""
        transitions = experience.transitions
        if transitions is not None and transitions.outputs is not None:
            self.store(self.complete_transitions(self.transitions_of(transitions), transitions), transitions)
            self.count_transitions(len(transitions))
        self._record_episodes(experience.episodes)

    def store(self, stored: Dict[str, np.ndarray], transitions: Transitions) -> None:
        """Hook: put the step's transitions (``transitions_of``, completed) into the replay."""
        self.replay.add(stored)

    def complete_transitions(self, stored: Dict[str, np.ndarray], transitions: Transitions) -> Dict[str, np.ndarray]:
        """Hook: the transitions as stored, with what the subclass adds (from ``transitions.after``)."""
        return stored

    def count_transitions(self, n: int) -> None:
        """Hook: ``n`` transitions were just stored; they count towards ``train_every`` after the warm-up."""
        if self._warm():  # transitions of the warm-up do not queue a burst of updates
            self._new_transitions += n

    # ------------------------------------------------------------------ updating
    def _warm(self) -> bool:
        return len(self.replay) >= max(self.settings.learning_starts, self.settings.batch_size)

    def is_ready_update(self) -> bool:
        return self._warm() and self._new_transitions >= self.update_ratio()[0]

    def update_ratio(self) -> Tuple[int, int]:
        """``(train_every, gradient_steps)``: a round of this many gradient steps per this many new transitions."""
        return self.settings.train_every, self.settings.gradient_steps

    def update_model(self) -> None:
        """``gradient_steps`` updates per ``train_every`` transitions that arrived since the last round.

        A brain with 12 agents adds 12 transitions per step, so it may get several rounds at once;
        the ratio of gradient steps to transitions does not depend on the number of agents.
        """
        train_every, gradient_steps = self.update_ratio()
        rounds = self._new_transitions // train_every
        self._new_transitions -= rounds * train_every
        if self.gradient_step == 0:
            self.update_targets(hard=True)  # the target starts as a copy of the initialised network
        interval = self.settings.target_update_interval
        for _ in range(rounds * gradient_steps):
            if stop_requested():  # the run stops: the steps taken so far are the update
                break
            self.update(self.replay.sample(self.settings.batch_size, self.rng))
            self.gradient_step += 1
            if self.gradient_step % interval == 0:
                self.update_targets()

    # ------------------------------------------------------------------ state beyond TF variables
    def _saved_state(self) -> Dict[str, Any]:
        """Adds the gradient-step count (it times target updates; the replay is not saved)."""
        return {**super()._saved_state(), "gradient_step": self.gradient_step}

    def _restore_state(self, state: Dict[str, Any]) -> None:
        super()._restore_state(state)
        self.gradient_step = int(state.get("gradient_step", 0))


__all__ = ["OFF_POLICY_HYPERPARAMETERS", "OffPolicyTrainer"]
