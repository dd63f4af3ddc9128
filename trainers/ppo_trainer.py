"""The seed's module name for the PPO trainer: ``from trainers.ppo_trainer import PPOTrainer``.

The trainer lives in ``trainers.ppo.trainer``; this module only gives it the seed's import path.
"""
from trainers.ppo.trainer import PPOTrainer

__all__ = ["PPOTrainer"]
