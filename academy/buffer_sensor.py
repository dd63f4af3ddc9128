"""Unity's ``BufferSensor`` for the academy's modern scenes: a variable number of entities per agent.

A BufferSensor holds up to ``max_entities`` rows of ``entity_size`` floats; the agent appends one
row per entity it sees this step, and the rows it did not fill are zeros. Unity sends it as a
rank-2 observation ``[max_entities, entity_size]`` with the dimension properties
``[VariableSize, None]`` (``[4, 1]``), and only to a trainer that announces the capability
``variableLengthObservation``. Its default name in Unity is ``BufferSensor_size{n}`` of the
component; scenes name theirs.

Here it is a state-backed ``VectorSensor`` whose ``size`` floats are the rows, row after row, so
API-2 and the stand-alone heuristics see them as part of the state, and only the modern wire
(``grpc_communicator.py``) and the ONNX brain (``internal.py``, which feeds ``obs_k`` as
``[b, max_entities, entity_size]``, as Unity's 3.x ``ObservationWriter`` writes it) read its shape.
"""
from __future__ import annotations

import dataclasses

from academy.scene import VectorSensor

#: The dimension properties Unity sends for a BufferSensor (VariableSize, None).
BUFFER_DIMENSION_PROPERTIES = (4, 1)


@dataclasses.dataclass(frozen=True)
class BufferSensor(VectorSensor):
    """``max_entities`` rows of ``entity_size`` floats; ``size`` must be their product."""

    max_entities: int = 1
    entity_size: int = 1

    def __post_init__(self) -> None:
        if self.max_entities < 1 or self.entity_size < 1 or self.size != self.max_entities * self.entity_size:
            raise ValueError(f"BufferSensor {self.name}: size {self.size} must be max_entities x entity_size "
                             f"({self.max_entities} x {self.entity_size}), both positive")

    @property
    def shape(self) -> tuple[int, int]:
        return self.max_entities, self.entity_size


def buffer_sensor(name: str, max_entities: int, entity_size: int, start: int = 0) -> BufferSensor:
    """A state-backed BufferSensor over the state's ``[start, start + max_entities * entity_size)``."""
    return BufferSensor(name, max_entities * entity_size, start, max_entities=max_entities, entity_size=entity_size)


def sensor_shape(sensor) -> list[int]:
    """A non-camera sensor's shape without the batch: ``[max_entities, entity_size]`` or ``[size]``."""
    return list(sensor.shape) if isinstance(sensor, BufferSensor) else [sensor.size]
