"""The ghost: an opponent that plays with past snapshots of another brain's policy (self-play).

In an adversarial scene (Tennis) one External brain learns with PPO and the other side is a
*ghost* of it: ``ghost-TennisBrain`` with ``brain_to_copy: TennisBrain``. Playing against a pool
of earlier selves rather than only the latest one keeps the learner from chasing its own tail
(forgetting how to beat older strategies) and gives it opponents of gradually rising strength.

Everything is built once in ``setup`` (the controller finalizes the graph before the loop):

* the acting network: ``create_agent_model`` with exactly the arguments the copied brain's PPO
  trainer used (recurrent included, with the brain's ``memorySize``), under the ghost's scope;
* the pool (``trainers.ghost.snapshot.SnapshotPool``, self-play's one mechanism, which Release 22's
  team self-play drives too): one non-trainable variable per copied weight, with a leading axis of
  ``max_num_models`` slots, so the checkpoint holds the pool and ``--load`` restores it, and two
  assign ops, parameterised by a slot-index placeholder: "snapshot the learner into slot k" and
  "load slot k into the acting network"; its slots, the opponent drawn and the ratings are kept
  by a ``trainers.ghost.self_play.SnapshotRing``.

Unlike the original ML-Agents 0.3 ghost trainer, this ghost builds no op
after set-up, matches weights by their name relative to each brain's scope (not by zip order of
prefix-matched collections), passes the memory size (not the parameter dict) as ``m_size``,
writes a summary, and never keeps the run alive: it is not a learner, so the controller stops
when the brains it serves have reached their ``max_steps``.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from trainers.ghost.self_play import SnapshotRing
from trainers.ghost.snapshot import SnapshotPool, pool_copying, variables_read_by  # noqa: F401 (importable here)
from trainers.ppo.models import PPOModel, create_agent_model
from trainers.ppo.policy import PPOPolicy
from trainers.ppo.trainer import PPOTrainer
from trainers.tf_utils import tf
from trainers.trainer.base import (
    COMMON_HYPERPARAMETERS,
    Param,
    Trainer,
    TrainerConfigError,
    UnityTrainerException,
    check_same_spaces,
    logger,
    positive,
)
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.trajectory import Collection, Experience
from unityagents.brain import BrainParameters

#: The learner's rating at the start, and the ghost's K factor: each game moves the learner's rating by
#: ``ELO_K * (score - expected)`` (``trainers.ghost.self_play.elo_change``), 16 being the usual step for
#: established players. Why ELO: raw win rates against a pool are not comparable over time (the pool
#: gets stronger as the learner does); a rating keeps rising only while the learner beats opponents whose
#: ratings were, in turn, earned. Each snapshot keeps the learner's rating from when it was taken; a game
#: moves only the learner's.
INITIAL_ELO = 1200.0
ELO_K = 16.0

def _ring_view(name: str, doc: str) -> property:
    """A ghost's read-only view of its ring's ``name``."""
    return property(lambda ghost: getattr(ghost.ring, name), doc=doc)


GHOST_HYPERPARAMETERS: Dict[str, Param] = {
    **COMMON_HYPERPARAMETERS,
    "brain_to_copy": Param(str, None, required=True,
                           doc="the External brain (trained here by PPO) whose past policies this brain plays"),
    "new_model_freq": Param(int, 10000, check=(positive, "> 0"),
                            doc="agent steps of the ghost brain between snapshots of the copied brain"),
    "max_num_models": Param(int, 10, check=(positive, "> 0"), doc="snapshots kept; the oldest is overwritten first"),
}


class GhostTrainer(Trainer):
    """Acts for ``brain_name`` with a random past snapshot of ``brain_to_copy``'s policy.

    * A snapshot is taken before the first action and then every ``new_model_freq`` agent steps
      *of the ghost brain* (its own agents, counted by the controller; with one ghost per learner
      agent, as in Tennis, that is also the learner's step count), into the next slot, round
      robin (only while training; in inference the restored pool is kept as it is).
    * A new random filled slot is picked after every global reset (``end_episode``) and whenever
      one of the ghost's agents finishes an episode. All ghost agents share one acting network,
      so the agents still playing then continue against the new snapshot.
    * Continuous actions are sampled (mean + sigma * N(0, 1)) like the learner's while training:
      a snapshot is a stochastic policy, and sampled play is how that past self really played;
      a ``deterministic`` learner's ghost plays the mean and the most probable actions, as it does.
    * Self-play rating: see ``ELO_K`` and :meth:`episode_scores`.

    Its own ``max_steps`` is not used: the ghost never keeps the run going (``should_still_train``
    is False; the controller loops only while a learner does), and ``get_max_steps`` reports the
    copied brain's, for the console's ETA.
    """

    trainer_type = "ghost"
    is_learner = False
    hyperparameters = GHOST_HYPERPARAMETERS

    def setup(self) -> None:
        super().setup()
        brain_name = self.brain_name
        self.copied_name: str = self.settings.brain_to_copy
        self.new_model_freq = self.settings.new_model_freq
        self.max_num_models = self.settings.max_num_models
        self.is_continuous = self.brain.action_space_type == "continuous"
        original = self._context.copied
        if not isinstance(original, Mapping):
            raise UnityTrainerException(
                f"The ghost trainer of brain '{brain_name}' needs the resolved settings of '{self.copied_name}' "
                "(its TrainerContext's copied, or the seed's 'original_brain_parameters' with their graph_scope), "
                f"which the controller gives; got {original!r}.")
        self.original = original
        copied_type = original.get("trainer", "ppo")
        if copied_type != "ppo":
            raise UnityTrainerException(
                f"Brain '{brain_name}' is a ghost of '{self.copied_name}', which is trained by the {copied_type!r} "
                "trainer; a ghost can only copy a brain trained by the 'ppo' trainer (it rebuilds that brain's "
                f"PPO network). Train '{self.copied_name}' with PPO or drop the ghost.")
        self.copied_brain = self.brains[self.copied_name]
        self.use_recurrent = bool(original.get("use_recurrent", False))
        if self.use_recurrent and self.brain.memory_space_size != self.copied_brain.memory_space_size:
            raise UnityTrainerException(
                f"Brain '{brain_name}' is a ghost of the recurrent brain '{self.copied_name}', whose memorySize is "
                f"{self.copied_brain.memory_space_size}, but its own memorySize is {self.brain.memory_space_size}: "
                "the LSTM state round-trips through the ghost's agents' memories. Give both brains the same "
                "Memory Size in the scene.")

        scope, copied_scope = self._context.graph_scope, self._context.copied_scope
        if not scope or scope == copied_scope:
            raise UnityTrainerException(
                f"The ghost brain '{brain_name}' needs a graph scope of its own, distinct from that of "
                f"'{self.copied_name}' ({copied_scope!r}); got {scope!r}. The controller gives every brain one "
                "when several External brains are trained.")
        with self.sess.graph.as_default(), tf.variable_scope(scope):
            self.model: PPOModel = create_agent_model(self.copied_brain, **PPOTrainer.model_arguments(original))
            acting_outputs = [self.model.output] + ([self.model.memory_out] if self.use_recurrent else [])
            self.pool: SnapshotPool = pool_copying(acting_outputs, scope, copied_scope, self.max_num_models,
                                                   f"The ghost '{brain_name}' of '{self.copied_name}'")
        # Acts as the PPO trainer does (the same inputs, memories and noise), always sampling.
        self.policy = PPOPolicy(self.sess, self.model, self.brain, self.rng,
                                keeps_memories=self.use_recurrent and not self.brain.memory_space_size)
        self._fetches = {"action": self.model.output, **({"memory_out": self.model.memory_out}
                                                         if self.use_recurrent else {})}
        #: The copied brain's ``deterministic``: the ghost then plays its snapshots' mean / argmax too.
        self.deterministic = bool(original.get("deterministic", False))
        if self.deterministic and (self.model.is_hybrid or not self.model.is_continuous):
            self._fetches["probs"] = self.model.probs

        #: Snapshots, opponent and ratings: a random filled slot at each draw, ELO with the K factor
        #: ``ELO_K`` and only the learner rated.
        self.ring = SnapshotRing(self.max_num_models, INITIAL_ELO, self.rng, k=ELO_K, rate_opponent=False)
        self._next_snapshot_step = 0
        self.games: List[float] = []  # the learner's scores since the last summary

    # ------------------------------------------------------------------ configuration
    @classmethod
    def check_environment(cls, brain_name: str, params: Dict[str, Any],
                          brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        """``brain_to_copy`` must be another External brain with the same spaces as this one."""
        copied = params.get("brain_to_copy")
        where = f"brain '{brain_name}', key 'brain_to_copy'"
        if copied == brain_name:
            raise TrainerConfigError(f"{where}: a ghost cannot copy itself. Name the External brain it plays against.")
        if copied not in brains:
            raise TrainerConfigError(
                f"{where}: the brain {copied!r} is not in the environment (its brains: {', '.join(sorted(brains))}). "
                "Name an External brain of the scene.")
        if copied not in external_brain_names:
            others = ", ".join(n for n in external_brain_names if n != brain_name) or "none besides this one"
            raise TrainerConfigError(
                f"{where}: the brain {copied!r} is not External, so it is not trained here and has no weights to "
                f"copy. Name an External brain: {others}.")
        check_same_spaces(where, brains, brain_name, copied, f"the ghost plays with {copied!r}'s network")

    # ------------------------------------------------------------------ seed surface
    @property
    def graph_scope(self) -> Optional[str]:
        """None: the ghost exports nothing (its network is a copy of another brain's)."""
        return None

    @property
    def should_still_train(self) -> bool:
        return False

    @property
    def get_max_steps(self) -> float:
        """The copied brain's ``max_steps``: the ghost plays exactly as long as its learner trains.

        Its own ``max_steps`` (usually the ``default:`` block's) ends nothing, so the console's
        ETA would otherwise count down to a step the run never reaches.
        """
        return float(self.original.get("max_steps", self.settings.max_steps))

    def export_nodes(self) -> List[str]:
        return []

    # ------------------------------------------------------------------ the pool
    n_snapshots = _ring_view("snapshots_taken", "Snapshots taken so far; the filled slots are 0 .. min(n, size) - 1.")
    filled_slots = _ring_view("filled", "The filled slots of the pool.")
    current_slot = _ring_view("current_opponent", "The slot the ghost plays now.")
    elo = _ring_view("elo", "The learner's rating against the pool.")

    def take_snapshot(self) -> int:
        """Copy the learner's weights into the next slot (round robin); return the slot."""
        slot = self.pool.take(self.sess, self.ring)
        self._next_snapshot_step = (self.step // self.new_model_freq + 1) * self.new_model_freq
        return slot

    def select_slot(self, slot: Optional[int] = None) -> int:
        """Load ``slot`` (a random filled one when None) into the acting network."""
        if slot is None:
            slot = self.ring.choose_opponent()
        elif not 0 <= slot < self.filled_slots:
            raise UnityTrainerException(
                f"Ghost '{self.brain_name}': slot {slot} is not filled (filled: 0..{self.filled_slots - 1}).")
        return self.pool.play(self.sess, self.ring, slot)

    @property
    def collection(self) -> Collection:
        """The learner's episodes are read beside the ghost's, to score each game."""
        return Collection(linked_brains=(self.copied_name,))

    def increment_step(self, n: int = 1) -> None:
        """Count agent steps; snapshot the learner every ``new_model_freq`` of them when training."""
        super().increment_step(n)
        if self.is_training and self.n_snapshots and self.step >= self._next_snapshot_step:
            self.take_snapshot()

    # ------------------------------------------------------------------ acting
    def take_action(self, all_info: Mapping[str, BrainInfo]) -> Tuple[np.ndarray, Optional[np.ndarray], None, None]:
        """Act with the current snapshot (the first call snapshots the learner if the pool is empty)."""
        if self.n_snapshots == 0:
            self.take_snapshot()
            self.select_slot(0)
        info = all_info[self.brain_name]
        memories = self.policy.memories(info) if self.use_recurrent else None
        out, _ = self.policy.act(info, self._fetches, sample=not self.deterministic, memories=memories)
        actions = out["action"]
        if self.deterministic:
            actions, _ = self.policy.greedy(actions, out.get("probs"))
        if self.use_recurrent:
            self.policy.remember(info, out["memory_out"])
        return self._environment_actions(actions), out.get("memory_out"), None, None

    # ------------------------------------------------------------------ episodes and rating
    @staticmethod
    def episode_scores(ghost_rewards: Sequence[float], learner_rewards: Sequence[float]) -> List[float]:
        """The learner's score (1 win, 0.5 draw, 0 loss) for each ghost episode that just ended.

        Episodes that end at the same step are paired in agent order (the k-th finished ghost
        agent played the k-th finished learner agent: in Tennis both agents of a court finish
        together, and both brains list their agents court by court). The learner wins a paired
        game if its episode reward is higher than the ghost's: in Tennis each side gets +0.1 per
        ball played over the net and the side that loses the rally -0.1, so the winner of the
        rally always ends ahead. A ghost episode without a partner counts as lost by the ghost if
        its reward is negative, won if positive, and a draw if zero.
        """
        scores = []
        for k, ghost in enumerate(ghost_rewards):
            margin = learner_rewards[k] - ghost if k < len(learner_rewards) else -ghost
            scores.append(1.0 if margin > 0 else 0.0 if margin < 0 else 0.5)
        return scores

    def process_experience(self, experience: Experience) -> None:
        """Both brains' ended episodes (the collector's); on finished ghost episodes, rate and re-draw."""
        ghost_finished = [episode.reward for episode in experience.episodes]
        learner_finished = [episode.reward for episode in experience.linked[self.copied_name].episodes]
        for reward in ghost_finished:
            self.add_stat("cumulative_reward", reward)
        if not ghost_finished or self.n_snapshots == 0:  # nothing ended, or the ghost never played
            return
        for score in self.episode_scores(ghost_finished, learner_finished):
            self.ring.record_game(score)
            self.games.append(score)
        self.select_slot()

    def end_episode(self, agents: Optional[Iterable[Hashable]] = None) -> None:
        """After an environment reset (whose unfinished games the collector drops without a result),
        a snapshot is drawn: all ghost agents share one acting network."""
        if self.n_snapshots:
            self.select_slot()

    def write_summary(self, lesson: Optional[int] = None) -> None:
        """Every ``summary_freq`` steps: ``Self-play/ELO`` and the learner's results since the last one."""
        if not self._summary_due():
            return
        games, self.games = self.games, []
        values = {"Self-play/ELO": self.elo, "Self-play/snapshots": self.filled_slots}
        if games:
            values["Self-play/learner_win_rate"] = float(np.mean([g == 1.0 for g in games]))
            values["Self-play/learner_score"] = float(np.mean(games))
        logger.info(
            "%s: Step: %d. Self-play: %s ELO %.1f; %d game(s) since the last summary (%d won, %d drawn, %d lost); "
            "playing snapshot %d of %d.",
            self.brain_name, self.step, self.copied_name, self.elo, len(games), games.count(1.0),
            games.count(0.5), games.count(0.0), self.current_slot, self.filled_slots)
        self._write_scalars(values)
        super().write_summary(lesson)

    # ------------------------------------------------------------------ state beyond TF variables
    def _saved_state(self) -> Dict[str, Any]:
        """Step, pool bookkeeping and rating; the pool's weights are in the checkpoint."""
        return {
            **super()._saved_state(),
            "n_snapshots": self.n_snapshots,
            "current_slot": self.current_slot,
            "next_snapshot_step": self._next_snapshot_step,
            "elo": self.elo,
            "slot_ratings": self.ring.elos[:-1],
        }

    def _restore_state(self, state: Dict[str, Any]) -> None:
        super()._restore_state(state)
        ring = self.ring
        ring.snapshots_taken = int(state.get("n_snapshots", 0))
        ring.current_opponent = int(state.get("current_slot", 0))
        self._next_snapshot_step = int(state.get("next_snapshot_step", 0))
        ratings = state.get("slot_ratings")
        if ratings is not None and len(ratings) == ring.size:
            ring.elos[:-1] = [float(r) for r in ratings]
        ring.elos[-1] = float(state.get("elo", ring.elo))
