"""The seed's module name for the self-play ghost: ``from trainers.ghost_trainer import GhostTrainer``.

The trainer lives in ``trainers.ghost.trainer``; this module only gives it the seed's import path.
"""
from trainers.ghost.trainer import GhostTrainer

__all__ = ["GhostTrainer"]
