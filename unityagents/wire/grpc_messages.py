"""A modern (gRPC) behaviour: observations decoded into per-sensor steps, actions encoded into messages.

A behaviour is a brain named by its fully-qualified name (``"3DBall?team=0"``). Its observations
stay one array per sensor, in wire order (``DecisionSteps.obs``): vectors ``[N, *shape]``,
cameras ``[N, H, W, C]`` floats in 0..1 whatever the wire layout ([H,W,C] before C# package 3.0,
[C,H,W] from 3.0). ``BrainParameters.sensors`` records each sensor's name, shape and place, which
the ONNX export's ``obs_k`` inputs follow. Continuous actions and discrete branches map onto
``BrainParameters``; a hybrid behaviour is one continuous brain with ``action_branches``.

An agent whose info is not done is a decision step; a done one a terminal step, with its
episode's last observation (``interrupted`` when its max step was reached). An agent that ended
its episode and asks for its next decision in the same step is both. Every field is checked
(``validate``) before it is used.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from unityagents.base_env import ActionTuple, BehaviorSteps, DecisionSteps, TerminalSteps
from unityagents.brain import BrainParameters
from unityagents.exception import UnityObservationException
from unityagents.wire.base import MAX_AGENTS
from unityagents.wire.protos import communicator_objects_pb2 as pb
from unityagents.wire.validate import (
    Spec,
    bad,
    check_agents,
    check_finite,
    check_mask,
    decode_png_observation,
    observation_error,
)

logger = logging.getLogger("unityagents")


@dataclasses.dataclass
class SensorLayout:
    """How one sensor arrives on the wire (what decoding needs of it)."""

    shape: Tuple[int, ...]          # as on the wire
    visual: bool
    hwc: Tuple[int, ...] = ()       # visual: (H, W, C) whatever the wire layout
    size: int = 0                   # vector: number of floats
    name: str = ""                  # the sensor's name, for errors



@dataclasses.dataclass
class Behavior:
    """One behaviour's spec and the state that decoding and encoding carry from step to step.

    :param channels_last: whether cameras arrive as [C,H,W] (C# package 3.0 and later).
    :param package_version: the C# package's version, named in the errors about camera layouts.
    """

    name: str
    observations: List[SensorLayout]
    continuous: int
    branches: List[int]
    parameters: BrainParameters
    last_actions: Dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    decision_ids: List[int] = dataclasses.field(default_factory=list)
    spec: Optional[Spec] = None  # as announced: an announcement mid-run must repeat it
    channels_last: bool = True
    package_version: str = ""

    # ---------------------------------------------------------------- observations
    def decode_agent(self, info: "pb.AgentInfoProto", log: Optional[str]) -> Tuple[List[float], List[np.ndarray]]:
        """One agent's observations: its vector values (concatenated) and its camera frames."""
        specs = self.observations
        observations = info.observations
        name, agent = self.name, info.id
        if len(observations) != len(specs):
            raise bad("every agent of a behaviour must have the sensors it was announced with.", log, brain=name,
                      agent=agent, field="observations", expected=f"{len(specs)} observations (shapes "
                      f"{[s.shape for s in specs]})", received=f"{len(observations)} observations",
                      kind=UnityObservationException)
        vector: List[float] = []
        frames = []
        for k, (spec, obs) in enumerate(zip(specs, observations)):
            sensor = f"sensor {spec.name!r}: "
            if tuple(obs.shape) != spec.shape:
                raise observation_error(sensor + "the shape differs from its ObservationSpec.", log, name, agent, k,
                                        spec.shape, tuple(obs.shape)[:8], ".shape")
            if obs.compression_type == pb.NONE:
                data = obs.float_data.data
                expected = spec.size if not spec.visual else int(np.prod(spec.shape))
                if len(data) != expected:
                    raise observation_error(sensor + f"it has {len(data)} values; expected {expected}.", log, name,
                                            agent, k, f"{expected} values (shape {spec.shape})", f"{len(data)} values",
                                            ".float_data")
                if spec.visual:
                    array = np.asarray(data, dtype=np.float32).reshape(spec.shape)
                    frames.append(array.transpose(1, 2, 0) if self.channels_last else array)
                else:
                    vector.extend(data)
            elif obs.compression_type != pb.PNG:
                raise observation_error(sensor + "the compression type is unknown.", log, name, agent, k,
                                        "0 (none) or 1 (PNG)", obs.compression_type, ".compression_type")
            elif not spec.visual:
                raise observation_error(sensor + "only rank-3 (visual) observations may be PNG.", log, name, agent, k,
                                        "float_data for a vector observation", f"PNG data for shape {spec.shape}",
                                        ".compression_type")
            else:
                try:
                    frames.append(decode_png_observation(obs.compressed_data, spec.hwc,
                                                         list(obs.compressed_channel_mapping)))
                except Exception as e:  # Pillow raises several types for bad images
                    raise observation_error(
                        sensor + "it is not a readable PNG observation. Check the camera sensor's compression, and "
                        f"the layout: a C# 2.x build sends [H,W,C], 3.x [C,H,W] (package version "
                        f"{self.package_version!r}).", log, name, agent, k, f"PNG images of shape {spec.shape}",
                        f"{type(e).__name__}: {e}", ".compressed_data") from None
        return vector, frames

    def observations_of(self, rows: Sequence["pb.AgentInfoProto"], log: Optional[str]) -> List[np.ndarray]:
        """One ``[n, *shape]`` array per sensor of ``rows`` (cameras ``[n, H, W, C]``), validated against the spec."""
        specs = self.observations
        n = len(rows)
        if len(specs) == 1 and not specs[0].visual:  # one vector sensor (most scenes): the fast path
            size, shape = specs[0].size, list(specs[0].shape)
            # Field by field over all agents, the checks on whole lists: a loop per agent costs more.
            observations = [i.observations for i in rows]
            sensors = [o[0] for o in observations] if set(map(len, observations)) <= {1} else None
            values = [o.float_data.data for o in sensors] if sensors is not None and not any(
                o.compression_type or o.shape != shape for o in sensors) else None
            if values is None or set(map(len, values)) - {size}:
                for info in rows:
                    self.decode_agent(info, log)  # raises the precise error
            # One pass over every float (a list per agent first costs three times as much).
            state = np.fromiter(itertools.chain.from_iterable(values), np.float32, n * size)
            if not np.isfinite(state).all():
                check_finite(self.name, "observations (vector)", state.reshape(n, size), log, [i.id for i in rows])
            return [state.reshape((n,) + tuple(specs[0].shape))]
        arrays = [np.zeros((n,) + (tuple(s.hwc) if s.visual else tuple(s.shape)), np.float32) for s in specs]
        vectors = [k for k, s in enumerate(specs) if not s.visual]
        for r, info in enumerate(rows):
            vector, frames = self.decode_agent(info, log)
            start = 0
            for k in vectors:
                size = specs[k].size
                arrays[k][r] = np.asarray(vector[start:start + size], np.float32).reshape(specs[k].shape)
                start += size
            for k, frame in zip((k for k, s in enumerate(specs) if s.visual), frames):
                arrays[k][r] = frame
        ids = [int(i.id) for i in rows]
        if vectors:
            check_finite(self.name, "observations (vector)",
                         np.concatenate([arrays[k].reshape(n, specs[k].size) for k in vectors], axis=1), log, ids)
        for c, k in enumerate(k for k, s in enumerate(specs) if s.visual):
            check_finite(self.name, f"observations (camera {c})", arrays[k], log, ids)
        return arrays

    def steps(self, infos: Sequence["pb.AgentInfoProto"], log: Optional[str]) -> BehaviorSteps:
        """The behaviour's decision steps (agents whose info is not done) and terminal steps (done ones).

        Every field of every info is read once, into per-field lists (each read of a protobuf field
        costs about as much as a small numpy call); the checks run on those lists, and only a
        failing one goes back to the infos for its precise error.
        """
        name, n = self.name, len(infos)
        ids = [i.id for i in infos]
        done = [i.done for i in infos]
        if n > MAX_AGENTS or len(set(zip(ids, done))) != n:
            check_agents(name, infos, log)  # raises the precise error
        total = int(sum(self.branches))
        masks_sent = [i.action_mask for i in infos]
        if set(map(len, masks_sent)) - {0, total}:
            for info in infos:
                check_mask(name, info, total, log)  # raises the precise error
        rewards = np.array([i.reward for i in infos], np.float64)  # float32 on the wire: exact
        group_rewards = np.array([i.group_reward for i in infos], np.float64)
        # A NaN or infinity in either: then their sum is not finite (float32 values cannot overflow float64).
        if not math.isfinite(rewards.sum() + group_rewards.sum()):
            check_finite(name, "reward", rewards, log, ids)
            check_finite(name, "group_reward", group_rewards, log, ids)
        if any(done):
            ending = np.array(done, bool)
            deciding = ~ending
            self._check_summed_rewards(ids, done, rewards, group_rewards, log)
        else:  # no episode ended (most steps): views instead of copies
            deciding, ending = slice(None), slice(0, 0)
        id_array = np.array(ids, np.int64)
        group_ids = np.array([i.group_id for i in infos], np.int64)
        observations = self.observations_of(infos, log)
        masks = None
        if self.branches:
            disabled = np.zeros((n, total), bool)
            for r, sent in enumerate(masks_sent):
                if len(sent):  # True = disabled; its length was checked above
                    disabled[r] = sent
            disabled, masks, start = disabled[deciding], [], 0
            for size in self.branches:  # one view per branch (np.split's cost is ~10x for a few branches)
                masks.append(disabled[:, start:start + size])
                start += size
        deciding_ids = id_array[deciding].tolist()
        ending_ids = id_array[ending].tolist()
        self.decision_ids = deciding_ids
        decisions = DecisionSteps(
            [o[deciding] for o in observations], rewards[deciding], id_array[deciding], masks, group_ids[deciding],
            group_rewards[deciding], previous_action=self._previous(deciding_ids))
        interrupted = np.array([bool(i.max_step_reached) for i, d in zip(infos, done) if d], bool)
        terminals = TerminalSteps(
            [o[ending] for o in observations], rewards[ending], interrupted, id_array[ending], group_ids[ending],
            group_rewards[ending], previous_action=self._previous(ending_ids))
        return decisions, terminals

    def _check_summed_rewards(self, ids: List[int], done: List[bool], rewards: np.ndarray,
                              group_rewards: np.ndarray, log: Optional[str]) -> None:
        """An agent that ended its episode and asks for its next decision gets both rewards in one
        step of the trainer's: two float32 maxima add up to infinity, which is refused here."""
        deciding_row = {agent: r for r, (agent, d) in enumerate(zip(ids, done)) if not d}
        both = [(r, deciding_row[agent]) for r, (agent, d) in enumerate(zip(ids, done))
                if d and agent in deciding_row]
        if not both:
            return
        ended, deciding = (list(rows) for rows in zip(*both))
        agents = [ids[r] for r in ended]
        with np.errstate(over="ignore"):
            check_finite(self.name, "reward (episode end + next decision)",
                         (rewards[ended] + rewards[deciding]).astype(np.float32), log, agents)
            check_finite(self.name, "group_reward (episode end + next decision)",
                         (group_rewards[ended] + group_rewards[deciding]).astype(np.float32), log, agents)

    def _previous(self, ids: List[int]) -> np.ndarray:
        """Each agent's last action sent to it (zeros before its first)."""
        width = self.parameters.action_width
        none = np.zeros(width, np.float32)
        last_actions = self.last_actions
        return np.array([last_actions.get(agent, none) for agent in ids], np.float32).reshape(len(ids), width)

    # ---------------------------------------------------------------- actions
    def encode_actions(self, actions: ActionTuple, agent_actions: Any) -> None:
        """Add this step's actions of the deciding agents to ``agent_actions`` (the message's map),
        and remember them as each agent's previous action."""
        ids = self.decision_ids
        entry = agent_actions[self.name].value
        if self.branches and self.continuous:  # hybrid: ActionTuple(continuous, discrete) per agent
            for agent, floats, row in zip(ids, actions.continuous.tolist(), actions.discrete.tolist()):
                entry.add(continuous_actions=floats, discrete_actions=row)
                self.last_actions[agent] = np.asarray(floats + row, np.float32)
        elif self.branches:
            for agent, row in zip(ids, actions.discrete.tolist()):
                entry.add(discrete_actions=row, vector_actions_deprecated=row)
                self.last_actions[agent] = np.asarray(row, np.float32)
        else:
            continuous = actions.continuous
            for _, floats in zip(ids, continuous.tolist()):
                entry.add(continuous_actions=floats, vector_actions_deprecated=floats)
            self.last_actions.update(zip(ids, continuous))


def new_behavior(name: str, spec: Spec, descriptions: List[str], sensor_names: Sequence[Tuple[str, int]] = (),
                  channels_last: bool = True, package_version: str = "") -> "Behavior":
    """A new brain: vector sensors concatenated into its state, cameras in order, and its
    ``sensors`` list keeping each one's name, shape and place, in the wire order."""
    continuous, branches, shapes = spec
    observations, cameras, state_size, sensors = [], [], 0, []
    for k, shape in enumerate(shapes):
        sensor_name, observation_type = sensor_names[k] if k < len(sensor_names) else ("", 0)
        sensor_name = sensor_name or f"sensor_{k}"
        if len(shape) == 3:
            hwc = (shape[1], shape[2], shape[0]) if channels_last else shape
            observations.append(SensorLayout(shape, True, hwc, name=sensor_name))
            sensors.append({"name": sensor_name, "shape": [hwc[2], hwc[0], hwc[1]], "camera": len(cameras),
                            "observationType": observation_type})
            cameras.append({"width": hwc[1], "height": hwc[0], "blackAndWhite": hwc[2] == 1,
                            "channels": hwc[2]})
        else:
            size = int(np.prod(shape))
            observations.append(SensorLayout(shape, False, size=size, name=sensor_name))
            sensors.append({"name": sensor_name, "shape": list(shape), "offset": state_size,
                            "observationType": observation_type,
                            "variableLength": len(shape) == 2})  # rank 2: variable-length once announced
            state_size += size
    if branches and not continuous:
        action_type, action_size = 0, int(sum(branches))
    else:  # continuous, or hybrid: a continuous brain with branches (BrainParameters.is_hybrid)
        action_type, action_size = 1, continuous
    parameters = BrainParameters(name, {
        "stateSize": state_size, "actionSize": action_size, "memorySize": 0,
        "cameraResolutions": cameras, "actionDescriptions": descriptions,
        "actionSpaceType": action_type, "stateSpaceType": 1, "actionBranches": list(branches),
        "actionMasks": bool(branches), "continuousActionContract": "unit", "sensors": sensors})
    behavior = Behavior(name, observations, continuous, list(branches), parameters, spec=spec,
                          channels_last=channels_last, package_version=package_version)
    logger.info("Connected new brain: %s (state %d, cameras %s, %s)", name, state_size,
                [tuple(o.hwc) for o in observations if o.visual],
                ", ".join(([f"{continuous} continuous actions"] if continuous else [])
                          + ([f"discrete branches {list(branches)}"] if branches else [])))
    return behavior


#: The names this module first gave them; scripts that imported those keep working.
Behaviour = Behavior
new_behaviour = new_behavior
