"""Behavioral cloning beside PPO or SAC: a supervised loss that pulls the policy toward recorded actions.

Why: on a sparse-reward task the policy gradient has nothing to follow until the agent stumbles
on the goal, while a ``.demo`` recording (Unity's Demonstration Recorder, or ``python -m academy
<Scene> --record-demo``) shows the way at once. Configured as ML-Agents users know it::

    PyramidsBrain:
        behavioral_cloning:
            demo_path: demos/Pyramids.demo     # a .demo file or a folder of them
            strength: 0.5                      # BC learning rate = learning_rate x strength
            steps: 150000                      # strength falls linearly to 0 over these agent steps
            samples_per_update: 0              # demo samples per epoch (0: the whole demonstration)
            num_epoch: 3                       # default 3
            batch_size: 512                    # default: the trainer's batch_size

After each PPO update (for SAC: after the gradient steps of an update call, at most once per
``time_horizon`` agent steps, the trajectory length after which ML-Agents' trainers update),
``num_epoch`` shuffled passes over the demonstration run minibatches of a loss of their own, with
their own Adam optimiser over the policy's variables (the encoders included; the value network and
the critics get no gradient from it):

* discrete actions: the cross-entropy of the expert's action in each branch (averaged over the
  branches), under the policy's action probabilities with the recorded action masks applied;
* continuous actions: the mean squared error between the policy's deterministic action in the
  environment's units and the expert's recorded action, which is in the environment's units too
  (PPO's mean as it is over API-2 and ``clamp(mean, -3, 3) / 3`` over gRPC; SAC's ``tanh(mean)``).

Each trainer says what BC may see of its policy graph through a ``ClonedPolicy``
(``trainer.cloned_policy()``), so this module reads no trainer's model attributes.

Its learning rate is the trainer's ``learning_rate`` times ``strength`` and, with ``steps`` > 0,
falls linearly to 0 at ``steps`` agent steps; after that BC stops running. The loss is reported
as ``Losses/Pretraining Loss`` (ML-Agents' tag). The demonstration is checked against the brain
(action spec, state size, cameras) before training starts (``check_environment``), and steps that
end an episode are left out (their recorded action was never carried out). Recurrent policies are refused: the recorded
steps would need the policy's memories, which a recording cannot hold.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from trainers.settings.schema import (
    Param,
    TrainerConfigError,
    Where,
    brain_key,
    check_block,
    non_negative,
    positive,
    settings_type,
    settings_view,
)
from trainers.stopping import stop_requested
from trainers.tf_utils import tf
from unityagents.brain import BrainParameters
from unityagents.demo import Demonstration, DemonstrationError, load_demonstration

#: The keys of the ``behavioral_cloning`` block (docs/configuration.md lists them).
BC_PARAMETERS: Dict[str, Param] = {
    "demo_path": Param(str, None, required=True, check=(bool, "the path of a .demo file or folder"),
                       doc="a .demo file, or a folder whose .demo files are all used"),
    "strength": Param(float, 1.0, check=(non_negative, ">= 0"),
                      doc="BC learning rate as a multiple of the trainer's learning_rate"),
    "steps": Param(int, 0, check=(non_negative, ">= 0"),
                   doc="agent steps over which strength falls linearly to 0 (0: constant, never stops)"),
    "samples_per_update": Param(int, 0, check=(non_negative, ">= 0"),
                                doc="demonstration samples per epoch (0: all of them)"),
    "num_epoch": Param(int, 3, check=(positive, "> 0"), doc="passes over the demonstration per PPO update"),
    "batch_size": Param(int, None, check=(positive, "> 0"), doc="samples per BC minibatch (default: batch_size)"),
}

def validate_behavioral_cloning(brain_name: str, value: Any) -> Optional[Dict[str, Any]]:
    """The block checked and completed with defaults, or None when absent.

    Errors are ``TrainerConfigError``s naming the brain and the dotted key
    (``behavioral_cloning.strenght``), with a "did you mean" for near misses.
    """
    return check_behavioral_cloning(brain_key(f"brain '{brain_name}'", "behavioral_cloning"), value)


def check_behavioral_cloning(where: Where, value: Any) -> Optional[Dict[str, Any]]:
    """``validate_behavioral_cloning`` with the block named by ``where`` (the declaration's ``Param.block``)."""
    if value is None:
        return None
    return check_block(where, value, BC_PARAMETERS, "behavioral_cloning")


#: A checked ``behavioral_cloning`` block as a frozen dataclass (``settings.behavioral_cloning.strength``).
BehavioralCloningSettings = settings_type(BC_PARAMETERS, "BehavioralCloningSettings")

#: The ``behavioral_cloning`` hyperparameter of PPO.
BEHAVIORAL_CLONING_PARAM = Param(
    dict, None, doc="nested block {demo_path, strength, steps, samples_per_update, num_epoch, batch_size}: "
                    "a cloning loss toward recorded actions beside the RL update (see below); absent: none",
    view=lambda brain_name, value: settings_view(BC_PARAMETERS, value, "BehavioralCloningSettings"),
    block=check_behavioral_cloning)


def check_demonstration(brain_name: str, settings: Optional[Dict[str, Any]], brain: BrainParameters,
                        use_recurrent: bool) -> Optional[Demonstration]:
    """The demonstration, or TrainerConfigError (before training) when it is unusable for ``brain``."""
    if settings is None:
        return None
    if use_recurrent:
        raise TrainerConfigError(
            f"brain '{brain_name}', key 'behavioral_cloning': not supported with use_recurrent: true (a recording "
            "holds no policy memories). Set use_recurrent: false or remove the block.")
    try:
        return load_demonstration(settings["demo_path"], brain)
    except DemonstrationError as exc:
        raise TrainerConfigError(f"brain '{brain_name}', key 'behavioral_cloning.demo_path': {exc}") from None


def check_demonstrations(brain_name: str, params: Dict[str, Any], brain: BrainParameters) -> None:
    """Before training: the ``behavioral_cloning`` and ``reward_signals.gail`` recordings fit ``brain``."""
    check_demonstration(brain_name, params.get("behavioral_cloning"), brain, bool(params.get("use_recurrent")))
    gail = (params.get("reward_signals") or {}).get("gail")
    if gail:
        try:
            load_demonstration(gail["demo_path"], brain)
        except DemonstrationError as exc:
            raise TrainerConfigError(f"brain '{brain_name}', key 'reward_signals.gail.demo_path': {exc}") from None


@dataclass(frozen=True)
class ClonedPolicy:
    """What behavioral cloning needs of a trainer's policy graph, declared by the trainer.

    ``action`` (continuous) is the deterministic action in the environment's units, ``probs``
    (discrete) the branches' probabilities side by side with ``action_masks`` applied; exactly one
    of them is set. ``batch_size`` is the placeholder fed the minibatch's length, if the graph has
    one; ``constant_feed`` holds any other placeholders with a fixed value (PPO's sequence length).
    """

    state: Optional[Any]
    observations: Sequence[Any]
    variables: Sequence[Any]
    action: Optional[Any] = None
    probs: Optional[Any] = None
    action_masks: Optional[Any] = None
    batch_size: Optional[Any] = None
    constant_feed: Mapping[Any, Any] = field(default_factory=dict)


class BehavioralCloning:
    """The BC loss and its optimiser on a trainer's ``ClonedPolicy``; ``update`` after the RL update.

    Build it inside the trainer's ``build_scope``.
    """

    def __init__(self, policy: ClonedPolicy, brain: BrainParameters, settings: Dict[str, Any], demo: Demonstration,
                 learning_rate: float, batch_size: int, max_grad_norm: float = 0.5) -> None:
        self.policy = policy
        self.settings = settings
        self.base_learning_rate = float(learning_rate) * float(settings["strength"])
        self.batch_size = int(settings["batch_size"] or batch_size)
        keep = ~demo.dones
        states, cameras = demo.brain_inputs(brain)
        self.states = states[keep]
        self.cameras = [c[keep] for c in cameras]
        self.actions = demo.actions[keep]
        self.masks = demo.action_masks[keep]
        if not len(self.actions):
            raise DemonstrationError(f"{settings['demo_path']}: every recorded step ends an episode, so there is no "
                                     "action to clone. Record longer episodes.")
        continuous = brain.action_space_type == "continuous"
        with tf.variable_scope("behavioral_cloning"):
            self.learning_rate = tf.placeholder(tf.float32, [], name="learning_rate")
            if continuous:
                self.expert = tf.placeholder(tf.float32, [None, brain.action_space_size], name="expert_actions")
                self.loss = tf.reduce_mean(tf.square(policy.action - self.expert))
            else:
                branches = list(brain.action_branches)
                self.expert = tf.placeholder(tf.int32, [None, len(branches)], name="expert_actions")
                losses, offset = [], 0
                for k, size in enumerate(branches):
                    probs = policy.probs[:, offset:offset + size]
                    offset += size
                    chosen = tf.reduce_sum(probs * tf.one_hot(self.expert[:, k], size), axis=1)
                    losses.append(-tf.reduce_mean(tf.log(chosen + 1e-8)))
                self.loss = tf.add_n(losses) / float(len(branches))
            variables = list(policy.variables)
            gradients = tf.gradients(self.loss, variables)
            pairs = [(g, v) for g, v in zip(gradients, variables) if g is not None]
            clipped, _ = tf.clip_by_global_norm([g for g, _ in pairs], max_grad_norm)
            optimizer = tf.train.AdamOptimizer(self.learning_rate, epsilon=1e-5)
            self.train_op = optimizer.apply_gradients(list(zip(clipped, [v for _, v in pairs])))

    def __len__(self) -> int:
        return len(self.actions)

    def current_learning_rate(self, step: int) -> float:
        """``learning_rate x strength``, falling linearly to 0 at ``steps`` agent steps (if > 0)."""
        steps = int(self.settings["steps"])
        if steps <= 0:
            return self.base_learning_rate
        return self.base_learning_rate * max(1.0 - step / steps, 0.0)

    def feed(self, rows: np.ndarray) -> Dict[Any, Any]:
        """The feed of the demonstration samples ``rows``."""
        p = self.policy
        feed: Dict[Any, Any] = {**p.constant_feed, self.expert: self.actions[rows]}
        if p.batch_size is not None:
            feed[p.batch_size] = len(rows)
        if p.state is not None:
            feed[p.state] = self.states[rows]
        for placeholder, camera in zip(p.observations, self.cameras):
            feed[placeholder] = camera[rows]
        if p.action_masks is not None:
            feed[p.action_masks] = self.masks[rows]
        return feed

    def loss_value(self, sess, rows: Optional[np.ndarray] = None) -> float:
        """The BC loss over ``rows`` (all samples when None), without training."""
        rows = np.arange(len(self)) if rows is None else rows
        return float(sess.run(self.loss, self.feed(rows)))

    def update(self, sess, step: int, rng: np.random.Generator) -> Optional[float]:
        """``num_epoch`` shuffled passes; the mean loss, or None once the learning rate reached 0."""
        learning_rate = self.current_learning_rate(step)
        if learning_rate <= 1e-10:
            return None
        n = len(self)
        cap = int(self.settings["samples_per_update"]) or n
        batch = min(self.batch_size, n)
        n_batches = max(min(n, cap) // batch, 1)
        losses = []
        for _ in range(int(self.settings["num_epoch"])):
            order = rng.permutation(n)
            for k in range(n_batches):
                if losses and stop_requested():  # the run stops: the minibatches taken so far are the update
                    break
                feed = self.feed(order[k * batch:(k + 1) * batch])
                feed[self.learning_rate] = learning_rate
                losses.append(sess.run([self.loss, self.train_op], feed)[0])
        return float(np.mean(losses))


def behavioral_cloning_markdown() -> List[str]:
    """The ``behavioral_cloning`` block's section of ``docs/configuration.md``."""
    lines = [
        "## `behavioral_cloning` (ppo, sac)",
        "",
        "A nested block: after each PPO update (SAC: after an update call's gradient steps, at most once",
        "per `time_horizon` agent steps), a cloning loss pulls the policy toward the actions of a",
        "`.demo` recording (Unity's Demonstration Recorder, or `python -m academy <Scene> --record-demo",
        "FILE.demo --brain NAME=heuristic --episodes N`): cross-entropy per discrete branch (masks",
        "respected), mean squared error of the deterministic action (in the environment's units) for",
        "continuous actions, with its own Adam at",
        "`learning_rate x strength`, annealed linearly to 0 over `steps`. The recording must have the",
        "brain's action spec, state size and cameras (checked before training); recurrent brains are",
        "refused. TensorBoard: `Losses/Pretraining Loss`, `Policy/Pretraining Learning Rate`.",
        "",
        "```yaml",
        "PyramidsBrain:",
        "    behavioral_cloning: {demo_path: demos/Pyramids.demo, strength: 1.0, steps: 150000}",
        "```",
        "",
        "| key | type | default | allowed | meaning |",
        "|---|---|---|---|---|",
    ]
    for key, p in BC_PARAMETERS.items():
        default = "required" if p.required else ("-" if p.default is None else f"`{p.default}`")
        lines.append(f"| `{key}` | {p.kind.__name__} | {default} | {p.check[1] if p.check else ''} | {p.doc} |")
    return lines + [""]


def create_behavioral_cloning(trainer: Any) -> Optional[BehavioralCloning]:
    """The trainer's BC module (built in the current scope), or None without a block."""
    settings = trainer.parameters.get("behavioral_cloning")
    if settings is None:
        return None
    demo = check_demonstration(trainer.brain_name, settings, trainer.brain,
                               bool(getattr(trainer.settings, "use_recurrent", False)))
    return BehavioralCloning(trainer.cloned_policy(), trainer.brain, settings, demo, trainer.settings.learning_rate,
                             trainer.settings.batch_size, getattr(trainer.settings, "max_grad_norm", 0.5))


def update_behavioral_cloning(trainer: Any) -> None:
    """Run the trainer's BC module after its RL update, and report its loss and learning rate."""
    bc = getattr(trainer, "bc", None)
    if bc is None or not trainer.is_training:
        return
    loss = bc.update(trainer.sess, trainer.step, trainer.rng)
    if loss is not None:
        trainer.add_stat("bc_loss", loss)
        trainer.add_stat("bc_learning_rate", bc.current_learning_rate(trainer.step))


__all__ = ["BC_PARAMETERS", "BEHAVIORAL_CLONING_PARAM", "BehavioralCloning", "BehavioralCloningSettings",
           "ClonedPolicy", "check_demonstration",
           "check_demonstrations", "create_behavioral_cloning", "update_behavioral_cloning",
           "validate_behavioral_cloning"]
