"""Unity's Demonstration Recorder for the built-in scenes: ``--record-demo FILE``.

``python -m academy <Scene> --record-demo FILE.demo --brain X=heuristic --episodes N`` runs the
scene stand-alone and records brain X's scripted heuristic into a ``.demo`` file laid out as the
C# ``DemonstrationWriter`` lays it out, so that ML-Agents' loader (and ``unityagents.demo``) reads
it:

* offset 0: the ``DemonstrationMetaProto`` (API version 1, the name cut to 16 characters of
  ``[a-zA-Z0-9 -]``, step and episode counts, mean episode reward), length-delimited; Unity
  reserves 32 bytes for it and rewrites it when the recording closes, so it must fit there;
* offset 33: the ``BrainParametersProto`` (``<behaviour>?team=0``, named as Unity's example,
  ``academy.UNITY_NAMES``; ``is_training`` false, the action
  spec and, for older readers, the deprecated action fields), length-delimited;
* one length-delimited ``AgentInfoActionPairProto`` per agent decision, terminal ones included,
  with the observations built exactly as ``grpc_communicator`` sends them to a trainer (same
  sensor names, order, PNG cameras, one-hot discrete states, action masks);
* at the end an undelimited copy of the meta, as ``WriteMetadata`` appends it.

A brain has many agents acting at once, and a reader pairs each step with the next one. Each
agent's episode is therefore kept until it ends and then written whole, so the file is a
sequence of complete episodes, each contiguous. Recording stops after ``N`` complete episodes;
unfinished episodes are dropped, and the header counts exactly what the file holds (Unity's
recorder also counts the unfinished episode it closes on, which lowers its mean reward).
"""
from __future__ import annotations

import re
from typing import BinaryIO, Dict, List

import numpy as np
from google.protobuf.internal.encoder import _VarintBytes

from academy import UNITY_NAMES
from academy.academy import Academy
from academy.brain import BrainRuntime
from academy.grpc_communicator import DEFAULT_PACKAGE_VERSION, ModernUnity
from unityagents.wire.protos import communicator_objects_pb2 as pb

#: Where the brain parameters start: Unity reserves 32 bytes for the meta header, plus one.
INITIAL_POS = 33
DEMONSTRATION_API_VERSION = 1
MAX_NAME_LENGTH = 16


def demonstration_name(text: str) -> str:
    """The name as Unity's recorder keeps it: letters, digits, spaces and '-', at most 16."""
    return re.sub(r"[^a-zA-Z0-9 -]", "", text)[:MAX_NAME_LENGTH]


def _delimited(message) -> bytes:
    data = message.SerializeToString()
    return _VarintBytes(len(data)) + data


class DemonstrationWriter:
    """Writes one ``.demo`` file: header space, brain parameters, pairs; ``close`` writes the meta."""

    def __init__(self, stream: BinaryIO, name: str, brain: "pb.BrainParametersProto") -> None:
        self.stream = stream
        self.meta = pb.DemonstrationMetaProto(api_version=DEMONSTRATION_API_VERSION,
                                              demonstration_name=demonstration_name(name))
        stream.write(b"\0" * INITIAL_POS)
        stream.write(_delimited(brain))
        self.episode_rewards: List[float] = []

    def write_episode(self, pairs: List["pb.AgentInfoActionPairProto"]) -> None:
        """One complete episode (its last pair is the terminal one)."""
        for pair in pairs:
            self.stream.write(_delimited(pair))
        self.meta.number_steps += len(pairs)
        self.episode_rewards.append(float(sum(p.agent_info.reward for p in pairs)))

    def close(self) -> "pb.DemonstrationMetaProto":
        """Append the undelimited meta, then write the delimited one at offset 0, as Unity does."""
        self.meta.number_episodes = len(self.episode_rewards)
        self.meta.mean_reward = float(np.mean(self.episode_rewards)) if self.episode_rewards else 0.0
        header = _delimited(self.meta)
        if len(header) > INITIAL_POS:
            raise ValueError(f"the demonstration header takes {len(header)} bytes, more than the {INITIAL_POS} "
                             "reserved for it; record fewer steps or give a shorter name")
        self.stream.write(self.meta.SerializeToString())
        self.stream.seek(0)
        self.stream.write(header)
        self.stream.flush()
        return self.meta


def brain_parameters_proto(brain: BrainRuntime) -> "pb.BrainParametersProto":
    """The behaviour's parameters as the recorder writes them (the wire's, with is_training false)."""
    spec = brain.spec
    params = pb.BrainParametersProto(brain_name=f"{UNITY_NAMES.get(brain.name, brain.name)}?team=0", is_training=False)
    if spec.action_space == "discrete":
        params.action_spec.num_discrete_actions = 1
        params.action_spec.discrete_branch_sizes.append(spec.action_size)
        params.vector_action_space_type_deprecated = pb.discrete
    else:
        params.action_spec.num_continuous_actions = spec.action_size
        params.vector_action_space_type_deprecated = pb.continuous
    params.vector_action_size_deprecated.append(spec.action_size)
    return params


class DemonstrationRecorder:
    """Runs ``academy`` stand-alone (every brain by its heuristic) and records ``brain_name``."""

    def __init__(self, academy: Academy, brain_name: str, package_version: str = DEFAULT_PACKAGE_VERSION,
                 decision_period: int | None = None) -> None:
        brains = {b.name: b for b in academy.brains}
        if brain_name not in brains:
            raise ValueError(f"cannot record brain {brain_name!r}: the scene's brains are {sorted(brains)}")
        self.academy = academy
        self.brain = brains[brain_name]
        self.period = max(1, int(decision_period or self.brain.spec.decision_period))
        # The wire's own observation encoding; no trainer connection is made.
        self.wire = ModernUnity(academy, client=None, package_version=package_version)  # type: ignore[arg-type]

    def _info(self, rows: np.ndarray, done: bool, interrupted: np.ndarray) -> List["pb.AgentInfoProto"]:
        b = self.brain
        sensors, templates = self.wire._sensors(b, rows), self.wire._templates(b)
        masks = self.academy.scene.action_mask(b.name) if not done else None
        infos = []
        for k, row in enumerate(rows):
            info = pb.AgentInfoProto(reward=float(b.reward[row]), done=done, id=int(row),
                                     max_step_reached=bool(interrupted[k]))
            self.wire._write_observations(info, templates, k, sensors)
            if masks is not None:
                info.action_mask.extend(bool(m) for m in masks[row])
            infos.append(info)
        b.reward[rows] = 0.0
        return infos

    def _action(self, row: int) -> "pb.AgentActionProto":
        b = self.brain
        if b.spec.action_space == "discrete":
            return pb.AgentActionProto(discrete_actions=[int(round(b.action[row, 0]))])
        return pb.AgentActionProto(continuous_actions=[float(a) for a in b.action[row]])

    def record(self, writer: DemonstrationWriter, episodes: int) -> List[float]:
        """Record until ``episodes`` episodes are complete; returns their rewards."""
        academy, b = self.academy, self.brain
        n = b.spec.n_agents
        current: Dict[int, List[pb.AgentInfoActionPairProto]] = {row: [] for row in range(n)}
        academy.reset()
        held = np.array(b.action)
        step = 0
        while len(writer.episode_rewards) < episodes:
            deciding = step % self.period == 0
            academy.decide(external_by_heuristic=True)  # every brain acts by its heuristic
            if deciding:
                rows = np.arange(n)
                for row, info in zip(rows, self._info(rows, False, np.zeros(n, bool))):
                    current[int(row)].append(pb.AgentInfoActionPairProto(agent_info=info,
                                                                         action_info=self._action(int(row))))
                held = np.array(b.action)
            else:
                b.action[:] = held  # agents repeat their action between decisions
            academy.advance()
            step += 1
            if academy.done:  # the Academy's max step interrupts every episode
                b.done[:] = True
            rows = np.flatnonzero(b.done)
            if rows.size:
                max_step = b.spec.max_step
                interrupted = np.array([academy.done or (max_step > 0 and b.steps[r] > max_step) for r in rows])
                for row, info in zip(rows, self._info(rows, True, interrupted)):
                    episode = current[int(row)]
                    episode.append(pb.AgentInfoActionPairProto(agent_info=info, action_info=self._action(int(row))))
                    if len(writer.episode_rewards) < episodes:
                        writer.write_episode(episode)
                    current[int(row)] = []
            for other in academy.brains:  # reset done agents, clear what was reported
                done_rows = np.flatnonzero(other.done)
                if done_rows.size:
                    academy.reset_agents(other, done_rows)
                other.done[:] = False
                if other is not b:
                    other.reward[:] = 0.0
            if academy.done:
                academy.reset()
                step = 0
        return list(writer.episode_rewards)


def record_demonstration(academy: Academy, brain_name: str, path: str, episodes: int,
                         package_version: str = DEFAULT_PACKAGE_VERSION, decision_period: int | None = None,
                         name: str | None = None) -> "pb.DemonstrationMetaProto":
    """Record ``episodes`` episodes of ``brain_name``'s heuristic into ``path``; returns the meta."""
    if episodes < 1:
        raise ValueError(f"--episodes must be at least 1 to record a demonstration, got {episodes}")
    recorder = DemonstrationRecorder(academy, brain_name, package_version, decision_period)
    with open(path, "wb") as stream:
        writer = DemonstrationWriter(stream, name or academy.scene.academy_name, brain_parameters_proto(recorder.brain))
        recorder.record(writer, episodes)
        return writer.close()


__all__ = ["DemonstrationRecorder", "DemonstrationWriter", "INITIAL_POS", "brain_parameters_proto",
           "demonstration_name", "record_demonstration"]
