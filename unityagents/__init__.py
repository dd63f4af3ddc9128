"""The Python side of the wire (API-2, or the modern gRPC protocol): launch or connect to an
environment, reset it, step it.

Two doors, one ``UnityEnvironment`` (``docs/python-api.md``): the original API's (``reset``/``step`` return
``{brain name: BrainInfo}``) and mlagents_envs 1.1's low-level API (``unityagents.environment``,
``unityagents.base_env``, ``unityagents.side_channels``, ``unityagents.exception``).

No TensorFlow here: this package is usable from a notebook or a script that only wants to drive
an environment. Its public names load on first use, so that ``unityagents.wire.protos`` (the generated
messages that the built-in Unity side imports too) comes without the environment's machinery.
"""
from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the submodule that defines it.
_EXPORTS = {
    "BrainParameters": "brain", "BrainInfo": "brain_info",
    "ActionSpec": "base_env", "ActionTuple": "base_env", "BehaviorSpec": "base_env", "DecisionSteps": "base_env",
    "ObservationSpec": "base_env", "TerminalSteps": "base_env",
    "Curriculum": "curriculum",
    "UnityEnvironment": "environment", "builtin_scenes": "launcher",
    "EnvironmentSet": "vector.environment_set", "RestartPolicy": "vector.restart",
    "UnityActionException": "exception", "UnityCommunicationException": "exception",
    "UnityEnvironmentException": "exception", "UnityException": "exception",
    "UnityMessageException": "exception", "UnityObservationException": "exception",
    "UnityProtocolException": "exception", "UnityTimeOutException": "exception",
    "UnityCommunicatorStoppedException": "exception", "UnitySideChannelException": "exception",
    "UnityPolicyException": "exception", "UnityWorkerInUseException": "exception",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'unityagents' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
