"""The trainer tests' one in-process environment, and the controller's loop over it.

``FakeEnv`` is one behaviour of ``n_agents`` agents whose episodes have fixed lengths (agent
``i``'s last ``episode_length + i`` steps) and fixed rewards (0.1 a step, 1.0 on the last), so a
test knows every episode's length and return without a scene. It speaks the environment layer's
step types (``unityagents.base_env``): each step it takes one ``ActionTuple`` per behaviour,
checked against the behaviour's action spec as a real environment checks it, and reports
``(DecisionSteps, TerminalSteps)`` per behaviour, in either protocol's semantics:

* API-2 (``reports_last_observation=False``, the default): every agent decides at every step; an
  agent whose episode ended is a terminal step too, whose observations are already the next
  episode's first (API-2 sends no last observation);
* modern (``reports_last_observation=True``): an agent whose episode ended is a terminal step
  with that episode's last observation, and a decision step with the next episode's first.

Cameras are uniform noise; a continuous state is Gaussian noise, a discrete one the agent's step
within its episode (modulo ``stateSize``). A brain with ``memorySize`` keeps the memories it is
sent and sends them back, zeros once an agent's episode ended (what API-2 scenes do).

``Loop`` drives a trainer over a ``FakeEnv`` the way ``TrainerController._loop_sync`` does,
through the trainers' own ``AgentProcessor`` and each trainer's ``ExperienceCollector``: act,
step, learn from the step's experience (``learn_from_step``), update when ready, count the
steps. Summaries and checkpoints are left out: a due summary clears the ``stats`` the tests read.
"""
from __future__ import annotations

import weakref
from typing import Any, Dict, Hashable, Iterable, List, Mapping, Optional

import numpy as np

from runner.agent_processor import AgentProcessor
from runner.collector import ExperienceCollector
from runner.controller import still_trains
from trainers.trainer.base import Trainer
from trainers.trainer.brain_info import BrainInfo
from unityagents.base_env import ActionTuple, BehaviorSteps, DecisionSteps, TerminalSteps
from unityagents.brain import BrainParameters

#: A step's reward, and the reward of the step that ends an episode.
STEP_REWARD, LAST_REWARD = 0.1, 1.0


class FakeEnv:
    """One behaviour of ``n_agents`` agents with episodes of ``episode_length + i`` steps (module docstring).

    :param brain: the behaviour; its sensors say what each step reports.
    :param seed: seeds the observations' noise (a deep copy goes on with the same draws).
    :param reports_last_observation: the modern protocol's semantics rather than API-2's.
    """

    def __init__(self, brain: BrainParameters, n_agents: int = 3, episode_length: int = 7, seed: int = 0,
                 reports_last_observation: bool = False):
        self.brain = brain
        self.brains = {brain.brain_name: brain}
        self.external_brain_names = [brain.brain_name]
        self.reports_last_observation = reports_last_observation
        self.n_agents = n_agents
        self.lengths = episode_length + np.arange(n_agents)
        self.rng = np.random.default_rng(seed)
        self.t = np.zeros(n_agents, dtype=int)  # each agent's steps into its episode
        self.memory = np.zeros((n_agents, brain.memory_space_size), np.float32)
        self.previous = np.zeros((n_agents, brain.action_width), np.float32)

    def _observations(self, positions: np.ndarray) -> List[np.ndarray]:
        """One array per sensor for agents at ``positions`` (their steps into the episode)."""
        k, obs = len(positions), []
        for sensor, spec in zip(self.brain.sensors, self.brain.behavior_spec.observation_specs):
            if sensor.is_camera:
                obs.append(self.rng.uniform(size=(k,) + spec.shape).astype(np.float32))
            elif self.brain.state_space_type == "discrete":
                obs.append((positions % self.brain.state_space_size).reshape(k, 1).astype(np.float32))
            else:
                obs.append(self.rng.normal(size=(k,) + spec.shape).astype(np.float32))
        return obs

    def _steps(self, obs: List[np.ndarray], done: np.ndarray, last_obs: List[np.ndarray]) -> Dict[str, BehaviorSteps]:
        brain, ids = self.brain, np.arange(self.n_agents)
        masks = [np.zeros((self.n_agents, b), bool) for b in brain.action_branches] if brain.uses_action_masks else None
        decisions = DecisionSteps(obs, np.where(done, 0.0, STEP_REWARD), ids, masks,
                                  memory=self.memory.copy() if brain.memory_space_size else None,
                                  previous_action=self.previous.copy())
        terminals = TerminalSteps(last_obs, np.full(int(done.sum()), LAST_REWARD), np.zeros(int(done.sum()), bool),
                                  ids[done], previous_action=self.previous[done])
        return {brain.brain_name: (decisions, terminals)}

    def reset(self, train_mode: bool = True) -> Dict[str, BehaviorSteps]:
        """Every agent at the start of a new episode, with no memory."""
        self.t[:] = 0
        self.memory[:] = 0.0
        done = np.zeros(self.n_agents, bool)
        obs = self._observations(self.t)
        return self._steps(obs, done, [o[done] for o in obs])

    def step(self, action: Mapping[str, ActionTuple], memory: Optional[Mapping[str, Any]] = None,
             value: Optional[Mapping[str, Any]] = None) -> Dict[str, BehaviorSteps]:
        """Every agent acts (``action``: an ``ActionTuple`` per behaviour, in ``DecisionSteps`` order).

        ``memory``: the rows a brain with ``memorySize`` keeps and sends back; ``value``, the value
        estimates, which a scene is sent and does not use."""
        name = self.brain.brain_name
        if name not in action:
            raise AssertionError(f"FakeEnv.step expected actions for {name!r}; got them for {sorted(action)}.")
        sent = self.brain.behavior_spec.action_spec.validate(action[name], self.n_agents, name)
        self.previous = np.concatenate([sent.continuous, sent.discrete.astype(np.float32)], axis=1)
        self.t += 1
        done = self.t == self.lengths
        kept = (memory or {}).get(name)
        if self.brain.memory_space_size:
            rows = self.memory if kept is None else np.asarray(kept, np.float32)
            self.memory = np.where(done[:, None], 0.0, rows).astype(np.float32)  # zeros after an agent reset
        if not self.reports_last_observation:
            self.t[done] = 0
            obs = self._observations(self.t)
            return self._steps(obs, done, [o[done] for o in obs])
        obs = self._observations(self.t)
        last = [o[done].copy() for o in obs]
        self.t[done] = 0
        for o, first in zip(obs, self._observations(self.t[done])):
            o[done] = first
        return self._steps(obs, done, last)

    def __repr__(self) -> str:
        semantics = "modern" if self.reports_last_observation else "API-2"
        return (f"FakeEnv({self.brain.brain_name!r}, {self.n_agents} agents, "
                f"episodes of {self.lengths.tolist()} steps, {semantics})")


_COLLECTORS: "weakref.WeakKeyDictionary[Trainer, ExperienceCollector]" = weakref.WeakKeyDictionary()


def collector_of(trainer: Trainer) -> ExperienceCollector:
    """The trainer's collector, as the controller builds it (one per trainer, made on first use)."""
    collector = _COLLECTORS.get(trainer)
    if collector is None:
        collector = _COLLECTORS[trainer] = ExperienceCollector.for_trainer(trainer)
    return collector


def learn_from_step(trainer: Trainer, before: Mapping[str, BrainInfo], after: Mapping[str, BrainInfo],
                    outputs: Any) -> None:
    """What the controller does after a step: the trainer learns from its collector's experience."""
    trainer.process_experience(collector_of(trainer).collect(before, after, outputs))


def end_episodes(trainer: Trainer, agents: Optional[Iterable[Hashable]] = None) -> None:
    """What the controller does after an environment reset: collector and trainer drop the cut episodes."""
    agents = None if agents is None else list(agents)
    collector_of(trainer).end_episode(agents)
    trainer.end_episode(agents)


class Loop:
    """``TrainerController._loop_sync`` for one trainer over ``env``, from its reset.

    ``info`` is the ``BrainInfo`` the next step acts on; a deep copy of the loop (its environment,
    its processor and that info) goes on exactly as the original would, for comparing two trainers
    on the same steps.
    """

    def __init__(self, env: FakeEnv):
        self.env = env
        self.processor = AgentProcessor(env.brains, env.reports_last_observation)
        self.info: Dict[str, BrainInfo] = self.processor.infos(env.reset())

    def step(self, trainer: Trainer, update: bool = True) -> None:
        """One environment step, as the controller takes it."""
        name, info = trainer.brain_name, self.info
        actions, memories, values, outputs = trainer.take_action(info)
        sent = self.processor.decisions(info, {name: actions}, {name: memories}, {name: values})
        new_info = self.processor.infos(self.env.step(*sent))
        learn_from_step(trainer, info, new_info, outputs)
        if update and still_trains(trainer) and trainer.is_ready_update():
            trainer.update_model()
        trainer.increment_step(int(np.count_nonzero(info[name].decision_requested)))
        trainer.update_last_reward()
        self.info = new_info

    def run(self, trainer: Trainer, steps: int, update: bool = True) -> None:
        for _ in range(steps):
            self.step(trainer, update)

    def until_ready(self, trainer: Trainer, max_steps: int = 200) -> int:
        """Steps without updating until ``trainer`` is ready to update; how many it took."""
        for taken in range(1, max_steps + 1):
            self.step(trainer, update=False)
            if trainer.is_ready_update():
                return taken
        raise AssertionError(f"{trainer.brain_name}: not ready to update after {max_steps} steps of {self.env}")

    def __repr__(self) -> str:
        return f"Loop({self.env})"


__all__ = ["FakeEnv", "LAST_REWARD", "Loop", "STEP_REWARD", "collector_of", "end_episodes", "learn_from_step"]
