"""Team self-play: the two (or more) ``?team=N`` behaviours of one base name, one learning trainer.

Why one learner for all teams: the teams of a symmetric game are one behaviour (same spaces,
mirrored views), so one policy learns to play either side; Release 22 has the teams take turns
(``trainers.ghost.self_play`` holds the schedule). The controller builds trainers per brain name, so
each team gets a *seat* (:class:`TeamSeat`, a ``Trainer``) and the seats of one behaviour share a
:class:`TeamSelfPlay`:

* the learner: the behaviour's own trainer (PPO, MA-POCA, SAC, or any trainer that can act from a
  snapshot), built once for the base name (``Tennis``) and
  handed the learning team's ``BrainInfo`` under that name, so it neither knows about teams nor
  sees a socket; it exports ``Tennis.onnx`` as ML-Agents names it;
* the opponent: an acting copy of the learner's network, which the learner builds itself
  (``snapshot_actor``, the seam of ``trainers.trainer.snapshot_actor``) under a scope of its own; weights
  are matched by their names relative to each scope, and it plays the other team with a snapshot;
* the pool (``trainers.ghost.snapshot.SnapshotPool``, self-play's one mechanism, which the seed's
  ghost drives too): ``window`` ring slots of the learner's acting weights plus one for "the latest
  weights", all TF variables, so the checkpoint holds them and a resumed run plays the same past
  selves; the schedule and ratings (``trainers.ghost.self_play.SelfPlaySchedule``, a ``SnapshotRing``)
  ride in the checkpoint's state.

A team change resets every environment (``reset_request``), and takes effect when the
controller reports the cut episodes (``end_episode``), so no trajectory of the learner spans two
teams and no game is scored against the wrong side.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Hashable, Iterable, List, Mapping, Optional, Sequence

import numpy as np

from trainers.ghost.self_play import LATEST, SelfPlaySchedule, SelfPlaySettings
from trainers.ghost.snapshot import SnapshotPool, pool_copying
from trainers.tf_utils import tf
from trainers.trainer.base import Trainer, TrainerContext, UnityTrainerException, logger
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.snapshot_actor import SnapshotActor, acts_from_snapshots
from trainers.trainer.trajectory import Collection, Experience
from unityagents.brain import BrainParameters, team_base, team_id


class TeamSelfPlay:
    """The learner, the opponent network, the pool and the schedule of one team behaviour."""

    def __init__(self, sess, brains: Mapping[str, BrainParameters], team_names: Sequence[str],
                 params: Dict[str, Any], learner_class: type, training: bool, seed: int = 0,
                 context: Optional[TrainerContext] = None):
        self.sess = sess
        context = context if context is not None else TrainerContext.of(params)
        self.team_names = sorted(team_names, key=team_id)
        self.base = team_base(self.team_names[0])
        self.training = training
        self.settings = SelfPlaySettings(**params["self_play"])
        if not acts_from_snapshots(learner_class):
            raise UnityTrainerException(
                f"Behaviour '{self.base}': self_play needs a learner that can act from a snapshot of its policy "
                f"(a snapshot_actor method, trainers.trainer.snapshot_actor); {learner_class.__name__} ("
                f"trainer_type {getattr(learner_class, 'trainer_type', '?')!r}) has none. Use trainer_type: ppo, "
                "poca or sac, or remove self_play.")
        learner_brains = dict(brains)
        learner_brains[self.base] = brains[self.team_names[0]]
        self.learner: Trainer = learner_class(sess, learner_brains, self.base, params, training, seed,
                                              context=context)
        scope = context.graph_scope
        if not scope:
            raise UnityTrainerException(f"Behaviour '{self.base}': the self-play learner needs a graph scope of its "
                                        "own (the controller gives it the behaviour's name).")
        self.rng = np.random.default_rng(seed + 7919)
        opponent_scope = f"{scope}-opponent"
        # The opponent: the learner's own acting copy, under a scope of its own.
        self.actor: SnapshotActor = self.learner.snapshot_actor(opponent_scope, learner_brains[self.base], self.rng)
        with sess.graph.as_default(), tf.variable_scope(opponent_scope):
            # Slots 0..window-1: the ring of snapshots; slot `window`: the latest weights at a swap.
            self.pool: SnapshotPool = pool_copying(self.actor.outputs, opponent_scope, scope, self.settings.window + 1,
                                                   f"Behaviour '{self.base}': the opponent")
        self.schedule = SelfPlaySchedule(self.settings, n_teams=len(self.team_names), seed=seed)
        self.pending_change = False
        self._reset_reason: Optional[str] = None
        seat_context = dataclasses.replace(context, summary_path=None)
        self.seats = {name: TeamSeat(self, sess, brains, name, params, training, seed, seat_context)
                      for name in self.team_names}

    # ---------------------------------------------------------------- roles
    @property
    def learning_name(self) -> str:
        return self.team_names[self.schedule.learning_team]

    def is_learning(self, name: str) -> bool:
        return name == self.learning_name

    # ---------------------------------------------------------------- pool
    def _ensure_started(self) -> None:
        """Before the first action of a fresh run: the initial weights are snapshot 0 and the opponent."""
        if self.schedule.snapshots_taken == 0:
            self.pool.take(self.sess, self.schedule, self.learner.step)
            self.pool.play(self.sess, self.schedule, 0)

    def swap(self) -> int:
        """Give the opponent its next weights (the latest, or a ring snapshot)."""
        return self.pool.swap(self.sess, self.schedule)

    def after_learner_steps(self) -> None:
        """Snapshot every ``save_steps``; ask for a team change every ``team_change`` learner steps."""
        if not self.training:
            return
        step = self.learner.step
        if self.schedule.snapshots_taken and self.schedule.snapshot_due(step):
            self.pool.take(self.sess, self.schedule, step)
        if not self.pending_change and self.schedule.team_change_due(step):
            self.pending_change = True
            self._reset_reason = f"self-play: the learning team of {self.base} changes at learner step {step}"

    def after_opponent_steps(self, n: int) -> None:
        if self.schedule.add_opponent_steps(n) and self.training and self.schedule.snapshots_taken:
            self.swap()

    def take_reset_request(self) -> Optional[str]:
        reason, self._reset_reason = self._reset_reason, None
        return reason

    def end_episode(self, agents: Optional[Iterable[Hashable]]) -> None:
        """Cut episodes end the learner's trajectories and the opponent's memories; a requested team
        change happens now."""
        agents = None if agents is None else list(agents)
        self.learner.end_episode(agents)
        self.actor.forget(agents)
        if self.pending_change:
            self.pending_change = False
            old = self.learning_name
            self.schedule.change_team(self.learner.step)
            slot = self.swap()
            logger.info("%s: Step: %d. Self-play: the learning team changes from %s to %s; the opponent plays %s. "
                        "ELO %.3f.", self.base, self.learner.step, old, self.learning_name,
                        "the latest weights" if slot == LATEST else f"snapshot {slot}", self.schedule.elo)

    # ---------------------------------------------------------------- acting and scoring
    def opponent_act(self, seat: "TeamSeat", info: BrainInfo):
        self._ensure_started()
        actions, memories = self.actor.act(info)
        return self.learner._environment_actions(actions), memories, None, None

    def score_games(self, info: BrainInfo) -> None:
        """Rate each finished, uninterrupted game of the learning team by its last reward's sign."""
        group = getattr(info, "group_rewards", None)
        for j, done in enumerate(info.local_done):
            if done and not info.max_reached[j]:
                reward = float(info.rewards[j]) + (float(group[j]) if group is not None and len(group) > j else 0.0)
                self.schedule.record_game(reward)
                self.learner.add_stat("Self-play/ELO", self.schedule.elo)

    def write_summary(self, lesson: Any) -> None:
        learner = self.learner
        if learner._summary_due():
            if "Self-play/ELO" not in learner.stats:
                learner.add_stat("Self-play/ELO", self.schedule.elo)
            learner.add_stat("Self-play/Learning Team", float(self.schedule.learning_team))
            logger.info("%s: Step: %d. ELO: %.3f. Learning team: %s; opponent: %s (ELO %.3f); %d snapshot(s), %d "
                        "team change(s).", self.base, learner.step, self.schedule.elo, self.learning_name,
                        "latest" if self.schedule.current_opponent == LATEST
                        else f"snapshot {self.schedule.current_opponent}",
                        self.schedule.opponent_elo, self.schedule.filled, len(self.schedule.team_changes))
        learner.write_summary(lesson)

    def get_state(self) -> Dict[str, Any]:
        return {"learner": self.learner.state, "self_play": self.schedule.get_state(),
                "pending_change": self.pending_change}

    def set_state(self, state: Mapping[str, Any]) -> None:
        self.learner.state = state.get("learner", {})
        self.schedule.set_state(state.get("self_play", {}))
        self.pending_change = bool(state.get("pending_change", False))


def _learner_attribute(name: str) -> property:
    """A seat's read-only ``name``: its team's learner's, whichever team learns now."""
    return property(lambda seat: getattr(seat.group.learner, name), doc=f"The team's learner's ``{name}``.")


class TeamSeat(Trainer):
    """The trainer of one team's behaviour: the learner's when its team learns, else the opponent's.

    Only the first team's seat exports (the learner's network, as ``<Behaviour>.onnx``) and writes
    summaries; every seat reports the learner's step, so the run lasts the learner's ``max_steps``.
    """

    trainer_type = "ppo"

    def __init__(self, group: TeamSelfPlay, sess, brains, brain_name: str, params: Dict[str, Any], training: bool,
                 seed: int, context: TrainerContext):
        super().__init__(sess, brains, brain_name, params, training, seed, context=context)
        self.group = group
        self.team = team_id(brain_name)
        self.exports = brain_name == group.team_names[0]

    @property
    def learning(self) -> bool:
        return self.group.is_learning(self.brain_name)

    def _own(self, info: Mapping[str, BrainInfo]) -> Dict[str, BrainInfo]:
        return {self.group.base: info[self.brain_name]}

    # ---------------------------------------------------------------- the controller's calls
    def take_action(self, all_info):
        if self.learning:
            self.group._ensure_started()
            return self.group.learner.take_action(self._own(all_info))
        return self.group.opponent_act(self, all_info[self.brain_name])

    @property
    def collection(self) -> Collection:
        """The learner's: a seat's experience is the learner's when its team learns."""
        return self.group.learner.collection

    def process_experience(self, experience: Experience) -> None:
        """The learning team's experience is the learner's; the opponent's steps teach nothing."""
        if self.learning:
            self.group.learner.process_experience(experience)
            self.group.score_games(experience.latest)

    def is_ready_update(self) -> bool:
        return self.learning and self.group.learner.is_ready_update()

    def update_model(self) -> None:
        self.group.learner.update_model()

    def prepare_update(self) -> Optional[Callable[[], None]]:
        """The learner's update split for a ``threaded`` run (its batch taken now, the work returned), or
        None where the learner's update does not split; the controller then updates here."""
        prepare = getattr(self.group.learner, "prepare_update", None)
        return prepare() if prepare is not None else None

    def write_summary(self, lesson: Any = None) -> None:
        if self.learning:
            self.group.write_summary(lesson)

    def increment_step(self, n: int = 1) -> None:
        if self.learning:
            self.group.learner.increment_step(n)
            self.group.after_learner_steps()
        else:
            self.group.after_opponent_steps(n)

    def update_last_reward(self) -> None:
        if self.learning:
            self.group.learner.update_last_reward()

    def end_episode(self, agents: Optional[Iterable[Hashable]] = None) -> None:
        self.group.end_episode(agents)

    def reset_request(self) -> Optional[str]:
        """Why every environment must reset after this step (a team change), or None; the
        controller asks every trainer that defines this after each step."""
        return self.group.take_reset_request()

    # ---------------------------------------------------------------- what the controller reads
    get_step = _learner_attribute("step")
    get_max_steps = _learner_attribute("get_max_steps")
    get_last_reward = _learner_attribute("get_last_reward")

    @property
    def self_play_elo(self) -> float:
        """The learner's ELO (``training_status.json`` keeps it per behaviour)."""
        return self.group.schedule.elo

    @property
    def graph_scope(self) -> Optional[str]:
        return self.group.learner.graph_scope if self.exports else None

    def export_nodes(self) -> List[str]:
        return self.group.learner.export_nodes() if self.exports else []

    def onnx_action_outputs(self) -> Dict[str, str]:
        """The learner's own ONNX action outputs, where it declares them (SAC's tanh actions)."""
        return dict(getattr(self.group.learner, "onnx_action_outputs", dict)())

    def write_tensorboard_text(self, key: str, input_dict: Mapping[str, Any]) -> None:
        if self.exports:
            self.group.learner.write_tensorboard_text(key, input_dict)

    def _saved_state(self) -> Dict[str, Any]:
        return {"team": self.team, **self.group.get_state()}

    def _restore_state(self, state: Dict[str, Any]) -> None:
        self.group.set_state(state)

    def close(self) -> None:
        if self.exports:
            self.group.learner.close()


def build_team_trainers(sess, brains: Mapping[str, BrainParameters], team_names: Sequence[str],
                        params: Dict[str, Any], learner_class: type, training: bool, seed: int = 0,
                        context: Optional[TrainerContext] = None) -> Dict[str, TeamSeat]:
    """The seats of one team behaviour, sharing one learner: ``{'Tennis?team=0': seat, ...}``; ``context``
    (None: the seed's keys of ``params``) places the learner's graph and summaries."""
    return TeamSelfPlay(sess, brains, team_names, params, learner_class, training, seed, context).seats
