"""Acting with a PPO graph: its inputs in one fixed order, their values, memories, noise, compiled calls.

The PPO trainer (acting, bootstrap values), the ghost (acting with a snapshot) and the team
self-play opponent feed the same kind of network the same way, so all three act through a
``PPOPolicy``: one compiled call (``compiled_call``: a session callable, feed list built once) per
set of fetches, fed with the info's arrays themselves (or their ``rows``, one fancy index per input).

Memories: an API-2 scene stores each agent's memory and sends it back; a modern-protocol
environment stores none, so a policy that ``keeps_memories`` keeps them per agent key, the way
Unity's inference carries an ONNX model's ``recurrent_out`` to its next ``recurrent_in``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from trainers.ppo.models import PPOModel
from trainers.tf_utils import compiled_call, tf
from trainers.trainer.base import UnityTrainerException
from trainers.trainer.brain_info import BrainInfo
from unityagents.brain import BrainParameters


def greedy_branches(probs: np.ndarray, branches: Sequence[int]) -> np.ndarray:
    """The most probable action of each branch (int64 ``[N, len(branches)]``) from the branches'
    probabilities laid side by side; a masked action has probability 0, so it is never chosen."""
    choices, offset = [], 0
    for size in branches:
        choices.append(np.argmax(probs[:, offset:offset + size], axis=1))
        offset += size
    return np.stack(choices, axis=1).astype(np.int64)


def branch_log_prob(probs: np.ndarray, branches: Sequence[int], chosen: np.ndarray) -> np.ndarray:
    """``sum_b log p_b(chosen_b)`` per row: the log-probability of one action per branch."""
    total, offset = np.zeros(len(probs), np.float64), 0
    rows = np.arange(len(probs))
    for k, size in enumerate(branches):
        p = probs[rows, offset + np.asarray(chosen[:, k], np.int64)]
        total += np.log(np.maximum(p, 1e-38))
        offset += size
    return total.astype(np.float32)


class ActingInputs:
    """The inputs of a PPO acting graph in one fixed order: the feed list of its compiled calls.

    ``batch_size``, ``sequence_length`` (1), the state, each camera, and the memory when recurrent.
    """

    def __init__(self, model: PPOModel):
        self.model = model
        m = model
        self.placeholders: List[tf.Tensor] = (
            [m.batch_size, m.sequence_length]
            + ([m.state_in] if m.state_in is not None else [])
            + list(m.observation_in)
            + ([m.memory_in] if m.use_recurrent else [])
        )

    def values(self, info: BrainInfo, rows: Optional[np.ndarray] = None,
               memories: Optional[np.ndarray] = None) -> List[Any]:
        """The values of ``placeholders`` for the agents ``rows`` of ``info`` (all when None).

        :param memories: ``[len(info.agents), memorySize]``, required when recurrent.
        """
        m = self.model
        select = (lambda x: x) if rows is None else (lambda x: np.asarray(x)[rows])
        values: List[Any] = [len(info.agents) if rows is None else len(rows), 1]
        if m.state_in is not None:
            values.append(select(info.states))
        values += [select(observation) for observation in info.observations]
        if m.use_recurrent:
            values.append(select(memories))
        return values


class PPOPolicy:
    """The acting side of one PPO graph for one brain.

    :param sess: the run's session.
    :param model: the graph (a learner's, or an acting copy of it).
    :param brain: the brain acted for (its action branches size the masks).
    :param rng: the generator of the exploration noise.
    :param keeps_memories: keep each agent's next memory here (the environment keeps none).
    """

    def __init__(self, sess, model: PPOModel, brain: BrainParameters, rng: np.random.Generator,
                 keeps_memories: bool = False):
        self.sess = sess
        self.model = model
        self.brain = brain
        self.rng = rng
        self.inputs = ActingInputs(model)
        self.is_continuous = model.is_continuous
        self.keeps_memories = keeps_memories
        self._agent_memories: Dict[Any, np.ndarray] = {}
        self._calls: Dict[Any, Tuple[Callable[..., List[Any]], List[str]]] = {}
        self._noise_buffers: Optional[Tuple[np.ndarray, np.ndarray]] = None
        self._ones: Optional[np.ndarray] = None

    @property
    def masks_input(self) -> Optional[tf.Tensor]:
        """The action-mask placeholder of a branched or hybrid policy; None otherwise."""
        return getattr(self.model, "action_masks", None)

    # ------------------------------------------------------------------ compiled calls
    def acting_call(self, fetches: Mapping[str, tf.Tensor], sample: bool,
                    targets: Iterable[Any] = ()) -> Tuple[Callable[..., List[Any]], List[str]]:
        """The compiled acting call for ``fetches`` (cached by ``sample`` and their names) and their names.

        Its feed list is the acting inputs, then the exploration noise (continuous, ``sample``)
        and the action masks (branched policies), as ``acting_values`` gives them; ``targets``
        run after the fetches (e.g. the normaliser's update) and return nothing of interest.
        """
        key = (sample, tuple(fetches), tuple(id(t) for t in targets))
        if key not in self._calls:
            m = self.model
            feeds = list(self.inputs.placeholders)
            if self.is_continuous and sample:
                feeds.append(m.epsilon)
            if self.masks_input is not None:
                feeds.append(self.masks_input)
            names = list(fetches)
            self._calls[key] = (compiled_call(self.sess, [fetches[k] for k in names] + list(targets), feeds), names)
        return self._calls[key]

    def acting_values(self, info: BrainInfo, memories: Optional[np.ndarray],
                      sample: bool) -> Tuple[List[Any], Optional[np.ndarray]]:
        """The values of ``acting_call``'s feed list for every agent of ``info``, and the masks fed."""
        n = len(info.agents)
        values = self.inputs.values(info, None, memories)
        if self.is_continuous and sample:
            values.append(self.noise(n))
        masks = None
        if self.masks_input is not None:  # modern-protocol discrete brains
            masks = self.all_allowed(n) if info.action_masks is None else np.asarray(info.action_masks, np.float32)
            values.append(masks)
        return values, masks

    def act(self, info: BrainInfo, fetches: Mapping[str, tf.Tensor], sample: bool,
            memories: Optional[np.ndarray] = None, targets: Iterable[Any] = ()
            ) -> Tuple[Dict[str, Any], Optional[np.ndarray]]:
        """``{name: value}`` of ``fetches`` for every agent of ``info``, and the action masks fed."""
        call, names = self.acting_call(fetches, sample, targets)
        values, masks = self.acting_values(info, memories, sample)
        return dict(zip(names, call(*values))), masks

    def values_call(self, fetches: List[tf.Tensor]) -> Callable[..., List[Any]]:
        """The compiled call of ``fetches`` on the acting inputs alone (value estimates)."""
        key = ("values", tuple(id(t) for t in fetches))
        if key not in self._calls:
            self._calls[key] = (compiled_call(self.sess, fetches, self.inputs.placeholders), [])
        return self._calls[key][0]

    def greedy(self, actions: np.ndarray, probs: np.ndarray,
               log_probs: Optional[np.ndarray] = None) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """Deterministic acting: ``actions`` with each discrete branch's most probable choice in place
        of its sample, and ``log_probs`` moved to the chosen actions.

        The continuous part is already the mean when acted without noise (``sample`` False), so a
        continuous policy's actions come back as they are. ``probs`` is the graph's ``action_probs``
        (the branches side by side, masked actions at 0).
        """
        m = self.model
        hybrid = bool(getattr(m, "is_hybrid", False))
        if m.is_continuous and not hybrid:
            return actions, log_probs
        branches = list(getattr(self.brain, "action_branches", None) or [self.brain.action_space_size])
        n_continuous = self.brain.action_space_size if hybrid else 0
        sampled = np.rint(np.asarray(actions)[:, n_continuous:]).astype(np.int64)
        chosen = greedy_branches(probs, branches)
        if log_probs is not None:
            log_probs = (log_probs + branch_log_prob(probs, branches, chosen)
                         - branch_log_prob(probs, branches, sampled)).astype(np.float32)
        if n_continuous:
            return np.concatenate([actions[:, :n_continuous], chosen.astype(actions.dtype)], axis=1), log_probs
        return chosen.astype(np.asarray(actions).dtype), log_probs

    # ------------------------------------------------------------------ noise and masks
    def noise(self, n: int) -> np.ndarray:
        """``[n, actionSize]`` N(0, 1) exploration noise in a preallocated float32 array."""
        shape = (n, self.brain.action_space_size)
        if self._noise_buffers is None or self._noise_buffers[0].shape[0] < n:
            self._noise_buffers = (np.empty(shape), np.empty(shape, np.float32))
        wide, narrow = self._noise_buffers[0][:n], self._noise_buffers[1][:n]
        self.rng.standard_normal(out=wide)  # float64 draws: the same stream as standard_normal(shape)
        np.copyto(narrow, wide)
        return narrow

    def all_allowed(self, n: int) -> np.ndarray:
        """``[n, sum(branches)]`` ones: the action masks of a brain whose scene sent none."""
        width = int(sum(self.brain.action_branches))
        if self._ones is None or self._ones.shape[0] < n:
            self._ones = np.ones((n, width), np.float32)
        return self._ones[:n]

    # ------------------------------------------------------------------ memories
    def memories(self, info: BrainInfo) -> np.ndarray:
        """The memory each agent of ``info`` starts its decision from.

        An API-2 scene stores the memories and sends them back (``info.memories``; zeros on the very
        first step). A modern-protocol environment keeps none, so a policy that ``keeps_memories``
        keeps them, per agent key (``(environment, agent)`` with several environments), as Unity's
        own inference does: zeros for an agent it has not seen and for one whose row starts a new
        episode (done and asking for its next decision); the memory the last decision returned
        otherwise, which is also the memory of a row that only reports its episode's end.
        """
        n, size = len(info.agents), self.model.m_size
        if self.keeps_memories:
            memories = np.zeros((n, size), dtype=np.float32)
            kept = self._agent_memories
            for r, agent in enumerate(info.agents):
                if info.local_done[r] and info.decision_requested[r]:
                    continue
                memory = kept.get(agent)
                if memory is not None:
                    memories[r] = memory
            return memories
        memories = info.memories
        if memories is None or np.size(memories) == 0:
            return np.zeros((n, size), dtype=np.float32)
        memories = np.asarray(memories, dtype=np.float32)
        if memories.shape != (n, size):
            raise UnityTrainerException(
                f"Brain '{self.brain.brain_name}' expected memories of shape {(n, size)} (agents x memorySize) but "
                f"the environment sent {memories.shape}."
            )
        return memories

    def remember(self, info: BrainInfo, memory_out: np.ndarray) -> None:
        """Keep each agent's next memory (``keeps_memories``); forget those whose episode just ended."""
        if not self.keeps_memories:
            return
        kept = self._agent_memories
        for r, agent in enumerate(info.agents):
            if info.decision_requested[r]:
                kept[agent] = memory_out[r].copy()
            else:
                kept.pop(agent, None)

    def forget(self, agents: Optional[Iterable[Hashable]] = None) -> None:
        """Drop the kept memories of ``agents`` (None: all), whose episodes are gone."""
        if agents is None:
            self._agent_memories.clear()
            return
        for agent in agents:
            self._agent_memories.pop(agent, None)


__all__ = ["ActingInputs", "PPOPolicy", "branch_log_prob", "greedy_branches"]
