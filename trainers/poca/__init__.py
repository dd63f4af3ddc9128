"""MA-POCA (``trainer: poca``): decentralised policies, a centralised group critic with attention."""
from trainers.poca.trainer import POCA_HYPERPARAMETERS, POCATrainer

__all__ = ["POCATrainer", "POCA_HYPERPARAMETERS"]
