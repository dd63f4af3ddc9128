"""The environment's own reward, as a signal beside the intrinsic ones (its own value head and gamma)."""
from __future__ import annotations

from typing import ClassVar, Dict, Mapping

import numpy as np

from trainers.reward_signals.base import GAMMA, RewardSignal, strength_param
from trainers.trainer.base import Param


class ExtrinsicSignal(RewardSignal):
    """The environment's reward, as it arrived."""

    name = "extrinsic"
    title = "Extrinsic"
    parameters: ClassVar[Dict[str, Param]] = {
        "strength": strength_param(1.0, "factor of the environment's reward"),
        "gamma": GAMMA,
    }

    def evaluate(self, sess, fields: Mapping[str, np.ndarray], training: bool) -> np.ndarray:
        return np.asarray(fields["rewards"], dtype=np.float64)
