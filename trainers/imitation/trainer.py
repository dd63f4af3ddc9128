"""Imitation (behavioural cloning): an External *student* brain learns to act like a teacher brain.

The teacher is a Player, Heuristic or Internal brain with ``broadcast`` on (API-2 then sends its
``BrainInfo`` to Python as well): Python receives its states and, in ``previous_actions``, the
action each of its agents executed at the previous decision, but cannot act for it. The student is trained here by
supervised learning on the teacher's (state, action) pairs, and acts in the scene with its own
policy meanwhile, so its episode rewards measure how well it imitates.

Pairing. ``next_info.previous_actions`` is the action executed from ``info.states``, so the
trainer pairs, for each teacher agent present in both infos, ``info.states[i]`` (and its camera
frames) with ``next_info.previous_actions[j]``. Done flags need no special case: when
``info`` says done, its state is already the first state of the new episode and the action in
``next_info`` was taken from it; when ``next_info`` says done, its state is post-reset but its
``previous_actions`` is still the action taken from ``info``'s state. Both pairs are valid.

Network: the vector state (one-hot if discrete, optionally normalised by running statistics) and
one small CNN per camera, concatenated, then ``num_layers`` x ``hidden_units`` ELU layers, then
discrete logits (softmax cross-entropy against the teacher's action index) or continuous outputs
(squared error). Exported per the contract of ``docs/plugins.md`` §6: inputs ``state``,
``observation_k``, ``batch_size``; output ``action`` (continuous float32 ``[N, a]``; discrete
int64 ``[N, 1]``, the most probable action: the teacher we copy is a fixed policy, and sampling
would only add mistakes to it).

Differences from the original ML-Agents 0.3 imitation trainer: no int32/int64 comparison,
discrete actions are not reshaped with the state, ``max_steps`` is a number, the update needs a full minibatch,
and demonstrations live in a bounded buffer of recent pairs instead of being dropped after one
pass, so every pair is used about ``batches_per_epoch`` times.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from trainers.buffer import ReplayBuffer
from trainers.encoders import concat_features, create_inputs
from trainers.models import dense, mlp
from trainers.stopping import stop_requested
from trainers.tf_utils import tf
from trainers.trainer.base import (
    COMMON_HYPERPARAMETERS,
    Param,
    Trainer,
    TrainerConfigError,
    UnityTrainerException,
    check_batch_fits,
    check_same_spaces,
    learning_rate_param,
    logger,
    non_negative,
    positive,
)
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.trajectory import Collection, Experience, Transitions
from unityagents.brain import BrainParameters


class ImitationModel:
    """The student's network and its supervised loss, built once in the current scope.

    Public tensors: ``state_in`` (None without a state), ``observation_in``, ``batch_size``,
    ``output`` (the exported ``action``), ``teacher_actions`` (int32 ``[None]`` or float32
    ``[None, a]``), ``learning_rate``, ``loss``, ``accuracy`` (discrete only, else None),
    ``update_batch``, ``update_normalization`` (None unless normalising).
    """

    def __init__(self, brain: BrainParameters, h_size: int = 64, num_layers: int = 2, lr: float = 1e-3,
                 normalize: bool = False):
        self.is_continuous = brain.action_space_type == "continuous"
        a = brain.action_space_size
        self.batch_size = tf.placeholder(tf.int32, None, name="batch_size")
        # The shared encoder; vector_name=None: the network reads the state placeholder (or its
        # unnamed one-hot) directly, the layout this graph has always exported.
        self.inputs = create_inputs(brain, h_size, normalize, vector_name=None, reader="the student")
        self.state_in = self.inputs.state
        self.observation_in = self.inputs.observations
        self.update_normalization = self.inputs.update_normalization
        encoded = concat_features(self.inputs.features)
        hidden = mlp(encoded, h_size, num_layers, "policy", activation=tf.nn.elu)
        head = dense(hidden, a, "policy_head", gain=0.01)

        self.learning_rate = tf.placeholder_with_default(float(lr), [], name="learning_rate")
        self.accuracy = None
        if self.is_continuous:
            self.output = tf.identity(head, name="action")
            self.teacher_actions = tf.placeholder(tf.float32, [None, a], name="teacher_actions")
            self.loss = tf.reduce_mean(tf.reduce_sum(tf.square(head - self.teacher_actions), axis=1), name="loss")
        else:
            self.action_probs = tf.nn.softmax(head, name="action_probs")
            greedy = tf.argmax(head, axis=1, output_type=tf.int64)
            self.output = tf.expand_dims(greedy, 1, name="action")
            self.teacher_actions = tf.placeholder(tf.int32, [None], name="teacher_actions")
            self.loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.teacher_actions, logits=head), name="loss")
            self.accuracy = tf.reduce_mean(
                tf.cast(tf.equal(greedy, tf.cast(self.teacher_actions, tf.int64)), tf.float32), name="accuracy")
        self.update_batch = tf.train.AdamOptimizer(self.learning_rate).minimize(self.loss)


IMITATION_HYPERPARAMETERS: Dict[str, Param] = {
    **COMMON_HYPERPARAMETERS,
    "brain_to_imitate": Param(str, None, required=True,
                              doc="the broadcasting Player/Heuristic/Internal brain to learn from"),
    "batch_size": Param(int, 64, check=(positive, "> 0"),
                        doc="pairs per minibatch; an update runs once this many new pairs arrived"),
    "batches_per_epoch": Param(int, 10, check=(positive, "> 0"),
                               doc="Adam steps per update (each pair is used about this many times)"),
    "buffer_size": Param(int, 10240, check=(positive, "> 0"),
                         doc="most recent (state, action) pairs kept for training"),
    "hidden_units": Param(int, 64, check=(positive, "> 0"), doc="units per hidden layer"),
    "num_layers": Param(int, 2, check=(non_negative, ">= 0"), doc="hidden ELU layers"),
    "learning_rate": learning_rate_param(1.0e-3, "Adam learning rate"),
    "normalize": Param(bool, False, doc="normalise continuous states by running statistics of the teacher's states"),
    "time_horizon": Param(int, 64, check=(positive, "> 0"),
                          doc="accepted for seed configurations; unused (pairs are stored as they arrive)"),
}


class ImitationTrainer(Trainer):
    """Trains ``brain_name`` to copy the actions of the broadcasting brain ``brain_to_imitate``.

    Steps, ``max_steps`` and ``summary_freq`` count the student's agent steps. Summaries:
    ``Info/loss`` (and ``Info/accuracy`` for discrete actions), the student's
    ``Info/cumulative_reward`` and ``Info/episode_length``, and ``Info/teacher_reward``, the
    teacher's episode rewards, so the two can be compared. The demonstrations are not part of
    checkpoints; after ``--load`` the buffer refills from the running teacher.
    """

    trainer_type = "imitation"
    hyperparameters = IMITATION_HYPERPARAMETERS
    #: The student regresses on the actions the teacher executed, which are already in the
    #: environment's own units: they are not rescaled on the way back.
    continuous_actions_bounded = True

    def setup(self) -> None:
        super().setup()
        self.teacher_name: str = self.settings.brain_to_imitate
        self.is_continuous = self.brain.action_space_type == "continuous"
        with self.build_scope():
            self.model = ImitationModel(
                self.brain, h_size=self.settings.hidden_units, num_layers=self.settings.num_layers,
                lr=self.settings.learning_rate, normalize=self.settings.normalize,
            )
        #: The most recent ``buffer_size`` (state, teacher action) pairs. Recent, because the teacher
        #: is a fixed policy whose old pairs stay correct but whose situations drift with the scene's
        #: curriculum; bounded, because cameras make pairs large; each pair is still drawn many times.
        self.demonstrations = ReplayBuffer(self.settings.buffer_size)
        self._pairs_since_update = 0

    # ------------------------------------------------------------------ configuration
    @classmethod
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        check_batch_fits(brain_name, params, "no minibatch could be drawn from the buffer of recent pairs "
                                             "(batch_size cannot exceed buffer_size)")
        return super().check_parameters(brain_name, params)

    @classmethod
    def check_environment(cls, brain_name: str, params: Dict[str, Any],
                          brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        """The teacher must broadcast (subscribed but not External) and match the student's spaces."""
        teacher = params.get("brain_to_imitate")
        where = f"brain '{brain_name}', key 'brain_to_imitate'"
        broadcasting = sorted(n for n in brains if n not in external_brain_names)
        if teacher == brain_name:
            raise TrainerConfigError(f"{where}: a brain cannot imitate itself. Name the broadcasting teacher brain.")
        if teacher not in brains:
            raise TrainerConfigError(
                f"{where}: the teacher {teacher!r} does not broadcast: the environment sends no brain of that name "
                f"(broadcasting brains: {', '.join(broadcasting) or 'none'}; External: "
                f"{', '.join(external_brain_names)}). Set the teacher to Player, Heuristic or Internal with "
                "'broadcast' on, or fix the name.")
        if teacher in external_brain_names:
            raise TrainerConfigError(
                f"{where}: the teacher {teacher!r} is External, so its actions would come from Python and there is "
                "nothing to imitate. Make it a Player, Heuristic or Internal brain with 'broadcast' on"
                f"{' (broadcasting brains: ' + ', '.join(broadcasting) + ')' if broadcasting else ''}.")
        check_same_spaces(where, brains, brain_name, teacher,
                          "the student learns the teacher's state -> action mapping")

    # ------------------------------------------------------------------ acting
    def _input_feed(self, info: BrainInfo) -> Dict[tf.Tensor, Any]:
        m = self.model
        feed: Dict[tf.Tensor, Any] = {m.batch_size: len(info.agents)}
        if m.state_in is not None:
            feed[m.state_in] = info.states
        for placeholder, observation in zip(m.observation_in, info.observations):
            feed[placeholder] = observation
        return feed

    def take_action(self, all_info: Mapping[str, BrainInfo]) -> Tuple[np.ndarray, None, None, None]:
        """The student acts with its own policy (the exported ``action``)."""
        actions = self.sess.run(self.model.output, self._input_feed(all_info[self.brain_name]))
        return self._environment_actions(actions.astype(np.float32)), None, None, None

    # ------------------------------------------------------------------ collecting
    def teacher_pairs(self, transitions: Transitions) -> Dict[str, np.ndarray]:
        """The (state, action) pairs of one teacher step: the state each agent acted from and the
        action it executed (the ``previous_actions`` of the step that answers it)."""
        now, later, info = transitions.rows, transitions.next_rows, transitions.before
        actions = np.asarray(transitions.after.previous_actions)[later]
        if self.is_continuous:
            actions = actions.reshape(len(later), self.brain.action_space_size).astype(np.float32)
        else:
            actions = np.floor(actions.reshape(len(later))).astype(np.int32)  # agent scripts floor the index
            bad = actions[(actions < 0) | (actions >= self.brain.action_space_size)]
            if bad.size:
                raise UnityTrainerException(
                    f"The teacher '{self.teacher_name}' executed action {int(bad[0])}, outside 0..."
                    f"{self.brain.action_space_size - 1} (actionSize of '{self.brain_name}'). The teacher's decisions "
                    "must be valid action indices of the student's action space.")
        pairs = {"actions": actions}
        if self.model.state_in is not None:
            pairs["states"] = np.asarray(info.states)[now]
        for k, observation in enumerate(info.observations):
            pairs[f"observations{k}"] = np.asarray(observation, dtype=np.float32)[now]
        return pairs

    @property
    def collection(self) -> Collection:
        """The teacher's steps are the student's training pairs."""
        return Collection(linked_brains=(self.teacher_name,))

    def process_experience(self, experience: Experience) -> None:
        """Store the teacher's pairs of this step (and fold its states into the normaliser); record
        the episodes of the student (``cumulative_reward``) and of the teacher (``teacher_reward``)."""
        teacher = experience.linked[self.teacher_name]
        if teacher.transitions is not None:
            pairs = self.teacher_pairs(teacher.transitions)
            self.demonstrations.add(pairs)
            self._pairs_since_update += len(pairs["actions"])
            if self.is_training and self.model.update_normalization is not None:
                self.sess.run(self.model.update_normalization, {self.model.state_in: pairs["states"]})
        self._record_episodes(experience.episodes)
        for episode in teacher.episodes:
            self.add_stat("teacher_reward", episode.reward)

    # ------------------------------------------------------------------ updating
    def is_ready_update(self) -> bool:
        """Once ``batch_size`` new pairs arrived since the last update."""
        return self._pairs_since_update >= self.settings.batch_size

    def update_model(self) -> None:
        """``batches_per_epoch`` Adam steps on minibatches drawn from the recent pairs."""
        m = self.model
        batch_size = self.settings.batch_size
        fetches = [m.loss] + ([m.accuracy] if m.accuracy is not None else []) + [m.update_batch]
        metrics = []
        for _ in range(self.settings.batches_per_epoch):
            if metrics and stop_requested():  # the run stops: the minibatches taken so far are the update
                break
            batch = self.demonstrations.sample(batch_size, self.rng, distinct=True)
            feed: Dict[tf.Tensor, Any] = {m.batch_size: batch_size, m.teacher_actions: batch["actions"]}
            if m.state_in is not None:
                feed[m.state_in] = batch["states"]
            for k, placeholder in enumerate(m.observation_in):
                feed[placeholder] = batch[f"observations{k}"]
            metrics.append(self.sess.run(fetches, feed)[:-1])
        for key, value in zip(("loss", "accuracy"), np.mean(metrics, axis=0)):
            self.add_stat(key, value)
        self._pairs_since_update = 0

    def write_summary(self, lesson: Optional[int] = None) -> None:
        """Add the teacher's mean reward and the loss to the console line, then the usual summary."""
        if self._summary_due():
            teacher, loss = self.stats.get("teacher_reward"), self.stats.get("loss")
            logger.info(
                "%s: Step: %d. Imitating %s: teacher mean reward %s, imitation loss %s, %d pairs in the buffer.",
                self.brain_name, self.step, self.teacher_name,
                f"{np.mean(teacher):.3f}" if teacher else "- (no teacher episode ended)",
                f"{np.mean(loss):.4f}" if loss else "- (no update yet)", len(self.demonstrations))
        super().write_summary(lesson)

    def export_nodes(self) -> List[str]:
        return ["action"]
