"""Soft actor-critic (``trainer: sac``): continuous and discrete actions, on the off-policy base."""
from trainers.sac.trainer import SAC_HYPERPARAMETERS, SACTrainer

__all__ = ["SACTrainer", "SAC_HYPERPARAMETERS"]
