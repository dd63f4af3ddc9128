"""What every trainer is: the interface the controller drives (``base``); the types and pairing
functions of experience (``trajectory``; the run's ``runner.collector`` builds it); the bases a
trainer subclasses (``rl_trainer``, ``on_policy`` with ``reward_signal_fields``, ``off_policy``); and
the registry that finds trainer types through entry points (``registry``).
"""
from typing import Any

#: The seed's names, ``from trainers.trainer import Trainer, UnityTrainerException``: loaded on first
#: use, so that importing one submodule does not import ``base`` (and what it imports).
_EXPORTS = {"Trainer": "trainers.trainer.base", "UnityTrainerException": "trainers.settings.schema"}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'trainers.trainer' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
