"""A modern (gRPC) behaviour as a brain: observations decoded into ``BrainInfo``, actions encoded into messages.

A behaviour is a brain named by its fully-qualified name (``"3DBall?team=0"``). Its vector
observations are concatenated, in wire order, into one continuous state; its rank-3 observations
are cameras, delivered as ``[N, H, W, C]`` floats in 0..1 whatever the wire layout ([H,W,C] before
C# package 3.0, [C,H,W] from 3.0). ``BrainParameters.sensors`` keeps what the state folds together:
each sensor's name, shape and place, in the wire order, which the ONNX export's ``obs_k`` inputs
follow. Continuous actions and discrete branches map onto ``BrainParameters``; a hybrid behaviour
is one continuous brain with ``action_branches``, its action rows the continuous values then one
index per branch.

A ``BrainInfo`` row is an agent that reported in this step: one that asks for a decision, or one
whose episode ended (``local_done``; ``max_reached`` when interrupted). An agent that ended its
episode and asks for its next decision in the same step has one row, as with API-2: the terminal
reward and done flag, and the first observation of its next episode; its last observation is kept
in ``BrainInfo.terminal_info``. Every field is checked (``validate``) before it is used.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from unityagents.brain import BrainInfo, BrainParameters
from unityagents.exception import UnityActionException, UnityObservationException
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
@dataclasses.dataclass
class ObservationSpec:
    shape: Tuple[int, ...]          # as on the wire
    visual: bool
    hwc: Tuple[int, ...] = ()       # visual: (H, W, C) whatever the wire layout
    size: int = 0                   # vector: number of floats
    name: str = ""                  # the sensor's name, for errors



@dataclasses.dataclass
class Behaviour:
    """One behaviour's spec and the state that decoding and encoding carry from step to step.

    :param channels_last: whether cameras arrive as [C,H,W] (C# package 3.0 and later).
    :param package_version: the C# package's version, named in the errors about camera layouts.
    """

    name: str
    observations: List[ObservationSpec]
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

    def observations_of(self, rows: Sequence["pb.AgentInfoProto"],
                        log: Optional[str]) -> Tuple[np.ndarray, List[np.ndarray]]:
        """``[n, state]`` and the ``[n, H, W, C]`` cameras of ``rows``, validated against the spec."""
        specs = self.observations
        n = len(rows)
        if len(specs) == 1 and not specs[0].visual:  # one vector sensor (most scenes): the fast path
            size, shape = specs[0].size, list(specs[0].shape)
            values = []
            for info in rows:
                observations = info.observations
                obs = observations[0] if len(observations) == 1 else None
                if obs is None or obs.compression_type or obs.shape != shape:
                    self.decode_agent(info, log)  # raises the precise error
                data = list(obs.float_data.data)
                if len(data) != size:
                    self.decode_agent(info, log)
                values.append(data)
            state = np.asarray(values, np.float32) if n else np.zeros((0, size), np.float32)
        else:
            state = np.zeros((n, self.parameters.state_space_size), np.float32)
            cameras = [np.zeros((n,) + tuple(s.hwc), np.float32) for s in specs if s.visual]
            for r, info in enumerate(rows):
                vector, frames = self.decode_agent(info, log)
                if vector:
                    state[r] = vector
                for c, frame in enumerate(frames):
                    cameras[c][r] = frame
        ids = [int(i.id) for i in rows]
        check_finite(self.name, "observations (vector)", state, log, ids)
        if len(specs) == 1 and not specs[0].visual:
            return state, []
        for c, frames in enumerate(cameras):
            check_finite(self.name, f"observations (camera {c})", frames, log, ids)
        return state, cameras

    def brain_info(self, infos: Sequence["pb.AgentInfoProto"], log: Optional[str]) -> BrainInfo:
        params = self.parameters
        check_agents(self.name, infos, log)
        total = int(sum(self.branches))
        for info in infos:
            check_mask(self.name, info, total, log)
        every = [int(i.id) for i in infos]
        check_finite(self.name, "reward", np.asarray([i.reward for i in infos], np.float32), log, every)
        check_finite(self.name, "group_reward", np.asarray([i.group_reward for i in infos], np.float32),
                     log, every)
        deciding = [i for i in infos if not i.done]
        ending = [i for i in infos if i.done]
        row_of = {info.id: r for r, info in enumerate(deciding)}
        rows = deciding + [i for i in ending if i.id not in row_of]
        n = len(rows)
        state, cameras = self.observations_of(rows, log)
        rewards = [float(i.reward) for i in rows]
        done = [False] * len(deciding) + [True] * (n - len(deciding))
        interrupted = [False] * n
        group_rewards = [float(i.group_reward) for i in rows]
        for info in ending:
            r = row_of.get(info.id)
            if r is None:
                r = len(deciding) + [i.id for i in rows[len(deciding):]].index(info.id)
                interrupted[r] = bool(info.max_step_reached)
                continue
            rewards[r] += float(info.reward)  # the last reward of the episode that just ended
            group_rewards[r] += float(info.group_reward)
            done[r] = True
            interrupted[r] = bool(info.max_step_reached)
        ids = [int(i.id) for i in rows]
        with np.errstate(over="ignore"):  # two float32 maxima add up to infinity: refused below
            check_finite(self.name, "reward (episode end + next decision)", np.asarray(rewards, np.float32),
                         log, ids)
            check_finite(self.name, "group_reward (episode end + next decision)",
                         np.asarray(group_rewards, np.float32), log, ids)
        masks = None
        if self.branches:
            masks = np.ones((n, total), np.float32)
            for r, info in enumerate(rows):
                if len(info.action_mask):  # True = disabled; its length was checked above
                    masks[r] = 1.0 - np.asarray(info.action_mask, np.float32)
        width = params.action_width
        previous = np.zeros((n, width), np.float32)
        for r, info in enumerate(rows):
            last = self.last_actions.get(info.id)
            if last is not None:
                previous[r] = last
        terminal = self.terminal_info(ending, log) if ending else None
        self.decision_ids = [i.id for i in deciding]
        return BrainInfo(
            cameras, state, np.zeros((n, 0), np.float32), rewards, ids, done, previous,
            max_reached=interrupted, action_masks=masks, group_id=[int(i.group_id) for i in rows],
            group_rewards=group_rewards, decision_requested=[True] * len(deciding) + [False] * (n - len(deciding)),
            terminal_info=terminal)

    def terminal_info(self, ending: Sequence["pb.AgentInfoProto"], log: Optional[str]) -> BrainInfo:
        """The last observations of the agents whose episodes ended (for bootstrapping)."""
        params = self.parameters
        n = len(ending)
        state, cameras = self.observations_of(ending, log)
        return BrainInfo(
            cameras, state, np.zeros((n, 0), np.float32), [float(i.reward) for i in ending],
            [int(i.id) for i in ending], [True] * n, np.zeros((n, params.action_width), np.float32),
            max_reached=[bool(i.max_step_reached) for i in ending],
            action_masks=None if not self.branches else np.ones((n, int(sum(self.branches))), np.float32),
            group_id=[int(i.group_id) for i in ending], group_rewards=[float(i.group_reward) for i in ending],
            decision_requested=[False] * n)

    # ---------------------------------------------------------------- actions
    def encode_actions(self, flat: Any, agent_actions: Any) -> None:
        """Add this step's actions of the deciding agents to ``agent_actions`` (the message's map),
        and remember them as each agent's previous action."""
        ids = self.decision_ids
        rows = self.action_rows(flat, len(ids))
        entry = agent_actions[self.name].value
        n_continuous = self.continuous
        if self.branches:
            picks = rows[:, n_continuous:]
            ints = picks.astype(np.int64)
            wrong = (ints < 0) | (ints >= np.asarray(self.branches)) | (ints != picks)
            if wrong.any():
                i, k = map(int, np.argwhere(wrong)[0])
                raise UnityActionException(
                    f"Brain {self.name!r}: agent {ids[i]} chose {picks[i, k]!r} on discrete branch {k}, which has "
                    f"{self.branches[k]} actions: expected an integer in 0..{self.branches[k] - 1}.")
        if self.branches and n_continuous:  # hybrid: ActionTuple(continuous, discrete) per agent
            continuous = rows[:, :n_continuous].astype(np.float32)
            for agent, floats, row in zip(ids, continuous.tolist(), ints.tolist()):
                entry.add(continuous_actions=floats, discrete_actions=row)
                self.last_actions[agent] = np.asarray(floats + row, np.float32)
        elif self.branches:
            for agent, row in zip(ids, ints.tolist()):
                entry.add(discrete_actions=row, vector_actions_deprecated=row)
                self.last_actions[agent] = np.asarray(row, np.float32)
        else:
            for agent, row in zip(ids, rows.astype(np.float32)):
                as_list = row.tolist()
                entry.add(continuous_actions=as_list, vector_actions_deprecated=as_list)
                self.last_actions[agent] = row

    def action_rows(self, flat: Any, n_agents: int) -> np.ndarray:
        """``[n_agents, action_width]`` float64 actions, or an error naming the width the spec asks for.

        A row is the continuous actions then one index per discrete branch (hybrid: both).
        """
        width = self.parameters.action_width
        array = np.asarray(flat, dtype=np.float64)
        given = array.shape[-1] if array.ndim >= 2 else None
        if (given is not None and given != width) or array.size < n_agents * width or array.size % max(width, 1):
            parts = ([f"{self.continuous} continuous"] if self.continuous else []) + (
                [f"{len(self.branches)} discrete branches {self.branches}"] if self.branches else [])
            received = f"rows of {given} values" if given is not None else f"{array.size} values"
            raise UnityActionException(
                f"Brain {self.name!r}: the actions for its {n_agents} deciding agents are {received} "
                f"(shape {array.shape}), but its action spec is {' + '.join(parts) or 'empty'} = {width} values "
                f"per agent. Send an array of shape ({n_agents}, {width}): the continuous actions first, then one "
                "action index per discrete branch.")
        return array.reshape(-1, width)[:n_agents]


def new_behaviour(name: str, spec: Spec, descriptions: List[str], sensor_names: Sequence[Tuple[str, int]] = (),
                  channels_last: bool = True, package_version: str = "") -> "Behaviour":
    """A new brain: vector sensors concatenated into its state, cameras in order, and its
    ``sensors`` list keeping each one's name, shape and place, in the wire order."""
    continuous, branches, shapes = spec
    observations, cameras, state_size, sensors = [], [], 0, []
    for k, shape in enumerate(shapes):
        sensor_name, observation_type = sensor_names[k] if k < len(sensor_names) else ("", 0)
        sensor_name = sensor_name or f"sensor_{k}"
        if len(shape) == 3:
            hwc = (shape[1], shape[2], shape[0]) if channels_last else shape
            observations.append(ObservationSpec(shape, True, hwc, name=sensor_name))
            sensors.append({"name": sensor_name, "shape": [hwc[2], hwc[0], hwc[1]], "camera": len(cameras),
                            "observationType": observation_type})
            cameras.append({"width": hwc[1], "height": hwc[0], "blackAndWhite": hwc[2] == 1,
                            "channels": hwc[2]})
        else:
            size = int(np.prod(shape))
            observations.append(ObservationSpec(shape, False, size=size, name=sensor_name))
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
    behaviour = Behaviour(name, observations, continuous, list(branches), parameters, spec=spec,
                          channels_last=channels_last, package_version=package_version)
    logger.info("Connected new brain: %s (state %d, cameras %s, %s)", name, state_size,
                [tuple(o.hwc) for o in observations if o.visual],
                ", ".join(([f"{continuous} continuous actions"] if continuous else [])
                          + ([f"discrete branches {list(branches)}"] if branches else [])))
    return behaviour
