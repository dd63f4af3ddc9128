"""Deep Q-learning (DQN, optionally double DQN) on ``trainers.trainer.off_policy.OffPolicyTrainer``."""
from .dqn_trainer import DQN_HYPERPARAMETERS, DQNTrainer

__all__ = ["DQNTrainer", "DQN_HYPERPARAMETERS"]
