"""MA-POCA (``trainer: poca``): decentralised PPO policies trained with a centralised group critic.

Agents are grouped by the ``group_id`` the environment sends (modern protocol; the group key is
the environment and the id, so groups of several environments never mix). What differs from PPO:

* **collection**: each environment step becomes one *group step* per group (``groups.py``); a
  group's trajectory moves to the update buffer when the group's episode ends (every member done)
  or when it reaches ``time_horizon`` steps (bootstrapped with V of the members in play); the critic
  values the member-steps of finished trajectories together, once ``EVALUATE_ROWS`` wait or the
  update buffer is read, since it costs far less per row in large batches (a game of a few dozen
  member-steps alone costs about twice as much per row);
* **returns**: the team's lambda-returns over the group trajectory, from the team reward (every
  member's reward plus the group reward), so a member that left early still gets the later rewards
  of its group;
* **critic**: ``models.POCACritic``, V over all members and a counterfactual baseline per member
  (its own observation, its mates' observations and actions), through residual self-attention
  over however many members are present; advantage = ``G_t - b_i``;
* **loss**: PPO's clipped surrogate with those advantages, plus ``0.5 (L_V + 0.5 L_b)`` (both
  clipped around their old estimates), plus half of the policy graph's own value loss towards the
  same returns (it keeps the exported ``value_estimate`` meaningful), minus ``beta`` times the
  entropy; one Adam step over the policy and the critic.

The policy is PPO's graph (``create_agent_model``): each agent acts on its own observation, so the
``.bytes`` and ONNX exports are those of an ordinary PPO policy. The critic reads vector states
only (raw, not normalised), and there is neither LSTM nor reward-signal support here.

A scene without groups (an agent reports group id 0) is refused at the first step: MA-POCA needs
group ids. Train such a brain with ``trainer: ppo``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, List, Mapping, Optional, Tuple

import numpy as np

from trainers.flat_adam import FlatAdam
from trainers.models import loop_gradients
from trainers.poca.groups import (
    FinishedTrajectory,
    GroupTrajectory,
    MemberStep,
    decode_rows,
    encode_rows,
    finish_all,
    pad_rows,
    team_reward,
)
from trainers.poca.models import HEADS, POCACritic
from trainers.ppo.trainer import PPO_HYPERPARAMETERS, PPOTrainer
from trainers.tf_utils import compiled_call, tf
from trainers.trainer.base import Param, TrainerConfigError, UnityTrainerException, check_batch_fits
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.trajectory import Collection, Experience, PolicyOutput, Transitions
from unityagents.brain import CONTINUOUS_ACTION_CLIP, BrainParameters

POCA_HYPERPARAMETERS: Dict[str, Param] = {
    key: param for key, param in PPO_HYPERPARAMETERS.items()
    if key not in ("reward_signals", "behavioral_cloning", "sequence_length")
}
POCA_HYPERPARAMETERS["use_recurrent"] = Param(
    bool, False, check=(lambda x: not x, "false (this MA-POCA has no recurrent policy or critic)"),
    doc="must stay false: MA-POCA here trains feed-forward policies and critics only")
POCA_HYPERPARAMETERS["hidden_units"] = Param(
    int, 128, check=(lambda x: x > 0 and x % HEADS == 0, f"> 0 and a multiple of {HEADS} (the attention heads)"),
    doc="units per hidden layer of the policy, value and critic (a multiple of 4 for the attention)")


#: Member-steps of finished group trajectories that wait to be evaluated by the critic together.
#: From about 500 rows on, a 512-unit critic costs the same per row as at thousands.
EVALUATE_ROWS = 512


class POCATrainer(PPOTrainer):
    """MA-POCA for one brain whose agents belong to groups (see the module docstring)."""

    trainer_type = "poca"
    hyperparameters = POCA_HYPERPARAMETERS
    #: The critic's value and baseline passes and the policy's own networks are independent branches
    #: of large products: on the session's inter-op pool they run side by side and keep both cores
    #: busy where, one op after another, the small ops between the products leave a core idle.
    update_inline = False
    #: Group trajectories wait for the critic in the trainer (``_finished``) and fill the update
    #: buffer by group, not by the collector's steps, so a step's experience never waits for the next.
    acts_apart_from_experience = False

    def setup(self) -> None:
        super().setup()
        self._check_brain(self.brain)
        branches = list(self.brain.action_branches)
        self.action_code_size = self.brain.action_space_size if self.is_continuous else int(sum(branches))
        with self.build_scope():
            self.critic = POCACritic(self.brain.state_space_size, self.action_code_size,
                                     self.settings.hidden_units, self.settings.num_layers)
            self._create_poca_optimizer()
        self.groups: Dict[Hashable, GroupTrajectory] = {}
        self._rows: List[Dict[str, Any]] = []
        self._finished: List[FinishedTrajectory] = []  # group trajectories not yet through the critic
        self._finished_rows = 0
        self._critic_call: Optional[Callable[..., List[Any]]] = None
        self._largest_group = 0
        self._members_raised = 0  # the largest group ``critic.max_members`` was raised to by this trainer

    @staticmethod
    def _check_brain(brain: BrainParameters) -> None:
        if brain.number_observations or brain.state_space_type != "continuous" or brain.state_space_size <= 0:
            raise UnityTrainerException(
                f"Brain '{brain.brain_name}': the MA-POCA critic reads a continuous vector state only, but this brain "
                f"has {brain.number_observations} camera(s) and a {brain.state_space_type} state of size "
                f"{brain.state_space_size}. Train it with trainer: ppo.")

    @classmethod
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        check_batch_fits(brain_name, params, "no minibatch could ever be filled")
        return super().check_parameters(brain_name, params)

    @classmethod
    def check_environment(cls, brain_name: str, params: Dict[str, Any],
                          brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        if brain_name in brains:
            try:
                cls._check_brain(brains[brain_name])
            except UnityTrainerException as e:
                raise TrainerConfigError(f"brain '{brain_name}', key 'trainer': {e}") from None

    # ------------------------------------------------------------------ graph
    def _create_poca_optimizer(self) -> None:
        m, c = self.model, self.critic
        with tf.name_scope("poca_loss"):
            self.team_returns = m.returns  # the team's G_t, also the policy graph's value target
            self.old_critic_value = tf.placeholder(tf.float32, [None], name="old_critic_value")
            self.old_baseline = tf.placeholder(tf.float32, [None], name="old_baseline")
            weights = m.masks
            count = tf.maximum(tf.reduce_sum(weights), 1.0)

            def clipped_loss(estimate: tf.Tensor, old: tf.Tensor) -> tf.Tensor:
                clipped = old + tf.clip_by_value(estimate - old, -m.clip_epsilon, m.clip_epsilon)
                error = tf.maximum(tf.square(estimate - self.team_returns), tf.square(clipped - self.team_returns))
                return 0.5 * tf.reduce_sum(error * weights) / count

            self.critic_value_loss = clipped_loss(c.value, self.old_critic_value)
            self.baseline_loss = clipped_loss(c.baseline, self.old_baseline)
            loss = (m.policy_loss + 0.5 * (self.critic_value_loss + 0.5 * self.baseline_loss)
                    + 0.5 * m.value_loss - m.beta * m.mean_entropy)
        # Its own optimizer state ("poca_adam"): the PPO model's "adam" (built, never run here)
        # covers only the policy graph's variables.
        # Recurrent: the gradient through the LSTM comes from one fused kernel (``loop_gradients``).
        options: Dict[str, Any] = {"gradients": loop_gradients} if m.use_recurrent else {}
        adam = FlatAdam([(loss, list(m.variables) + list(c.variables))], m.learning_rate, epsilon=1e-5,
                        clip_norm=self.settings.max_grad_norm, allow_unused=True, name="poca_adam", **options)
        self.poca_update = adam.apply(wait_for=[*self.update_metrics(), self.baseline_loss], name="poca_update")

    # ------------------------------------------------------------------ acting
    def act(self, info: BrainInfo) -> PolicyOutput:
        """PPO's decision on each agent's own observation; the raw state is kept for the critic."""
        out = super().act(info)
        out.fields["critic_state"] = np.asarray(info.states, np.float32)
        return out

    def _action_codes(self, actions: Any) -> np.ndarray:
        """Each row's action as the critic reads it: continuous values as sent (clipped and scaled as the
        environment receives them), discrete branches one-hot side by side."""
        if self.is_continuous:
            return np.clip(np.asarray(actions, np.float32), -CONTINUOUS_ACTION_CLIP,
                           CONTINUOUS_ACTION_CLIP) / CONTINUOUS_ACTION_CLIP
        branches = list(self.brain.action_branches)
        choices = np.asarray(actions).reshape(len(actions), -1 if len(actions) else len(branches))
        choices = choices[:, :len(branches)].astype(np.int64)
        offsets = np.cumsum([0] + branches[:-1])[:choices.shape[1]]
        codes = np.zeros((len(choices), self.action_code_size), np.float32)
        codes[np.arange(len(choices))[:, None], offsets + choices] = 1.0
        return codes

    # ------------------------------------------------------------------ collecting
    def _group_key(self, agent: Hashable, group_id: int) -> Hashable:
        """Group ids are per environment: agents merged from several are ``(environment, id)``."""
        if group_id <= 0:
            raise UnityTrainerException(
                f"Brain '{self.brain_name}' is trained with trainer: poca, which needs the agents to belong to "
                f"multi-agent groups, but agent {agent!r} reports group id {group_id} (no group). The scene must "
                "register its agents in a group (SimpleMultiAgentGroup in Unity, Scene.group_ids here); a brain "
                "without groups trains with trainer: ppo.")
        return (agent[0], group_id) if isinstance(agent, tuple) else group_id

    @property
    def collection(self) -> Collection:
        """No per-agent trajectory: the members' steps are assembled here into group trajectories
        (``groups``), cut at ``time_horizon`` as a group, not per agent."""
        return Collection()

    def process_experience(self, experience: Experience) -> None:
        """The step's member-steps into their groups; the ended episodes; groups cut at ``time_horizon``."""
        transitions = experience.transitions
        if transitions is not None and transitions.outputs is not None:
            self._add_group_steps(transitions)
        self._record_episodes(experience.episodes)
        self._cut_long_groups(experience.latest)

    def _add_group_steps(self, transitions: Transitions) -> None:
        """One group step per group from the agents that acted; a group whose episode ended moves on."""
        current, following, outputs = transitions.before, transitions.after, transitions.outputs
        steps: Dict[Hashable, Dict[Hashable, MemberStep]] = {}
        done: Dict[Hashable, List[Tuple[Hashable, bool]]] = {}
        policy_fields = [(k, v) for k, v in outputs.fields.items() if k != "critic_state"]
        critic_states, codes = outputs.fields["critic_state"], self._action_codes(outputs.fields["actions"])
        for i, j, agent in zip(transitions.rows.tolist(), transitions.next_rows.tolist(), transitions.agents):
            key = self._group_key(agent, int(current.group_id[i]))
            reward, group_reward = float(following.rewards[j]), float(following.group_rewards[j])
            steps.setdefault(key, {})[agent] = MemberStep(
                {k: v[i] for k, v in policy_fields}, critic_states[i], codes[i], reward, group_reward)
            if following.local_done[j]:
                done.setdefault(key, []).append((agent, bool(following.max_reached[j])))
        for key, step in steps.items():
            group = self.groups.setdefault(key, GroupTrajectory())
            group.add(step)
            self._largest_group = max(self._largest_group, len(step))
            for agent, _ in done.get(key, []):
                group.left.add(agent)
            if group.over():
                interrupted = all(flag for _, flag in done.get(key, [(None, False)]))
                value_next = self._group_value(following, [a for a, _ in done[key]]) if interrupted else 0.0
                self._move(group, value_next)
                if self.groups[key] is group:
                    self.groups[key] = GroupTrajectory()

    def _group_value(self, info: BrainInfo, agents: List[Hashable]) -> float:
        """V of the members ``agents`` as the last observation of ``info`` shows them (its terminal
        rows when the modern protocol sent them)."""
        source = info.terminal_info if info.terminal_info is not None else info
        where = {a: r for r, a in enumerate(source.agents)}
        rows = [where[a] for a in agents if a in where]
        if not rows:
            return 0.0
        states = np.asarray(source.states, np.float32)[rows]
        mates = np.zeros((1, max(len(rows) - 1, 1), states.shape[1]), np.float32)
        present = np.zeros((1, mates.shape[1]), np.float32)
        mates[0, :len(rows) - 1], present[0, :len(rows) - 1] = states[1:], 1.0
        actions = np.zeros(mates.shape[:2] + (self.action_code_size,), np.float32)
        values, _ = self._critic({"own_state": states[:1], "mate_states": mates, "mate_actions": actions,
                                  "mate_present": present})
        return float(values[0])

    def _critic(self, inputs: Dict[str, np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
        """``(V, b)`` of padded member rows, in one compiled call (the two passes side by side, as in
        the update: ``update_inline``)."""
        c = self.critic
        if self._critic_call is None:
            self._critic_call = compiled_call(
                self.sess, [c.value, c.baseline], [c.own_state, c.mate_states, c.mate_actions, c.mate_present],
                inline=self.update_inline)
        values, baselines = self._critic_call(inputs["own_state"], inputs["mate_states"], inputs["mate_actions"],
                                              inputs["mate_present"])
        return values, baselines

    def _move(self, group: GroupTrajectory, value_next: float) -> None:
        """The group's steps leave its trajectory for the update buffer; the critic evaluates them
        with other finished trajectories, once ``EVALUATE_ROWS`` member-steps wait or the rows are read."""
        if self._largest_group > self._members_raised:  # the variable only grows: raise it when the count grew
            self._evaluate()  # what waits is valued under the count it was finished under
            self.sess.run(self.critic.raise_max_members, {self.critic.members_seen: float(self._largest_group)})
            self._members_raised = self._largest_group
        rewards = [team_reward(step) for step in group.steps]
        group.episode_total += sum(rewards)
        if group.over():
            self.add_stat("Environment/Group Cumulative Reward", group.episode_total)
        if group.steps:
            self._finished.append(FinishedTrajectory(group.steps, rewards, value_next))
            self._finished_rows += sum(len(step) for step in group.steps)
        group.steps = []
        if self._finished_rows >= EVALUATE_ROWS:
            self._evaluate()

    def _evaluate(self) -> None:
        """Returns and advantages of the finished trajectories, all their member-steps in one critic call;
        their rows join the update buffer in the order the trajectories finished."""
        if not self._finished:
            return
        finished, self._finished, self._finished_rows = self._finished, [], 0
        for rows in finish_all(finished, self.settings.gamma, self.settings.lambd, self._critic):
            self._rows.extend(rows)
            if rows:
                self.add_signal_stat("Policy/Extrinsic Value Estimate",
                                     float(np.mean([r["critic_value"] for r in rows])))
                self.add_signal_stat("Policy/Extrinsic Baseline Estimate",
                                     float(np.mean([r["critic_baseline"] for r in rows])))

    @property
    def rows(self) -> List[Dict[str, Any]]:
        """The update buffer's member-steps, every finished trajectory's included (evaluated now if it waited)."""
        self._evaluate()
        return self._rows

    @rows.setter
    def rows(self, rows: List[Dict[str, Any]]) -> None:
        self._evaluate()
        self._rows = rows

    def _cut_long_groups(self, current: BrainInfo) -> None:
        """Cut group trajectories at ``time_horizon``, bootstrapped from the members in play."""
        in_play: Dict[Hashable, List[Hashable]] = {}
        for j, agent in enumerate(current.agents):
            if current.decision_requested[j] and int(current.group_id[j]) > 0:
                in_play.setdefault(self._group_key(agent, int(current.group_id[j])), []).append(agent)
        horizon = self.settings.time_horizon
        for key, group in self.groups.items():
            if len(group) >= horizon:
                self._move(group, self._group_value_now(current, in_play.get(key, [])))

    def _group_value_now(self, info: BrainInfo, agents: List[Hashable]) -> float:
        where = {a: r for r, a in enumerate(info.agents)}
        rows = [where[a] for a in agents]
        if not rows:
            return 0.0
        view = BrainInfo([], np.asarray(info.states)[rows], agents=[info.agents[r] for r in rows])
        return self._group_value(view, view.agents)

    def end_episode(self, agents=None) -> None:
        """After an environment reset: the group trajectories in progress are dropped."""
        if agents is None:
            self.groups.clear()
        else:
            gone = set(agents)
            for key in [k for k, g in self.groups.items() if g.members & gone]:
                del self.groups[key]
        super().end_episode(agents)

    # ------------------------------------------------------------------ updating
    def update_buffer_steps(self) -> int:
        return len(self._rows) + self._finished_rows

    def update_arrays(self) -> Dict[str, np.ndarray]:
        keys = ["actions", "log_probs", "value_estimates", "advantages", "discounted_returns", "masks",
                "critic_value", "critic_baseline", "states"]
        if getattr(self.model, "action_masks", None) is not None:
            keys.append("action_masks")
        return pad_rows(self.rows, keys)

    def update_inputs(self) -> List[Tuple[tf.Tensor, str, bool]]:
        if self._update_inputs is None:
            inputs = list(super().update_inputs())
            c = self.critic
            inputs += [(c.own_state, "critic_own_state", True), (c.mate_states, "critic_mate_states", True),
                       (c.mate_actions, "critic_mate_actions", True), (c.mate_present, "critic_mate_present", True),
                       (self.old_critic_value, "critic_value", True), (self.old_baseline, "critic_baseline", True)]
            self._update_inputs = inputs
        return self._update_inputs

    def update_metrics(self) -> List[tf.Tensor]:
        """PPO's, with the group critic's value loss in the place of the value head's."""
        m = self.model
        return [m.policy_loss, self.critic_value_loss, m.mean_entropy, m.approx_kl, m.clip_fraction]

    def update_op(self) -> tf.Operation:
        return self.poca_update

    def minibatch_extras(self, minibatch):
        return {}, [self.baseline_loss], ["Losses/Baseline Loss"]

    def minibatch_fields(self, batch) -> List[str]:
        return []

    def take_update_batch(self) -> Dict[str, np.ndarray]:
        """The member-steps collected since the last update, as arrays; they are then forgotten."""
        batch = self.update_arrays()
        self.rows = []
        return batch

    # ------------------------------------------------------------------ state beyond TF variables
    def _saved_state(self) -> Dict[str, Any]:
        """With the step counters: the member-steps collected since the last update and the generator of
        the exploration noise and the minibatch order, so that ``--resume`` takes the update the
        uninterrupted run would have taken. Group trajectories still in progress are not kept: a resumed
        run starts its environments' episodes afresh."""
        return {**super()._saved_state(), "rows": encode_rows(self.rows), "rng": self.rng.bit_generator.state}

    def _restore_state(self, state: Dict[str, Any]) -> None:
        super()._restore_state(state)
        if state.get("rows") is not None:
            self.rows = decode_rows(state["rows"])
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]


__all__ = ["EVALUATE_ROWS", "POCATrainer", "POCA_HYPERPARAMETERS"]
