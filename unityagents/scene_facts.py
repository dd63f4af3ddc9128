"""What an environment, or a set of environments, says about its scene: one read-only view.

``UnityEnvironment`` and ``EnvironmentSet`` answer the controller the same questions (which
brains, which of them take actions, which reset parameters, which curriculum); this mixin is the
one place those answers are read from the ``_brains``, ``_brain_names``,
``_external_brain_names``, ``_reset_parameters`` and ``_curriculum`` that each of them keeps.
"""
from __future__ import annotations

from typing import Dict, List

from unityagents.brain import BrainParameters
from unityagents.curriculum import Curriculum


class SceneFacts:
    """The brains, External brains, reset parameters and curriculum of a scene, read-only."""

    _brains: Dict[str, BrainParameters]
    _brain_names: List[str]
    _external_brain_names: List[str]
    _reset_parameters: Dict[str, float]
    _curriculum: Curriculum

    @property
    def brains(self) -> Dict[str, BrainParameters]:
        return self._brains

    @property
    def brain_names(self) -> List[str]:
        return self._brain_names

    @property
    def external_brain_names(self) -> List[str]:
        return self._external_brain_names

    @property
    def reset_parameters(self) -> Dict[str, float]:
        """A copy: the caller may change it without changing the scene's defaults."""
        return dict(self._reset_parameters)

    @property
    def curriculum(self) -> Curriculum:
        return self._curriculum

    @property
    def number_brains(self) -> int:
        return len(self._brain_names)

    @property
    def number_external_brains(self) -> int:
        return len(self._external_brain_names)
