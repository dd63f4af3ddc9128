"""Variable-length observations on the modern wire: which rank-2 sensors a trainer can read.

Unity's ``BufferSensor`` sends a rank-2 observation ``[N_max, F]``: up to ``N_max`` entities of
``F`` floats each, the unused rows all zeros, with the dimension properties ``[VariableSize, None]``
(``ObservationProto.dimension_properties``, bit flags: 1 None, 2 TranslationalEquivariance,
4 VariableSize). Unity sends such a sensor only to a trainer that announces the capability
``variableLengthObservation``; the trainer then encodes the rows as a set of entities, masking the
rows of zeros (``trainers/attention.py``).

A rank-2 observation without the variable-size property (a custom ``ISensor`` that reports a
matrix) has no encoder here, as in ML-Agents' trainer ("Unsupported Sensor with specs"): it is
refused when its behaviour is announced, before any trainer is built, with the fix spelled out.
The values of an accepted sensor join the brain's state row after row (``Sensor.variable_length``
marks them), so every per-agent buffer and the ONNX export's ``obs_k`` handle them as they
handle any vector sensor's.
"""
from __future__ import annotations

from typing import Optional, Sequence

from unityagents.exception import UnityObservationException

#: ``DimensionProperty`` bit flags (ML-Agents' ``DimensionPropertyProto``).
NONE, TRANSLATIONAL_EQUIVARIANCE, VARIABLE_SIZE = 1, 2, 4


def is_variable_length(shape: Sequence[int], properties: Sequence[int]) -> bool:
    """A BufferSensor's observation: rank 2, the first dimension variable-size and the second not."""
    return (len(shape) == 2 and len(properties) == 2 and bool(properties[0] & VARIABLE_SIZE)
            and not properties[1] & VARIABLE_SIZE)


def check_dimension_properties(behavior: str, first: "object", log_path: Optional[str]) -> None:
    """Refuse a rank-2 observation of ``first`` (an ``AgentInfoProto``) that is not variable-length."""
    for k, obs in enumerate(first.observations):
        shape, properties = [int(d) for d in obs.shape], [int(p) for p in obs.dimension_properties]
        if len(shape) != 2 or is_variable_length(shape, properties):
            continue
        name = obs.name or f"sensor_{k}"
        raise UnityObservationException(
            f"Behaviour {behavior!r}, sensor {name!r} (observations[{k}]): a rank-2 observation of shape {shape} "
            f"with dimension properties {properties or '[] (unspecified)'}. Rank-2 observations are read only as "
            f"variable-length lists of entities, whose properties are [{VARIABLE_SIZE}, {NONE}] (VariableSize, "
            "None: Unity's BufferSensor). Use a BufferSensorComponent for a list of entities, or report the values "
            f"as a vector sensor of {shape[0] * shape[1]} floats.", log_path, brain=behavior, agent=first.id,
            field=f"observations[{k}].dimension_properties", expected=f"[{VARIABLE_SIZE}, {NONE}]",
            received=str(properties))


__all__ = ["NONE", "TRANSLATIONAL_EQUIVARIANCE", "VARIABLE_SIZE", "check_dimension_properties", "is_variable_length"]
