"""Soft actor-critic for one External brain, on ``trainers.trainer.off_policy.OffPolicyTrainer``.

The off-policy base stores transitions and builds the target copy; SAC adds ML-Agents' schedule
and settings (``trainer_type: sac`` of Release 22, in ``trainers.sac.settings``):

* ``steps_per_update``: agent steps per gradient step, so a 12-agent brain with 10 takes 1.2
  gradient steps per environment step. Nothing is learnt before ``buffer_init_steps`` agent steps
  and ``batch_size`` stored transitions. ``reward_signal_steps_per_update`` paces the curiosity and
  RND models' own training the same way.
* Every gradient step re-scores its sampled minibatch with each reward signal (times its strength),
  so intrinsic rewards follow the current reward models; one Q head per signal.
* The replay holds the raw states; a normalising brain normalises them with the statistics of the
  moment, for the state and the next state alike.
* An interrupted episode (the modern protocol's max step) is not an end: its last transition
  bootstraps from the episode's last observation.
* ``save_replay_buffer`` puts the replay (compressed) in the checkpoint's state, with the trainer's
  random generator and counters (and, recurrent, each agent's steps not yet in a stored block and
  the memory it acts from next), so ``--load`` continues with exactly the next gradient step the
  uninterrupted run would have taken.
* ``use_recurrent``: each agent's transitions go to the replay ``sequence_length`` at a time, in
  order, with the memory the actor started each step from and the one it returned (an episode's
  last block padded with zeros and masked out); updates sample ``batch_size // sequence_length``
  whole blocks. A modern-protocol environment keeps no memory, so the trainer keeps each agent's
  (``PPOPolicy``'s memories: zeros for a new agent or episode).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Sequence

import numpy as np

from trainers.imitation import bc
from trainers.ppo.policy import PPOPolicy, greedy_branches
from trainers.reward_signals import create_reward_signals, signal_settings
from trainers.sac.models import SACModel
from trainers.sac.replay_state import (
    decode_memories,
    decode_pending,
    decode_replay,
    encode_memories,
    encode_pending,
    encode_replay,
)
from trainers.sac.sequences import SequenceReplay
from trainers.sac.settings import (
    EPISODIC_SIGNALS,
    SAC_HYPERPARAMETERS,
    unsupported_action_space,
)
from trainers.sac.settings import check_environment as check_sac_environment
from trainers.sac.settings import check_parameters as check_sac_parameters
from trainers.settings.schema import Follows
from trainers.stopping import stop_requested
from trainers.tf_utils import CompiledRuns, tf
from trainers.trainer.base import UnityTrainerException
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.snapshot_actor import SnapshotActor
from trainers.trainer.summaries import mean_of
from trainers.trainer.trajectory import PolicyOutput, Transitions
from unityagents.brain import BrainParameters


def sample_branches(probs: np.ndarray, masks: np.ndarray, branches: Sequence[int],
                    rng: np.random.Generator) -> np.ndarray:
    """One index per branch drawn from ``probs`` (``[N, sum(branches)]``), never a masked one."""
    choices, offset = [], 0
    for size in branches:
        p, allowed = probs[:, offset:offset + size], masks[:, offset:offset + size] > 0
        offset += size
        cumulative = np.cumsum(p, axis=1)
        u = rng.random((len(p), 1)) * cumulative[:, -1:]
        index = np.minimum((cumulative <= u).sum(axis=1), size - 1)
        # Rounding may land on a trailing masked action: take the last allowed one instead.
        last_allowed = size - 1 - np.argmax(allowed[:, ::-1], axis=1)
        choices.append(np.where(allowed[np.arange(len(p)), index], index, last_allowed))
    return np.stack(choices, axis=1).astype(np.int64)


class SACTrainer(SequenceReplay):
    """SAC for one brain: continuous (tanh-squashed Gaussian) or discrete (branches, masks) actions."""

    trainer_type = "sac"
    hyperparameters = SAC_HYPERPARAMETERS
    #: Release 22's run config writes the signals' update rate out: steps_per_update unless given.
    release22_defaults = {"reward_signal_steps_per_update": Follows("steps_per_update")}
    #: tanh already bounds the actions to [-1, 1]: over gRPC they are sent as they are, as the ONNX
    #: export's ``continuous_actions`` gives them to Unity.
    continuous_actions_bounded = True

    # ------------------------------------------------------------------ configuration checks
    @classmethod
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> Dict[str, Any]:
        return check_sac_parameters(brain_name, params)

    @classmethod
    def check_environment(cls, brain_name: str, params: Dict[str, Any],
                          brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        check_sac_environment(brain_name, params, brains, external_brain_names)

    # ------------------------------------------------------------------ building
    def setup(self) -> None:
        super().setup()
        problem = unsupported_action_space(self.brain)
        if problem:
            raise UnityTrainerException(f"Brain '{self.brain_name}': {problem}")
        settings = signal_settings(self._values)
        self.signal_names = list(settings)
        #: Acting and the gradient step, each set of fetches and feeds compiled once.
        self._runs = CompiledRuns(self.sess)
        #: A recurrent gradient step runs its critics' and its policy's fused LSTM kernels side by
        #: side on the session's inter-op pool (they are independent until the optimizer); an MLP's
        #: ops are too small for the hand-off to the pool to pay, so they run in the calling thread.
        self._update_runs = CompiledRuns(self.sess, inline=not self.settings.use_recurrent)
        self.deterministic = self.settings.deterministic
        #: SACModel's arguments besides the brain (an opponent's acting copy is built with the same).
        self._model_arguments = dict(
            h_size=self.settings.hidden_units, num_layers=self.settings.num_layers,
            normalize=self.settings.normalize, vis_encode_type=self.settings.vis_encode_type,
            streams=self.signal_names,
            gammas={name: float(s["gamma"]) for name, s in settings.items()},
            use_dones={name: name in EPISODIC_SIGNALS for name in settings},
            init_entcoef=self.settings.init_entcoef, tau=self.settings.tau,
            learning_rate=self.settings.learning_rate,
            use_recurrent=self.settings.use_recurrent, m_size=self.settings.memory_size or None)
        with self.build_scope():
            self.model = SACModel(self.brain, **self._model_arguments)
            self.create_target_updates(self.model.online_variables, self.model.target_variables)
            self.reward_signals = create_reward_signals(self.brain, settings)
            self.bc = bc.create_behavioral_cloning(self)
        #: Transitions stored so far; updates already taken (gradient steps, reward-signal updates);
        #: the transition count at the last behavioral-cloning update.
        self.transitions_seen = 0
        self.signal_updates = 0
        self.bc_at = 0
        self._stat_sums: Dict[str, List[float]] = {}
        self.setup_sequences(self.settings.use_recurrent, self.settings.sequence_length)
        self.memory_size = self.model.m_size
        #: Acting memories (``memories``/``remember``/``forget``), kept here when the environment keeps none.
        self.policy = PPOPolicy(self.sess, self.model, self.brain, self.rng,
                                keeps_memories=self.use_recurrent and not self.brain.memory_space_size)

    # ------------------------------------------------------------------ schedules
    def current_learning_rate(self) -> float:
        lr = self.settings.learning_rate
        if self.settings.learning_rate_schedule == "linear":
            lr *= max(1.0 - self.step / self.get_max_steps, 0.0)
        return lr

    def _due(self, per_update: float, more: int = 0) -> int:
        """Updates due by now (with ``more`` transitions stored): one per ``per_update`` agent steps after
        ``buffer_init_steps``."""
        seen = self.transitions_seen + more
        return int(math.floor(max(seen - self.settings.buffer_init_steps, 0) / per_update + 1e-9))

    def _signal_steps(self) -> float:
        value = self.settings.reward_signal_steps_per_update
        return self.settings.steps_per_update if value is None else value

    def _warm(self, more: int = 0) -> bool:
        return (len(self.replay) + more >= self.settings.batch_size
                and self.transitions_seen + more >= self.settings.buffer_init_steps)

    def is_ready_update(self) -> bool:
        return self._ready_with(0)

    def _ready_with(self, more: int) -> bool:
        """``is_ready_update`` once ``more`` transitions are stored (the counts only grow, so an upper
        bound on ``more`` gives an answer that is True wherever the exact one is)."""
        if not self._warm(more):
            return False
        signals_due = self._trains_signals() and self._due(self._signal_steps(), more) > self.signal_updates
        return self._due(self.settings.steps_per_update, more) > self.gradient_step or signals_due

    # ------------------------------------------------------------------ learning after the next send
    @property
    def acts_apart_from_experience(self) -> bool:
        """Without memory, acting reads the weights and the normaliser, and storing a step reads neither
        (the reward signals read their inputs in the update); acting moves only the normaliser and the
        random generator, which only the update and a save read. A recurrent policy's memories are
        forgotten when an episode's end is stored, and the next action reads them."""
        return not self.use_recurrent

    def experience_can_wait(self, steps: int, deciding: int, bootstraps: bool) -> bool:
        """Yes when acting and storing are apart (``acts_apart_from_experience``), the count cannot reach
        a summary or ``max_steps``, and no update comes of the ``steps`` transitions, which it would
        have to make before the next action. A ``threaded`` trainer updates once the next step is sent
        either way, on the transitions stored by then, this step's included, so there an update due
        does not hold the step back. Bootstrap values are the update's own (its target critics)."""
        if not self.acts_apart_from_experience or not self._count_stays_short(deciding):
            return False
        return bool(self.settings.threaded) or not self._ready_with(steps)

    def _trains_signals(self) -> bool:
        return any(s.update_op is not None for s in self.reward_signals.values())

    # ------------------------------------------------------------------ acting
    def _feed(self, inputs: Mapping[str, np.ndarray], prefix: str = "") -> Dict[tf.Tensor, Any]:
        m = self.model
        if prefix:
            return self.observation_feed(inputs, m.next_state, m.next_observations, prefix)
        return self.observation_feed(inputs, m.state, m.observations)

    def _masks(self, info: BrainInfo) -> np.ndarray:
        total = int(sum(self.brain.action_branches))
        if info.action_masks is None:
            return np.ones((len(info.agents), total), np.float32)
        return np.asarray(info.action_masks, np.float32).reshape(len(info.agents), total)

    def _act_with(self, model: SACModel, info: BrainInfo, memories, sample: bool, rng: np.random.Generator,
                  fetches: Dict[str, Any]):
        """``(actions, fetched values, masks fed)`` of ``model``'s policy for every agent of ``info``.

        Continuous: ``tanh(mu + sigma * noise)`` with noise from ``rng`` when ``sample``, ``tanh(mu)``
        otherwise. Discrete: sampled per branch from the masked policy, or its most probable
        actions when ``deterministic``."""
        feed = self.observation_feed(self.observation_fields(info), model.state, model.observations)
        feed[model.batch_size] = n = len(info.agents)
        fetches = dict(fetches)
        if memories is not None:
            feed[model.memory_in], feed[model.sequence_length] = memories, 1
            fetches["memory_out"] = model.memory_out
        if self.is_continuous:
            if sample and not self.deterministic:
                feed[model.epsilon] = rng.standard_normal((n, self.brain.action_space_size)).astype(np.float32)
            fetches["actions"] = model.output
            out = self._runs.run(fetches, feed)
            return out["actions"], out, None
        masks = self._masks(info)
        feed[model.action_masks] = masks
        fetches["probs"] = model.probs
        out = self._runs.run(fetches, feed)
        if self.deterministic:
            return greedy_branches(out["probs"], self.brain.action_branches), out, masks
        return sample_branches(out["probs"], masks, self.brain.action_branches, rng), out, masks

    def act(self, info: BrainInfo) -> PolicyOutput:
        """The policy's actions (``_act_with``: sampled while training, unless ``deterministic``),
        with the value estimates and, recurrent, the memories."""
        m = self.model
        fetches: Dict[str, Any] = {"values": m.value}
        memories = self.policy.memories(info) if self.use_recurrent else None
        if self.is_training and m.update_normalization is not None:
            fetches["update_normalization"] = m.update_normalization
        actions, out, masks = self._act_with(m, info, memories, self.is_training, self.rng, fetches)
        fields: Dict[str, np.ndarray] = {"actions": actions}
        if masks is not None:
            fields["actions"] = actions.astype(np.int32)
            fields["action_masks"] = masks
        values = out["values"][:, 0]
        self.add_stat("Policy/Extrinsic Value", mean_of(values))
        if memories is None:
            return PolicyOutput(actions, fields, values=values)
        fields["memory"], fields["next_memory"] = memories, out["memory_out"]
        self.policy.remember(info, out["memory_out"])
        return PolicyOutput(actions, fields, memories=out["memory_out"], values=values)

    def snapshot_actor(self, scope: str, brain: BrainParameters, rng: np.random.Generator) -> SnapshotActor:
        """An acting copy of this actor under ``scope`` (``trainers.trainer.snapshot_actor``), acting as
        ``act`` does while training (or deterministically); its critics are built but never run."""
        with self.sess.graph.as_default(), tf.variable_scope(scope):
            model = SACModel(brain, **self._model_arguments)
        policy = PPOPolicy(self.sess, model, brain, rng,
                           keeps_memories=self.use_recurrent and not brain.memory_space_size)

        def act(info: BrainInfo):
            memories = policy.memories(info) if self.use_recurrent else None
            actions, out, _ = self._act_with(model, info, memories, True, rng, {})
            if memories is not None:
                policy.remember(info, out["memory_out"])
            return actions, out.get("memory_out")

        outputs = [model.output if self.is_continuous else model.probs]
        outputs += [model.memory_out] if self.use_recurrent else []
        return SnapshotActor(outputs, act, policy.forget, policy)

    # ------------------------------------------------------------------ collecting
    def complete_transitions(self, stored: Dict[str, np.ndarray], transitions: Transitions) -> Dict[str, np.ndarray]:
        """Discrete brains store the action masks of the state reached (an ended episode's last
        observation where the environment sent it, as the base stores its inputs)."""
        if self.is_continuous:
            return stored
        next_masks = self._masks(transitions.after)[transitions.next_rows]
        last = self.last_observations(transitions)
        if last is not None:
            ended, terminal_rows = last
            next_masks[ended] = self._masks(transitions.after.terminal_info)[terminal_rows]
        stored["next_action_masks"] = next_masks
        return stored

    def count_transitions(self, n: int) -> None:
        self.transitions_seen += n

    def forget_memories(self, agents) -> None:
        self.policy.forget(agents)

    # ------------------------------------------------------------------ updating
    def update_model(self) -> None:
        """The gradient steps (and reward-signal updates) due since the last call."""
        if self.gradient_step == 0:
            self.update_targets(hard=True)  # the targets start as copies of the initialised critics
        while self._due(self.settings.steps_per_update) > self.gradient_step:
            if stop_requested():  # the run stops: the steps taken so far are the update
                break
            self.update(self.sample())
            self.gradient_step += 1
        if self._trains_signals():
            while self._due(self._signal_steps()) > self.signal_updates and not stop_requested():
                batch = self.sample()
                if self.use_recurrent:  # the reward models learn from real steps only
                    real = batch["masks"] > 0.5
                    batch = {key: values[real] for key, values in batch.items()}
                self.update_reward_signals(batch)
                self.signal_updates += 1
        if self.bc is not None and self.transitions_seen - self.bc_at >= self.settings.time_horizon:
            self.bc_at = self.transitions_seen
            bc.update_behavioral_cloning(self)
        self._flush_stats()

    def cloned_policy(self) -> bc.ClonedPolicy:
        """The actor as behavioral cloning sees it: ``tanh(mean)``, or the masked branch probabilities."""
        m = self.model
        common = dict(state=m.state, observations=m.observations, variables=m.policy_variables,
                      batch_size=m.batch_size)
        if self.is_continuous:
            return bc.ClonedPolicy(action=m.deterministic_output, **common)
        return bc.ClonedPolicy(probs=m.probs, action_masks=m.action_masks, **common)

    def signal_fields(self, batch: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """A replay minibatch under the field names the reward signals read."""
        fields: Dict[str, np.ndarray] = {"rewards": batch["rewards"], "signal_done": batch["dones"]}
        actions = batch["actions"]
        fields["actions"] = actions if self.is_continuous or actions.shape[1] > 1 else actions[:, 0]
        if "states" in batch:
            fields["signal_state"], fields["signal_next_state"] = batch["states"], batch["next_states"]
        for k in range(self.brain.number_observations):
            fields[f"signal_obs{k}"] = batch[f"observations{k}"]
            fields[f"signal_next_obs{k}"] = batch[f"next_observations{k}"]
        return fields

    def update_feed(self, batch: Mapping[str, np.ndarray]) -> Dict[tf.Tensor, Any]:
        """The feed of one gradient step on ``batch``: inputs, actions, fresh noise, each stream's rewards."""
        m = self.model
        n = len(batch["rewards"])
        feed = {**self._feed(batch), **self._feed(batch, "next_"), m.batch_size: n,
                m.taken_actions: batch["actions"], m.dones: batch["dones"],
                m.learning_rate: self.current_learning_rate()}
        if self.is_continuous:
            shape = (n, self.brain.action_space_size)
            feed[m.epsilon] = self.rng.standard_normal(shape).astype(np.float32)
            feed[m.next_epsilon] = self.rng.standard_normal(shape).astype(np.float32)
        else:
            feed[m.action_masks] = batch["action_masks"]
            feed[m.next_action_masks] = batch["next_action_masks"]
        if self.use_recurrent:  # each sequence starts from the memories stored with its first step
            length = self.sequence_length
            feed.update({m.sequence_length: length, m.masks: batch["masks"],
                         m.memory_in: batch["memory"][::length], m.next_memory_in: batch["next_memory"][::length]})
        fields = self.signal_fields(batch)
        for name, signal in self.reward_signals.items():
            reward = signal.strength * np.asarray(signal.evaluate(self.sess, fields, self.is_training))
            feed[m.rewards[name]] = reward.astype(np.float32)
            if name != "extrinsic":
                self._stat_sums.setdefault(f"{name}_reward", []).append(float(np.mean(reward)))
        return feed

    def update(self, batch: Dict[str, np.ndarray]) -> Dict[str, float]:
        """One gradient step of critics, actor and temperature, then the soft target update, in one
        compiled call."""
        m = self.model
        out = self._update_runs.run({**m.metrics, "train": m.train_op}, self.update_feed(batch))
        metrics = {key: float(out[key]) for key in m.metrics}
        for key, value in metrics.items():
            self._stat_sums.setdefault(key, []).append(value)
        return metrics

    def update_reward_signals(self, batch: Mapping[str, np.ndarray]) -> None:
        fields = self.signal_fields(batch)
        for signal in self.reward_signals.values():
            if signal.update_op is None:
                continue
            names = list(signal.metrics)
            out = self.sess.run([signal.metrics[k] for k in names] + [signal.update_op], signal.update_feed(fields))
            for key, value in zip(names, out):
                self._stat_sums.setdefault(key, []).append(float(value))

    def _flush_stats(self) -> None:
        """One mean per update call and metric (thousands of gradient steps add a handful of values)."""
        for key, values in self._stat_sums.items():
            if values:
                self.add_stat(key, float(np.mean(values)))
        self._stat_sums = {}
        self.add_stat("learning_rate", self.current_learning_rate())

    # ------------------------------------------------------------------ state beyond TF variables
    def _saved_state(self) -> Dict[str, Any]:
        """Counters and the random generator; with ``save_replay_buffer`` the replay buffer too and, for a
        recurrent actor, each agent's transitions not yet in a stored block and the acting memories the
        trainer keeps, so the blocks completed after a resume are the ones the run would have stored."""
        state = {**super()._saved_state(), "transitions_seen": self.transitions_seen,
                 "signal_updates": self.signal_updates, "bc_at": self.bc_at, "rng": self.rng.bit_generator.state}
        if self.settings.save_replay_buffer:
            state["replay"] = encode_replay(self.replay)
            if self.use_recurrent:
                state["pending"] = encode_pending(self._pending)
                if self.policy.keeps_memories:
                    state["memories"] = encode_memories(self.policy._agent_memories)
        return state

    def _restore_state(self, state: Dict[str, Any]) -> None:
        super()._restore_state(state)
        self.transitions_seen = int(state.get("transitions_seen", self.step))
        self.signal_updates = int(state.get("signal_updates", 0))
        self.bc_at = int(state.get("bc_at", 0))
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]
        if state.get("replay") is not None and self.settings.save_replay_buffer:
            self.replay = decode_replay(state["replay"], self.replay.capacity)
            if self.use_recurrent and state.get("pending") is not None:
                self._pending = decode_pending(state["pending"])
                longest = max((len(rows) for rows in self._pending.values()), default=0)
                if longest >= self.sequence_length:
                    raise UnityTrainerException(
                        f"--load: brain '{self.brain_name}' saved {longest} steps of an agent waiting for a block, "
                        f"but sequence_length is now {self.sequence_length}. Restore sequence_length, or set "
                        "save_replay_buffer: false to start with an empty buffer.")
            if self.policy.keeps_memories and state.get("memories") is not None:
                self.policy._agent_memories = decode_memories(state["memories"], self.memory_size)

    # ------------------------------------------------------------------ export
    def export_nodes(self) -> List[str]:
        return (["action", "value_estimate"] + (["deterministic_action"] if self.is_continuous else ["action_probs"])
                + (["recurrent_out"] if self.use_recurrent else []))

    def onnx_action_outputs(self) -> Dict[str, str]:
        """The frozen nodes that are the ONNX contract's continuous outputs as they are (no clip, no /3):
        SAC's actions are already tanh-squashed into [-1, 1]."""
        if not self.is_continuous:
            return {}
        return {"continuous_actions": "action", "deterministic_continuous_actions": "deterministic_action"}


__all__ = ["SACTrainer", "SAC_HYPERPARAMETERS"]
