"""What a learner offers self-play: an acting copy of its policy that plays a snapshot.

Self-play needs, from whatever algorithm learns, exactly one thing: a second network of the same
policy, under another graph scope, that acts for the opponent's agents; ``trainers.ghost`` then
copies weights into it by their names relative to each scope. A trainer offers this by
implementing ``snapshot_actor(scope, brain, rng)`` and returning a :class:`SnapshotActor`; the
self-play wrapper knows nothing else of the algorithm, and the algorithm nothing of self-play.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Optional, Sequence, Tuple

import numpy as np

from trainers.tf_utils import tf
from trainers.trainer.brain_info import BrainInfo

#: ``act(info) -> (policy actions, next memories or None)``
ActFunction = Callable[[BrainInfo], Tuple[np.ndarray, Optional[np.ndarray]]]


class SnapshotActor:
    """An acting copy of a learner's policy.

    :param outputs: the tensors it acts with; the variables they read are the weights a snapshot
        holds (``trainers.ghost.snapshot.variables_read_by``), named as the learner's under its scope.
    :param act: acts for every agent of a ``BrainInfo``: the policy's actions (before the brain's
        action contract) and the next memories (None without a recurrent policy). It samples as
        the learner samples, and takes the mean or the most probable action when the learner is
        ``deterministic``.
    :param forget: drops the memories it keeps for ``agents`` (None: all).
    :param policy: what keeps its agents' memories (``trainers.ppo.policy.PPOPolicy``), if anything.
    """

    def __init__(self, outputs: Sequence[tf.Tensor], act: ActFunction,
                 forget: Callable[[Optional[Iterable[Hashable]]], None] = lambda agents: None,
                 policy: Any = None):
        self.outputs = list(outputs)
        self.act = act
        self.forget = forget
        self.policy = policy


def acts_from_snapshots(trainer: Any) -> bool:
    """Whether a trainer (class or instance) offers ``snapshot_actor``, so self-play can wrap it."""
    return callable(getattr(trainer, "snapshot_actor", None))
