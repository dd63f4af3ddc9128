"""Trainer types, discovered through Python entry points.

A trainer type is a ``Trainer`` subclass registered under the entry-point group
``unityagents.trainers``; its name is what a YAML block selects with ``trainer: <name>``. The
built-in trainers register through the same group in this project's ``setup.py``, so a plugin
package is on equal footing with them::

    # setup.py of a plugin package
    entry_points={"unityagents.trainers": ["a2c = my_plugin.a2c:A2CTrainer"]}

Plugins are loaded before the YAML is validated, so that their hyperparameters are checked like
the built-ins'. A plugin that fails to import is reported with its name and skipped; the others
still load.
"""
from __future__ import annotations

import importlib
import logging
from importlib.metadata import entry_points
from typing import Dict, List, Optional, Type

from trainers.trainer.base import Param, Trainer, UnityTrainerException

logger = logging.getLogger("unityagents")

ENTRY_POINT_GROUP = "unityagents.trainers"

# Used when this project runs from a checkout that was never pip-installed (no entry points); the
# order is the generated docs/configuration.md's.
_BUILTINS = {
    "ppo": "trainers.ppo.trainer:PPOTrainer",
    "sac": "trainers.sac.trainer:SACTrainer",
    "poca": "trainers.poca.trainer:POCATrainer",
    "ghost": "trainers.ghost.trainer:GhostTrainer",
    "imitation": "trainers.imitation.trainer:ImitationTrainer",
}
#: The built-in trainer types, in the order the reference documents them.
BUILTIN_TRAINERS = tuple(_BUILTINS)


class TrainerRegistry:
    """Name -> Trainer class, plus the plugins that failed to load (and why)."""

    def __init__(self) -> None:
        self.trainers: Dict[str, Type[Trainer]] = {}
        self.broken: Dict[str, str] = {}
        #: name -> the entry point (``module:Class``) of each broken plugin.
        self.broken_targets: Dict[str, str] = {}

    def register(self, name: str, cls: Type[Trainer]) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Trainer)):
            raise UnityTrainerException(
                f"The trainer plugin {name!r} points to {cls!r}, which is not a subclass of trainers.Trainer.")
        check_declaration(name, cls)
        if name in self.trainers and self.trainers[name] is not cls:
            logger.warning("Trainer type %r from %s replaces %s.", name, cls.__module__,
                           self.trainers[name].__module__)
        self.trainers[name] = cls

    def get(self, name: str) -> Type[Trainer]:
        if name not in self.trainers:
            extra = ""
            if name in self.broken:
                extra = f" The plugin {name!r} is installed but failed to load: {self.broken[name]}"
                if name in self.broken_targets:
                    extra += f" (entry point {name} = {self.broken_targets[name]} in the group '{ENTRY_POINT_GROUP}')."
            raise UnityTrainerException(
                f"Unknown trainer type {name!r}. Known trainer types: {', '.join(self.names()) or 'none'}."
                f"{extra} A trainer from a plugin package must be pip-installed so that it registers "
                f"under the entry-point group '{ENTRY_POINT_GROUP}'.")
        return self.trainers[name]

    def names(self) -> List[str]:
        return sorted(self.trainers)

    def __contains__(self, name: str) -> bool:
        return name in self.trainers


def check_declaration(name: str, cls: type) -> None:
    """Refuse a trainer class whose ``hyperparameters`` are not all typed ``Param``s (the loaders and the
    generated docs read every key's type from them)."""
    declared = getattr(cls, "hyperparameters", None)
    if not isinstance(declared, dict):
        raise UnityTrainerException(
            f"{cls.__module__}.{cls.__name__} (trainer {name!r}) declares hyperparameters as "
            f"{type(declared).__name__}, not a dict of key -> Param. Declare them as "
            "{**OnPolicyTrainer.hyperparameters, 'key': Param(type, default)}.")
    for key, param in declared.items():
        if not isinstance(param, Param) or not isinstance(param.kind, type):
            raise UnityTrainerException(
                f"{cls.__module__}.{cls.__name__} (trainer {name!r}) declares the setting {key!r} without a type "
                f"({param!r}). Declare it as Param(type, default), e.g. Param(float, 0.1).")


def _load(name: str, target: str, registry: TrainerRegistry) -> None:
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    registry.register(name, cls)


def load_registry(group: str = ENTRY_POINT_GROUP, extra: Optional[Dict[str, str]] = None) -> TrainerRegistry:
    """Load every trainer type: the entry points of ``group``, then the built-ins if missing.

    :param extra: more ``name -> "module:Class"`` targets (tests use this).
    """
    registry = TrainerRegistry()
    for ep in entry_points(group=group):
        try:
            registry.register(ep.name, ep.load())
        except Exception as e:  # a broken plugin must not stop the others
            registry.broken[ep.name] = f"{type(e).__name__}: {e}"
            registry.broken_targets[ep.name] = ep.value
            logger.error("The trainer plugin %r (%s) failed to load and is skipped: %s: %s",
                         ep.name, ep.value, type(e).__name__, e)
    for name, target in {**_BUILTINS, **(extra or {})}.items():
        if name not in registry and name not in registry.broken:
            try:
                _load(name, target, registry)
            except Exception as e:
                registry.broken[name] = f"{type(e).__name__}: {e}"
                logger.error("The trainer %r (%s) failed to load: %s: %s", name, target, type(e).__name__, e)
    return registry
