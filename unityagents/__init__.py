"""The Python side of the wire (API-2, or the modern gRPC protocol): launch or connect to an
environment, reset it, step it.

No TensorFlow here: this package is usable from a notebook or a script that only wants to drive
an environment.
"""
from .brain import BrainInfo, BrainParameters
from .curriculum import Curriculum
from .environment import UnityEnvironment, builtin_scenes
from .environment_set import EnvironmentSet, RestartPolicy
from .exception import (
    UnityActionException,
    UnityCommunicationException,
    UnityEnvironmentException,
    UnityException,
    UnityMessageException,
    UnityObservationException,
    UnityProtocolException,
    UnityTimeOutException,
)

__all__ = [
    "BrainInfo", "BrainParameters", "Curriculum", "EnvironmentSet", "RestartPolicy", "UnityEnvironment",
    "builtin_scenes",
    "UnityActionException", "UnityCommunicationException", "UnityEnvironmentException",
    "UnityException", "UnityMessageException", "UnityObservationException", "UnityProtocolException",
    "UnityTimeOutException",
]
