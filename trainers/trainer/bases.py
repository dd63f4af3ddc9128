"""The public API for writing a trainer: an on-policy base, an off-policy base, and their parts.

A trainer (built-in or from a plugin package) is a ``trainers.trainer.base.Trainer``. Most of what a
``Trainer`` must do is the same for every algorithm of a family: turn API-2 ``BrainInfo`` pairs
into per-agent transitions, count episodes, decide when to learn. These bases do that once, so an
algorithm only writes its graph and its learning step:

``OnPolicyTrainer`` (PPO, A2C, ...)
    collects one trajectory per agent; cuts it when the agent is done (value 0 after it) or when
    it reaches ``time_horizon`` steps (bootstrapped with ``bootstrap_values``); lets the subclass
    add returns/advantages (``process_trajectory``); moves it to the update buffer; once that holds
    ``buffer_size`` steps, hands it over as arrays (``update``) and empties it.

``OffPolicyTrainer`` (DQN, ...)
    stores every transition in a ``ReplayBuffer`` of ``buffer_size`` transitions (the oldest are
    overwritten); after ``learning_starts`` transitions, runs ``gradient_steps`` calls of
    ``update(minibatch)`` per ``train_every`` new transitions, each on ``batch_size`` transitions
    sampled uniformly; keeps target networks in step with hard or soft (``tau``) updates whose
    assign ops are built once, in ``__init__``.

Hooks a subclass implements (``act`` for both; ``bootstrap_values``, ``process_trajectory`` and
``update`` for on-policy; ``update`` for off-policy) are listed on each class. Everything is built
in ``__init__`` under ``with self.build_scope():`` (the brain's variable scope of the run's one
graph); the controller finalizes the graph before the loop, so an op created later fails loudly.

One API-2 rule shapes both collectors: when an agent is done, the state sent with ``done`` is
already the *first* observation of its next episode (Unity resets it in the same frame). So the
step that starts from an ``info`` whose ``local_done`` is set is a valid transition and is stored;
the transition that ended the episode is the one taken from the previous ``info``, whose next
state is meaningless and is masked by ``done``. API-2 does not say whether ``done`` came from a
terminal state or from the agent's ``maxStep``; both are treated as terminal.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Hashable, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from trainers.buffer import AgentBuffer, Buffer
from trainers.returns import add_gae_fields, discount_rewards, get_gae
from trainers.reward_signals import (
    RewardSignal,
    create_reward_signals,
    signal_gae,
    signal_settings,
    validate_reward_signals,
)
from trainers.tf_utils import tf
from trainers.trainer.base import (
    COMMON_HYPERPARAMETERS,
    Param,
    Trainer,
    TrainerConfigError,
    UnityTrainerException,
    non_negative,
    positive,
)
from unityagents.brain import BrainInfo, BrainParameters


def linear_schedule(start: float, end: float, step: float, duration: float) -> float:
    """``start`` at step 0, moving linearly to ``end`` at ``duration``, ``end`` afterwards."""
    fraction = min(max(step / duration, 0.0), 1.0) if duration > 0 else 1.0
    return start + (end - start) * fraction


def step_rewards(info: BrainInfo) -> np.ndarray:
    """Each agent's reward plus its group reward (modern protocol; 0 without groups).

    A learner that knows nothing of groups (PPO, SAC) optimises both, as ML-Agents' do; MA-POCA
    (``trainers.poca``) reads the two apart.
    """
    rewards = np.asarray(info.rewards, dtype=np.float64)
    if len(info.group_rewards) == len(rewards) and len(rewards):
        rewards = rewards + np.asarray(info.group_rewards, dtype=np.float64)
    return rewards


# ---------------------------------------------------------------------------------- acting
@dataclass
class PolicyOutput:
    """What a trainer's ``act`` decided for the N agents of one ``BrainInfo``.

    :param actions: the policy's decision: ``[N, actionSize]`` floats for continuous actions
        (the unclipped Gaussian sample, whose log-probability the update needs), ``[N, 1]``
        (one column per branch) for discrete ones.
    :param sent: what ``take_action`` sent to the environment: ``actions`` under the brain's
        action contract (``Trainer.environment_actions``); filled by ``take_action``.
    :param fields: per-agent values stored with each agent's transition, row ``i`` for agent
        ``i`` of the info (e.g. ``actions``, ``log_probs``, ``value_estimates``, the normalised
        ``states``). Each key becomes a field of the agent's trajectory (on-policy) or of the
        replay buffer (off-policy).
    :param memories: the brain's next ``[N, memorySize]`` memories (recurrent policies), or None.
    :param values: ``[N]`` value estimates shown in Unity's value channel, or None.
    """

    actions: np.ndarray
    fields: Dict[str, np.ndarray] = field(default_factory=dict)
    memories: Optional[np.ndarray] = None
    values: Optional[np.ndarray] = None
    sent: Optional[np.ndarray] = None


class RLTrainer(Trainer):
    """What both bases share: the build scope, acting, episode stats.

    Subclasses implement ``act``. ``take_action`` calls it (the controller never calls it with an
    empty brain, but a direct caller may), and the bases' ``add_experiences`` hand its ``fields``
    to their storage. ``cumulative_reward`` and ``episode_length`` are recorded per finished
    episode, which is what the console line and the curriculum read.
    """

    #: ``[N, memorySize]`` width of the memories ``act`` returns; None for non-recurrent policies.
    memory_size: Optional[int] = None

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
        self.is_continuous = self.brain.action_space_type == "continuous"
        self.cumulative_rewards: Dict[Any, float] = {}
        self.episode_steps: Dict[Any, int] = {}
        #: agent -> (info, outputs, row) of a decision not answered yet (see _with_late_decisions).
        self._waiting: Dict[Any, Tuple[BrainInfo, PolicyOutput, int]] = {}

    @contextlib.contextmanager
    def build_scope(self) -> Iterator[None]:
        """Build ops here: the run's graph, under this brain's ``graph_scope`` (none when alone).

        Node names created inside are relative to the scope, which is what the export contract
        (``state``, ``batch_size``, ``action``, ...) and Unity's Internal brain expect.
        """
        scope = self.graph_scope
        with self.sess.graph.as_default(), (tf.variable_scope(scope) if scope else contextlib.nullcontext()):
            yield

    # ------------------------------------------------------------------ hooks
    def act(self, info: BrainInfo) -> PolicyOutput:
        """Decide for every agent of ``info`` (at least one) with the graph built in ``__init__``.

        Explore when ``self.is_training``; act as the exported graph would otherwise.
        """
        raise UnityTrainerException(
            f"{type(self).__name__} must implement act(info) -> PolicyOutput (see trainers.trainer.bases).")

    # ------------------------------------------------------------------ Trainer interface
    def take_action(self, all_info: Mapping[str, BrainInfo]
                    ) -> Tuple[np.ndarray, Optional[np.ndarray], np.ndarray, Any]:
        """``act`` on this brain's agents; returns ``(sent, memories, values, PolicyOutput)``, where
        ``sent`` is ``act``'s actions under the brain's action contract."""
        info = all_info[self.brain_name]
        n = len(info.agents)
        if n == 0:
            empty = np.zeros((0, self.brain.action_width), dtype=np.float32)
            memories = None if self.memory_size is None else np.zeros((0, self.memory_size), np.float32)
            return empty, memories, np.zeros(0), None
        out = self.act(info)
        out.sent = self.environment_actions(out.actions)
        values = out.values if out.values is not None else np.zeros(n, dtype=np.float32)
        return out.sent, out.memories, values, out

    def _pairs(self, info: Mapping[str, BrainInfo],
               next_info: Mapping[str, BrainInfo]) -> Iterator[Tuple[int, int, Any]]:
        """``(i, j, agent)`` for each agent at row ``i`` of ``info`` and row ``j`` of ``next_info``.

        Agents of ``info`` missing from ``next_info`` (removed from the scene) have no transition.
        Agents whose ``info.local_done`` is set are *not* skipped (see the module docstring).
        """
        following = next_info[self.brain_name]
        next_index = {agent: j for j, agent in enumerate(following.agents)}
        # A row that only reports an episode's end (modern protocol) took no action: no transition.
        asked = info[self.brain_name].decision_requested
        for i, agent in enumerate(info[self.brain_name].agents):
            j = next_index.get(agent)
            if j is not None and asked[i]:
                yield i, j, agent

    def _with_late_decisions(self, info: Mapping[str, BrainInfo], next_info: Mapping[str, BrainInfo],
                             outputs: Optional[PolicyOutput]) -> Tuple[Mapping[str, BrainInfo], Optional[PolicyOutput]]:
        """``info``/``outputs`` extended with the decisions that are answered only now.

        With the modern protocol an agent may act at step t and report again only at t+k
        (decision periods, staggered agents): its row of ``info`` finds no partner in
        ``next_info``. Such a decision is kept, with its outputs row, until the agent reappears;
        then it is appended as an extra row, so that ``_pairs`` pairs it like any other. API-2
        agents report every step, so there this returns its arguments unchanged.
        """
        if outputs is None:
            return info, outputs
        current, following = info[self.brain_name], next_info[self.brain_name]
        present = set(following.agents)
        asked = current.decision_requested
        deciding_now = {a for a, ask in zip(current.agents, asked) if ask}
        late = [(agent, self._waiting.pop(agent)) for agent in list(self._waiting)
                if agent in present and agent not in deciding_now]
        for i, agent in enumerate(current.agents):
            if asked[i] and agent not in present:
                self._waiting[agent] = (current, outputs, i)
        if not late:
            return info, outputs

        def rows(field: str, fn=lambda x, i: x[i:i + 1]) -> List[Any]:
            return [fn(getattr(src, field), i) for _, (src, _, i) in late]

        def cat(own: Any, field: str) -> Any:
            if own is None:
                return None
            return np.concatenate([np.asarray(own)] + [np.asarray(r) for r in rows(field)], axis=0)

        def extend(own: List[Any], field: str) -> List[Any]:
            return list(own) + [getattr(src, field)[i] for _, (src, _, i) in late]

        extended = BrainInfo(
            [np.concatenate([obs] + [src.observations[k][i:i + 1] for _, (src, _, i) in late])
             for k, obs in enumerate(current.observations)],
            cat(current.states, "states"), cat(current.memories, "memories"), extend(current.rewards, "rewards"),
            extend(current.agents, "agents"), extend(current.local_done, "local_done"),
            cat(current.previous_actions, "previous_actions"), extend(current.max_reached, "max_reached"),
            cat(current.action_masks, "action_masks"), extend(current.group_id, "group_id"),
            extend(current.group_rewards, "group_rewards"), list(asked) + [True] * len(late),
            current.terminal_info)
        fields = {key: np.concatenate([np.asarray(values)] + [np.asarray(out.fields[key])[i:i + 1]
                                                              for _, (_, out, i) in late])
                  for key, values in outputs.fields.items()}
        merged_info = dict(info)
        merged_info[self.brain_name] = extended
        return merged_info, PolicyOutput(outputs.actions, fields, outputs.memories, outputs.values, outputs.sent)

    def _count_reward(self, agent: Any, reward: float) -> None:
        self.cumulative_rewards[agent] = self.cumulative_rewards.get(agent, 0.0) + reward
        self.episode_steps[agent] = self.episode_steps.get(agent, 0) + 1

    def _close_episode(self, agent: Any) -> None:
        """Record the episode the agent just finished (if it took a step in it)."""
        if agent in self.episode_steps:
            self.add_stat("cumulative_reward", self.cumulative_rewards.pop(agent))
            self.add_stat("episode_length", self.episode_steps.pop(agent))

    def end_episode(self, agents: Optional[Iterable[Hashable]] = None) -> None:
        """After an environment reset: the episodes of ``agents`` (None: all) are gone without a result."""
        if agents is None:
            self.cumulative_rewards.clear()
            self.episode_steps.clear()
            self._waiting.clear()
            return
        for agent in agents:
            self.cumulative_rewards.pop(agent, None)
            self.episode_steps.pop(agent, None)
            self._waiting.pop(agent, None)


# ---------------------------------------------------------------------------------- on-policy
ON_POLICY_HYPERPARAMETERS: Dict[str, Param] = {
    **COMMON_HYPERPARAMETERS,
    "buffer_size": Param(int, 10240, check=(positive, "> 0"), doc="agent steps collected before each update"),
    "time_horizon": Param(int, 128, check=(positive, "> 0"),
                          doc="steps after which an unfinished trajectory is cut and bootstrapped"),
}


class OnPolicyTrainer(RLTrainer):
    """Collects per-agent trajectories and hands ``buffer_size`` steps at a time to ``update``.

    Hooks (all called with the graph already finalized; none may create ops):

    * ``act(info) -> PolicyOutput``: its ``fields`` are appended to each agent's trajectory,
      with the ``rewards`` this base adds;
    * ``bootstrap_values(info, rows) -> [len(rows)]``: the value of the current state of the
      agents at ``rows`` of ``info``, for trajectories cut at ``time_horizon``;
    * ``process_trajectory(trajectory, value_next)``: add fields computed from the whole
      trajectory, e.g. ``add_gae_fields``; ``value_next`` is 0.0 after a done;
    * ``update(batch)``: learn from the update buffer, given as one array per field of
      ``update_fields`` (``[steps, ...]``, or ``[sequences, sequence_length, ...]`` when
      ``sequence_length > 1``); the base empties the buffer afterwards.

    Attributes a subclass sets in ``__init__``: ``update_fields`` (the trajectory fields moved to
    the update buffer) and, for recurrent policies, ``sequence_length`` and ``memory_size``.
    """

    hyperparameters: ClassVar[Dict[str, Param]] = ON_POLICY_HYPERPARAMETERS
    #: > 1: trajectories move to the update buffer as sequences of this many steps (first one left-padded).
    sequence_length: int = 1

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
        self.training_buffer = Buffer()
        self.update_fields: List[str] = []
        #: Filled by ``build_reward_signals`` (empty: the trainer has no ``reward_signals`` block).
        self.reward_signals: Dict[str, RewardSignal] = {}
        self._signal_stats: Dict[str, List[float]] = {}

    # ------------------------------------------------------------------ hooks
    def bootstrap_values(self, info: BrainInfo, rows: np.ndarray) -> np.ndarray:
        """V(s) of the agents at ``rows`` of ``info``; one batched ``sess.run`` is expected."""
        raise UnityTrainerException(
            f"{type(self).__name__} must implement bootstrap_values(info, rows) to cut trajectories at time_horizon.")

    def process_trajectory(self, trajectory: AgentBuffer, value_next: float) -> None:
        """Add the fields that need the whole trajectory (returns, advantages) before it moves."""
        raise UnityTrainerException(
            f"{type(self).__name__} must implement process_trajectory(trajectory, value_next), "
            "e.g. with trainers.trainer.bases.add_gae_fields.")

    def update(self, batch: Dict[str, np.ndarray]) -> None:
        """Learn from the update buffer (one array per field of ``update_fields``)."""
        raise UnityTrainerException(f"{type(self).__name__} must implement update(batch).")

    # ------------------------------------------------------------------ collecting
    def add_experiences(self, info: Mapping[str, BrainInfo], next_info: Mapping[str, BrainInfo],
                        outputs: Optional[PolicyOutput]) -> None:
        """One transition per agent present in both infos: ``outputs.fields`` row, and the reward
        ``next_info`` reports for the action taken from ``info``'s state."""
        if outputs is None:
            return
        info, outputs = self._with_late_decisions(info, next_info, outputs)
        rewards = step_rewards(next_info[self.brain_name])
        signal_fields = self._signal_input_fields(info, next_info) if self.reward_signals else None
        for i, j, agent in self._pairs(info, next_info):
            trajectory = self.training_buffer[agent]
            for key, values in outputs.fields.items():
                trajectory[key].append(values[i])
            if signal_fields is not None:
                for key, (values, row) in signal_fields.items():
                    trajectory[key].append(values[i if row == "current" else j])
            reward = float(rewards[j])
            trajectory["rewards"].append(reward)
            self._count_reward(agent, reward)

    def process_experiences(self, info: Mapping[str, BrainInfo]) -> None:
        """Move finished (done) and long (``time_horizon``) trajectories to the update buffer.

        Trajectories of done agents move first, in agent order, then the cut ones, whose
        bootstrap values come from one ``bootstrap_values`` call.
        """
        current = info[self.brain_name]
        time_horizon = int(self.hp["time_horizon"])
        cut: List[int] = []
        interrupted: List[Any] = []
        for j, agent in enumerate(current.agents):
            length = len(self.training_buffer[agent]["rewards"]) if agent in self.training_buffer else 0
            if current.local_done[j]:
                if length and current.max_reached[j]:
                    interrupted.append(agent)  # cut by a max step, not ended: bootstrapped below
                elif length:
                    self._finish_trajectory(agent, 0.0)
                self._close_episode(agent)
            elif length >= time_horizon:
                cut.append(j)
        if interrupted:
            # The value of the episode's last observation (the terminal info's row when the agent
            # already reported its next episode's first observation, modern protocol).
            source = current.terminal_info if current.terminal_info is not None else current
            where = {agent: r for r, agent in enumerate(source.agents)}
            values = self.bootstrap_values(source, np.asarray([where[a] for a in interrupted]))
            for k, agent in enumerate(interrupted):
                value = ({name: float(v[k]) for name, v in values.items()} if isinstance(values, dict)
                         else float(values[k]))
                self._finish_trajectory(agent, value)
        if cut:
            values = self.bootstrap_values(current, np.asarray(cut))
            for k, j in enumerate(cut):
                # A trainer with several reward signals bootstraps each: {signal: [len(rows)]}.
                value = ({name: float(v[k]) for name, v in values.items()} if isinstance(values, dict)
                         else float(values[k]))
                self._finish_trajectory(current.agents[j], value)

    def _finish_trajectory(self, agent: Any, value_next: Union[float, Dict[str, float]]) -> None:
        """Move the agent's trajectory to the update buffer, or drop it when no update will come.

        A trainer that acts without learning (not training, or past its ``max_steps`` while
        another brain keeps the run going) never empties the update buffer, so it must not fill it.
        """
        trajectory = self.training_buffer[agent]
        if self.is_training and self.should_still_train:
            self.process_trajectory(trajectory, value_next)
            self.training_buffer.append_update_buffer(
                agent, key_list=self.update_fields,
                training_length=self.sequence_length if self.sequence_length > 1 else None,
            )
        trajectory.reset_agent()

    def end_episode(self, agents: Optional[Iterable[Hashable]] = None) -> None:
        """After an environment reset: drop the trajectories in progress of ``agents`` (None: all),
        whose continuation is gone; the other agents' trajectories go on."""
        agents = list(self.training_buffer.keys()) if agents is None else list(agents)
        for agent in agents:
            if agent in self.training_buffer:
                self.training_buffer[agent].reset_agent()
        super().end_episode(agents)

    # ------------------------------------------------------------------ reward signals
    def build_reward_signals(self) -> List[str]:
        """Build the ``reward_signals`` block's signals; call inside ``build_scope`` in ``__init__``.

        Returns the signal names (extrinsic first), one value head each, or ``[]`` when the
        trainer has no block (then nothing is built and nothing changes). A subclass that
        supports reward signals declares ``"reward_signals": REWARD_SIGNALS_PARAM`` among its
        hyperparameters, stores ``value_field(name)`` per signal in ``act``, returns
        ``{signal: values}`` from ``bootstrap_values``, calls ``add_reward_signal_fields`` in
        ``process_trajectory``, moves ``reward_signal_update_fields()`` to the update buffer and
        runs ``reward_signal_update(batch)``'s ops with each minibatch.
        """
        names = self.reward_signal_names()
        if names:
            self.reward_signals = create_reward_signals(self.brain, signal_settings(self.hp))
        return names

    def reward_signal_names(self) -> List[str]:
        """The names of the ``reward_signals`` block (extrinsic first), ``[]`` without one; builds nothing.

        Validates the block (a direct caller may pass one the config loader never saw) and keeps
        it, completed with each key's default, in ``self.hp``.
        """
        block = validate_reward_signals(self.brain_name, self.hp.get("reward_signals"))
        self.hp["reward_signals"] = block
        return list(block) if block else []

    @staticmethod
    def value_field(names: Sequence[str], name: str) -> str:
        """The trajectory field of signal ``name``'s value estimates (the first signal's: ``value_estimates``)."""
        return "value_estimates" if name == names[0] else f"value_estimates_{name}"

    @staticmethod
    def returns_field(names: Sequence[str], name: str) -> str:
        """The trajectory field of signal ``name``'s returns (the first signal's: ``discounted_returns``)."""
        return "discounted_returns" if name == names[0] else f"discounted_returns_{name}"

    def _needs_next_inputs(self) -> bool:
        return any(signal.needs_next_inputs for signal in self.reward_signals.values())

    def _signal_input_fields(self, info: Mapping[str, BrainInfo],
                             next_info: Mapping[str, BrainInfo]) -> Dict[str, Tuple[Any, str]]:
        """The raw inputs the intrinsic signals read, ``{field: (values, 'current' | 'next')}``."""
        if set(self.reward_signals) == {"extrinsic"}:
            return {}
        current, following = info[self.brain_name], next_info[self.brain_name]
        fields: Dict[str, Tuple[Any, str]] = {}
        if self.brain.state_space_size > 0:
            fields["signal_state"] = (np.asarray(current.states, dtype=np.float32), "current")
        for k, observation in enumerate(current.observations):
            fields[f"signal_obs{k}"] = (observation, "current")
        if self._needs_next_inputs():
            if self.brain.state_space_size > 0:
                fields["signal_next_state"] = (np.asarray(following.states, dtype=np.float32), "next")
            for k, observation in enumerate(following.observations):
                fields[f"signal_next_obs{k}"] = (observation, "next")
            fields["signal_done"] = (np.asarray(following.local_done, dtype=np.float32), "next")
        return fields

    def reward_signal_update_fields(self) -> List[str]:
        """The trajectory fields the update needs for the signals (returns, inputs, actions)."""
        if not self.reward_signals:
            return []
        names = list(self.reward_signals)
        fields = [self.returns_field(names, n) for n in names[1:]] + [self.value_field(names, n) for n in names[1:]]
        if set(names) != {"extrinsic"}:
            if self.brain.state_space_size > 0:
                fields.append("signal_state")
            fields += [f"signal_obs{k}" for k in range(self.brain.number_observations)]
            if self._needs_next_inputs():
                if self.brain.state_space_size > 0:
                    fields.append("signal_next_state")
                fields += [f"signal_next_obs{k}" for k in range(self.brain.number_observations)]
                fields.append("signal_done")
        return fields

    def add_reward_signal_fields(self, trajectory: AgentBuffer, value_next: Union[float, Dict[str, float]],
                                 lambd: float) -> None:
        """Per signal: rewards x strength, GAE with its gamma, returns; ``advantages`` is their sum.

        Writes ``advantages``, ``masks`` and each signal's ``returns_field``; records each signal's
        mean reward (after ``strength``) and value estimate per step for the summaries.
        """
        names = list(self.reward_signals)
        wanted = {"rewards", "actions"} | {self.value_field(names, name) for name in names}
        fields = {key: np.asarray(trajectory[key]) for key in list(trajectory.keys())
                  if key in wanted or key.startswith("signal_")}
        rewards = {name: signal.strength * signal.evaluate(self.sess, fields, self.is_training)
                   for name, signal in self.reward_signals.items()}
        values = {name: fields[self.value_field(names, name)] for name in names}
        if not isinstance(value_next, dict):
            value_next = {name: float(value_next) for name in names}
        result = signal_gae(rewards, values, value_next,
                            {name: signal.gamma for name, signal in self.reward_signals.items()}, lambd)
        advantages = np.sum([result[name]["advantages"] for name in names], axis=0)
        trajectory["advantages"].set(advantages.astype(np.float32))
        for name in names:
            trajectory[self.returns_field(names, name)].set(result[name]["returns"].astype(np.float32))
            title = self.reward_signals[name].title
            self._signal_stats.setdefault(f"Policy/{title} Reward", []).extend(rewards[name].tolist())
            self._signal_stats.setdefault(f"Policy/{title} Value Estimate", []).extend(values[name].tolist())
        trajectory["masks"].set(np.ones(len(advantages), dtype=np.float32))

    def reward_signal_update(self, batch: Mapping[str, np.ndarray]) -> Tuple[Dict[Any, Any], List[Any], List[str]]:
        """``(feed, ops, metric names)`` that train the signals on a minibatch ``batch`` (flat rows).

        Run the ops in the same ``session.run`` as the policy's update; the first ``len(names)``
        of them are the metrics (``Losses/...``), the rest the signals' update ops.
        """
        feed: Dict[Any, Any] = {}
        metrics: List[Any] = []
        names: List[str] = []
        updates: List[Any] = []
        for signal in self.reward_signals.values():
            if signal.update_op is None:
                continue
            feed.update(signal.update_feed(batch))
            for name, tensor in signal.metrics.items():
                names.append(name)
                metrics.append(tensor)
            updates.append(signal.update_op)
        return feed, metrics + updates, names

    def add_signal_stat(self, key: str, value: float) -> None:
        """A value for a summary tag written as it is (``Policy/...``, ``Losses/...``), not under ``Info/``."""
        self._signal_stats.setdefault(key, []).append(float(value))

    @property
    def writes_signal_rewards(self) -> bool:
        return bool(getattr(self, "reward_signals", None))

    def write_summary(self, lesson: Any = None) -> None:
        """The base's summary, plus the reward signals' tags (``Policy/<Signal> Reward``, ...)."""
        due = self.summary_due()
        if due and "Policy/Extrinsic Value Estimate" in self._signal_stats:
            self.stats.pop("value_estimate", None)  # the signal's own tag carries it
        super().write_summary(lesson)
        if due and self._signal_stats:
            self.write_scalars({key: float(np.mean(v)) for key, v in self._signal_stats.items() if v})
            self._signal_stats = {}

    # ------------------------------------------------------------------ updating
    def update_buffer_steps(self) -> int:
        """Agent steps in the update buffer (padding included when moved as sequences)."""
        sizes = [len(values) for values in self.training_buffer.update_buffer.values()]
        return max(sizes, default=0) * self.sequence_length

    def is_ready_update(self) -> bool:
        return self.update_buffer_steps() >= int(self.hp["buffer_size"])

    def update_arrays(self) -> Dict[str, np.ndarray]:
        """The update buffer as one array per field of ``update_fields``."""
        update_buffer = self.training_buffer.update_buffer
        return {key: np.asarray(update_buffer[key]) for key in self.update_fields}

    def update_model(self) -> None:
        """``update`` on the whole update buffer, then empty it (on-policy data is used once)."""
        self.update(self.update_arrays())
        self.training_buffer.reset_update_buffer()


# ---------------------------------------------------------------------------------- replay
class ReplayBuffer:
    """A fixed-capacity store of transitions, overwritten oldest-first, sampled uniformly.

    Fields are preallocated NumPy arrays of ``capacity`` rows, created on the first ``add`` from
    the dtype and shape of what arrives, so a sample is one fancy-index per field, with no Python
    loop over transitions.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise UnityTrainerException(f"A replay buffer needs a capacity of at least 1 transition, got {capacity}.")
        self.capacity = int(capacity)
        self.fields: Dict[str, np.ndarray] = {}
        self.size = 0  # transitions held, at most capacity
        self.next_index = 0  # row the next transition is written to

    def __len__(self) -> int:
        return self.size

    def add(self, transitions: Mapping[str, Any]) -> None:
        """Append ``n`` transitions given as ``{field: [n, ...]}`` (every field the same ``n``).

        The first call fixes the fields; later calls must bring the same ones.
        """
        arrays = {key: np.asarray(value) for key, value in transitions.items()}
        counts = {key: len(a) for key, a in arrays.items()}
        if len(set(counts.values())) != 1:
            raise UnityTrainerException(
                f"Every field added to the replay buffer must hold the same number of transitions, got {counts}.")
        if not self.fields:
            self.fields = {key: np.zeros((self.capacity,) + a.shape[1:], dtype=a.dtype) for key, a in arrays.items()}
        elif arrays.keys() != self.fields.keys():
            raise UnityTrainerException(
                f"The replay buffer holds the fields {sorted(self.fields)} but was given {sorted(arrays)}. "
                "Every transition must carry the same fields.")
        n = next(iter(counts.values()))
        if n > self.capacity:  # only the newest capacity transitions would survive anyway
            arrays = {key: a[n - self.capacity:] for key, a in arrays.items()}
            n = self.capacity
        rows = (self.next_index + np.arange(n)) % self.capacity
        for key, a in arrays.items():
            self.fields[key][rows] = a
        self.next_index = int((self.next_index + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
        """``batch_size`` transitions drawn uniformly, with replacement, from those held."""
        if self.size == 0:
            raise UnityTrainerException("Cannot sample from an empty replay buffer; add transitions first.")
        rows = rng.integers(0, self.size, size=batch_size)
        return {key: a[rows] for key, a in self.fields.items()}


# ---------------------------------------------------------------------------------- off-policy
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
    "tau": Param(float, 1.0, check=(lambda x: 0.0 < x <= 1.0, "in (0, 1]"),
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
    ``__init__``. The base copies the online weights into the target before the first gradient
    step, then every ``target_update_interval`` gradient steps applies a hard copy (``tau`` 1) or
    a soft update (``tau`` < 1). Trainers without target networks do not call it.
    """

    hyperparameters: ClassVar[Dict[str, Param]] = OFF_POLICY_HYPERPARAMETERS

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
        self.replay = ReplayBuffer(int(self.hp["buffer_size"]))
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

        Call inside ``build_scope`` in ``__init__``; pairs are matched by position, so create
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
        tau = float(self.hp["tau"])
        with tf.name_scope("target_updates"):
            self.target_hard_update = tf.group(*[tf.assign(t, o) for o, t in zip(online, target)], name="hard")
            self.target_soft_update = tf.group(
                *[tf.assign(t, tau * o + (1.0 - tau) * t) for o, t in zip(online, target)], name="soft")

    def update_targets(self, hard: bool = False) -> None:
        """Apply the target update: a copy if ``hard`` or ``tau`` is 1, else the soft blend."""
        if self.target_hard_update is None:
            return
        copy = hard or float(self.hp["tau"]) >= 1.0
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
        self.replay.add(transitions)
        if self._warm():  # transitions of the warm-up do not queue a burst of updates
            self._new_transitions += len(pairs)
        for (_, _, agent), reward in zip(pairs, transitions["rewards"]):
            self._count_reward(agent, float(reward))

    def process_experiences(self, info: Mapping[str, BrainInfo]) -> None:
        """Record the episodes that ended (transitions were stored by ``add_experiences``)."""
        current = info[self.brain_name]
        for j, agent in enumerate(current.agents):
            if current.local_done[j]:
                self._close_episode(agent)

    # ------------------------------------------------------------------ updating
    def _warm(self) -> bool:
        return len(self.replay) >= max(int(self.hp["learning_starts"]), int(self.hp["batch_size"]))

    def is_ready_update(self) -> bool:
        return self._warm() and self._new_transitions >= int(self.hp["train_every"])

    def update_model(self) -> None:
        """``gradient_steps`` updates per ``train_every`` transitions that arrived since the last round.

        A brain with 12 agents adds 12 transitions per step, so it may get several rounds at once;
        the ratio of gradient steps to transitions does not depend on the number of agents.
        """
        train_every = int(self.hp["train_every"])
        rounds = self._new_transitions // train_every
        self._new_transitions -= rounds * train_every
        if self.gradient_step == 0:
            self.update_targets(hard=True)  # the target starts as a copy of the initialised network
        interval = int(self.hp["target_update_interval"])
        for _ in range(rounds * int(self.hp["gradient_steps"])):
            self.update(self.replay.sample(int(self.hp["batch_size"]), self.rng))
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


__all__ = [
    "OFF_POLICY_HYPERPARAMETERS",
    "ON_POLICY_HYPERPARAMETERS",
    "OffPolicyTrainer",
    "OnPolicyTrainer",
    "PolicyOutput",
    "RLTrainer",
    "ReplayBuffer",
    "add_gae_fields",
    "discount_rewards",
    "get_gae",
    "linear_schedule",
    "step_rewards",
]
