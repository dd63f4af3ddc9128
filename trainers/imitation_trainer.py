"""The seed's module name for behavioural cloning: ``from trainers.imitation_trainer import ImitationTrainer``.

The trainer lives in ``trainers.imitation.trainer``; this module only gives it the seed's import path.
"""
from trainers.imitation.trainer import ImitationTrainer

__all__ = ["ImitationTrainer"]
