"""The Academy loop of the API-2 era, in Python: it runs a ``Scene`` (``academy.scene``) over its brains'
agents (``academy.brain``) and answers a trainer's RESET and STEP, or runs stand-alone.

The loop follows Unity's ``Academy.cs`` of ML-Agents 0.3 (API-2):

* a decision is taken every ``frame_to_skip + 1`` frames; skipped frames repeat the stored action;
* ``max_steps > 0`` makes the Academy globally done after that many frames, which sets every
  agent done;
* an agent is locally done when its scene says so or when its step counter exceeds the brain's
  ``max_step`` (so after ``max_step + 1`` steps, as in ``Agent.Step()``);
* for each brain in child order: done agents are reset **before** the state is sent, so a done
  agent's message carries its terminal reward and its first post-reset state; then done flags and
  rewards are cleared (``ResetDoneAndReward``). Every agent behaves as Unity's ``resetOnDone = true``
  (the default, and what every example scene used); agents that wait, done, for the next Academy
  reset are not modelled.

Deliberate deviation: with ``frame_to_skip = k > 0`` Unity sends the reset state only on the
(k+1)-th frame after a reset, stepping the agents with stale actions in between. Here the reset state
is sent at once, because those stale steps are an artefact of its recursive ``RunMdp``.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Protocol

import numpy as np

from academy.brain import BrainConfig, BrainRuntime
from academy.checks import ResetParameterError, checked_actions, checked_reset_parameters, clip
from academy.scene import Scene, modern_observations


class Communicator(Protocol):
    """The Unity end of the wire as the Academy uses it (``communicator.ExternalCommunicator``)."""

    def send_academy_parameters(self, parameters: dict) -> None: ...

    def get_command(self) -> str: ...

    def get_reset_config(self) -> tuple[bool, dict]: ...

    def get_actions(self) -> dict: ...

    def send_brain_info(self, message: dict, frames: list[np.ndarray]) -> None: ...

    def send_done(self, done: bool) -> None: ...


class Academy:
    """Runs a scene the way Unity's ``Academy`` runs its brains and agents."""

    def __init__(self, scene: Scene, configs: dict[str, BrainConfig] | None = None,
                 train_mode: bool = False, frame_time_ms: float = 0.0) -> None:
        configs = dict(configs or {})
        unknown = set(configs) - {b.name for b in scene.brains}
        if unknown:
            raise ValueError(f"unknown brain(s) {sorted(unknown)} for scene {type(scene).__name__}; "
                             f"its brains are {[b.name for b in scene.brains]}")
        self.scene = scene
        self.brains = [BrainRuntime(spec, i, configs.get(spec.name, BrainConfig(spec.brain_type)))
                       for i, spec in enumerate(scene.brains)]
        self.train_mode = train_mode
        if not (frame_time_ms >= 0.0 and math.isfinite(frame_time_ms)):
            raise ValueError(f"frame_time_ms must be a finite number >= 0, got {frame_time_ms!r}")
        #: Emulated engine cost: seconds slept per decision, as a heavy Unity build waits on its frames.
        self.frame_time = frame_time_ms / 1000.0
        self.record_episodes = False
        self.current_step = 0
        self.episode_count = 0
        self.done = False

    @property
    def subscribed(self) -> list[BrainRuntime]:
        """The brains in ``brainNames`` order (child order, External + broadcasting)."""
        return [b for b in self.brains if b.subscribed]

    def academy_parameters(self, log_path: str = "") -> dict:
        """The handshake message, keys in C# ``AcademyParameters`` order."""
        subscribed = self.subscribed
        hybrid = [b.name for b in subscribed if b.spec.discrete_branches]
        if hybrid:
            raise ValueError(f"brains {hybrid} of {type(self.scene).__name__} have hybrid actions (continuous and "
                             "discrete branches), which the API-2 protocol cannot describe; serve the scene over the "
                             "modern protocol (--mlagents-port) and train it with --protocol grpc.")
        return {
            "AcademyName": self.scene.academy_name,
            "apiNumber": "API-2",
            "logPath": log_path,
            "resetParameters": {k: float(v) for k, v in self.scene.default_reset_parameters.items()},
            "brainNames": [b.name for b in subscribed],
            "brainParameters": [b.spec.parameters_json() for b in subscribed],
            "externalBrainNames": [b.name for b in subscribed if b.config.kind == "external"],
        }

    # --- reset ------------------------------------------------------------------------------------

    def reset(self, train_mode: bool | None = None, parameters: dict | None = None) -> None:
        """``Academy.Reset()``: merge reset parameters, reset the scene and every agent.

        An unknown parameter name or a value that is not a number is logged and ignored (as Unity
        does); NaN, an infinity or a value outside the scene's range raises ResetParameterError
        before anything changes, and so does a scene that cannot be reset with the new values.
        """
        if train_mode is not None:
            self.train_mode = bool(train_mode)
        updates = checked_reset_parameters(self.scene, parameters)
        previous = dict(self.scene.params)
        self.scene.params.update(updates)
        self.current_step = 0
        self.episode_count += 1
        self.done = False
        try:
            self.scene.academy_reset()
            for brain in self.brains:
                self.reset_agents(brain, np.arange(brain.spec.n_agents))
        except (ValueError, ArithmeticError, MemoryError) as exc:
            self.scene.params.clear()
            self.scene.params.update(previous)
            raise ResetParameterError(f"{self.scene.academy_name} cannot reset with the reset parameters "
                                      f"{clip(repr(updates))}: {exc}. Send values the scene can use.") from None
        for brain in self.brains:
            brain.reward[:] = 0.0
            brain.group_reward[:] = 0.0
            brain.done[:] = False
            brain.episode_reward[:] = 0.0

    def reset_agents(self, brain: BrainRuntime, index: np.ndarray) -> None:
        """``Agent.Reset()``: zero memory and step counter, then the scene's ``AgentReset``."""
        brain.memory[index] = 0.0
        brain.steps[index] = 0
        self.scene.reset_agents(brain.name, index)

    # --- one decision -----------------------------------------------------------------------------

    def set_external_actions(self, message: dict) -> None:
        """Store Python's ``{"action", "memory", "value"}`` for every External brain.

        Raises ActionError, before anything is stored, when a brain's action is missing, when a
        field is not a list of finite numbers of the brain's size, or when a discrete action is not
        one of the brain's actions: a Unity build would index past its arrays or run its physics on
        NaN, and stall or poison the trainer.
        """
        for target, array in checked_actions(self.brains, message):
            target[:] = array

    def decide(self, external_by_heuristic: bool = False) -> None:
        """``DecideAction()`` of the non-External brains (and of External ones when stand-alone)."""
        for brain in self.brains:
            kind = brain.config.kind
            if kind == "heuristic" or (kind == "external" and external_by_heuristic):
                brain.action[:] = self.scene.heuristic(brain.name)
            elif kind == "internal":
                policy = brain.config.policy
                if getattr(policy, "reads_sensors", False):  # an .onnx: one input per sensor, as modern Unity
                    values = modern_observations(self.scene, brain.spec, sensors=policy.sensors)
                    actions, memory = policy.decide_sensors(values, brain.memory)
                else:
                    observations = [self.scene.render(brain.name, i) for i in range(len(brain.spec.cameras))]
                    actions, memory = policy.decide(self.scene.states(brain.name), observations, brain.memory)
                brain.action[:] = np.asarray(actions, dtype=float).reshape(brain.action.shape)
                if brain.memory.shape[1]:
                    brain.memory[:] = np.asarray(memory, dtype=float).reshape(brain.memory.shape)

    def advance(self) -> None:
        """Run the frames of one decision with the stored actions (``AcademyStep`` + ``AgentStep``)."""
        scene = self.scene
        actions = {b.name: b.action for b in self.brains}
        if self.frame_time:
            time.sleep(self.frame_time)  # a sleep, not CPU work: an engine waiting on its frame
        for _ in range(scene.frame_to_skip + 1):
            self.current_step += 1
            if scene.max_steps > 0 and self.current_step >= scene.max_steps:
                self.done = True
            results = scene.step(actions)
            for brain in self.brains:
                reward, done, *group = results[brain.name]
                active = ~brain.done
                # Masked adds as one ufunc call each (``where``): the same sums, without the copies
                # that reading and writing through a boolean index makes.
                np.add(brain.reward, reward, out=brain.reward, where=active)
                if group:
                    np.add(brain.group_reward, group[0], out=brain.group_reward, where=active)
                np.add(brain.steps, 1, out=brain.steps, where=active)
                max_step = brain.spec.max_step
                if max_step > 0:
                    done = done | (brain.steps > max_step)
                brain.done |= active & done
            if self.done:
                break

    def finish_step(self, emit: Callable[[BrainRuntime], None] | None = None) -> bool:
        """``Academy.Step()`` after the frames: per brain, done → reset → send → clear; returns done.

        ``emit`` is called for each subscribed brain after its done agents were reset and before its
        rewards and done flags are cleared: that is when Unity serialises the state message.
        """
        for brain in self.brains:
            if self.done:
                brain.done[:] = True
            brain.episode_reward += brain.reward + brain.group_reward
            done_rows = np.flatnonzero(brain.done)
            if done_rows.size:
                if self.record_episodes:
                    brain.finished.extend(brain.episode_reward[done_rows].tolist())
                brain.episode_reward[done_rows] = 0.0
                self.reset_agents(brain, done_rows)
            if emit is not None and brain.subscribed:
                emit(brain)
            brain.reward[:] = 0.0
            brain.group_reward[:] = 0.0
            brain.done[:] = False
        return self.done

    def state_message(self, brain: BrainRuntime) -> dict:
        """The per-brain state message (C# ``StepMessage`` field order).

        States go out with 6 decimals: about the precision of Unity's float32 values, and half the
        JSON work of full float64 reprs, which dominate the cost of a step.
        """
        return {
            "brain_name": brain.name,
            "agents": brain.ids,
            "states": np.round(self.scene.states(brain.name), 6).ravel().tolist(),
            "rewards": (brain.reward + brain.group_reward).tolist(),  # API-2 has no group reward
            "actions": brain.action.ravel().tolist(),
            "memories": brain.memory.ravel().tolist(),
            "dones": brain.done.tolist(),
        }

    # --- connected to a trainer -------------------------------------------------------------------

    def serve(self, comm: Communicator, log_path: str = "") -> str:
        """Handshake, then answer RESET and STEP until another command; returns that command.

        Raises the communicator's errors (connection lost, protocol violation) and ActionError.
        """
        comm.send_academy_parameters(self.academy_parameters(log_path))
        while True:
            command = comm.get_command()
            if command == "RESET":
                self.reset(*comm.get_reset_config())
            elif command == "STEP":
                self.set_external_actions(comm.get_actions())
                self.decide()
                self.advance()
            else:
                return command

            def emit(brain: BrainRuntime) -> None:
                frames = [self.scene.render(brain.name, i) for i in range(len(brain.spec.cameras))]
                comm.send_brain_info(self.state_message(brain), frames)

            comm.send_done(self.finish_step(emit))

    # --- stand-alone ------------------------------------------------------------------------------

    def run_episodes(self, episodes: int) -> dict[str, float]:
        """Run with no trainer until every brain finished ``episodes`` agent episodes.

        External brains act with the scene heuristic. Returns the mean reward of each brain's first
        ``episodes`` finished episodes (in completion order, so the result is deterministic).
        """
        self.record_episodes = True
        self.reset()
        for brain in self.brains:
            brain.finished.clear()
        while any(len(b.finished) < episodes for b in self.brains):
            self.decide(external_by_heuristic=True)
            self.advance()
            if self.finish_step():
                self.reset()
        return {b.name: float(np.mean(b.finished[:episodes])) for b in self.brains}
