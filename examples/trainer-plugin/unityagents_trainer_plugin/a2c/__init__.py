"""Synchronous advantage actor-critic (A2C) on ``trainers.trainer.on_policy.OnPolicyTrainer``."""
from .a2c_trainer import A2C_HYPERPARAMETERS, A2CTrainer

__all__ = ["A2CTrainer", "A2C_HYPERPARAMETERS"]
