"""The step types the environment layer speaks: what a behaviour is, what its agents saw, what they do.

Every protocol maps onto these types, so that nothing above the wire asks which one it speaks:

* ``BehaviorSpec``: a behaviour's sensors (``ObservationSpec``, in the order the environment
  reports them) and its actions (``ActionSpec``: continuous floats, discrete branches, or both);
* ``DecisionSteps``: the agents of one behaviour that ask for a decision, one ``[n_agents, *shape]``
  array per sensor in ``obs``;
* ``TerminalSteps``: the agents whose episode ended since the last step, with the last
  observation of that episode, and whether it was interrupted (a max step) rather than ended by
  the task;
* ``ActionTuple``: what the deciding agents do, ``[n_agents, continuous_size]`` floats and
  ``[n_agents, len(discrete_branches)]`` branch indices, in ``DecisionSteps`` order.

An agent that ends its episode and asks for its next decision in the same step is in both: the
terminal step holds the last reward of the ended episode, the decision step the first
observation of the next one and the reward since it began.

API-2 (Unity builds of 2018) maps onto the same types as one vector sensor (its state, after its
cameras in ``obs``). Its agents report every step, a done agent with the first observation of its
next episode; so every agent is a decision step, and a done one is a terminal step too, whose
``obs`` are those same observations (API-2 sends no last observation:
``reports_last_observation`` is False) and whose reward is the step's reward (the decision step's
is 0). API-2 also carries two fields the modern protocol does not: ``memory``, the rows the
environment keeps and sends back for recurrent brains, and ``previous_action``, the action each
agent executed (for the modern protocol, the last action sent to it).

Rewards are float64, so that API-2's JSON numbers pass as they were sent; observations float32.
Building a batch is a handful of array operations; only ``agent_id_to_index`` and ``merge`` touch
agents one by one, and the latter only to key them by environment.
"""
from __future__ import annotations

import abc
import dataclasses
import enum
from typing import Any, Dict, Hashable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from unityagents.exception import UnityActionException


class DimensionProperty(enum.IntFlag):
    """How a sensor's dimension may be treated (Unity's ``DimensionProperty``)."""

    UNSPECIFIED = 0
    NONE = 1
    TRANSLATIONAL_EQUIVARIANCE = 2
    VARIABLE_SIZE = 4


class ObservationType(enum.IntEnum):
    """What a sensor observes (Unity's ``ObservationType``)."""

    DEFAULT = 0
    GOAL_SIGNAL = 1


@dataclasses.dataclass(frozen=True)
class ObservationSpec:
    """One sensor of a behaviour.

    :param shape: one agent's observation, the trailing shape of its ``obs`` array: ``(n,)`` for a
        vector, ``(N_max, F)`` for a variable-length sensor, and for a camera ``(C, H, W)`` through
        the low-level API (``UnityEnvironment.behavior_specs``/``get_steps``, as mlagents_envs) but
        ``(H, W, C)`` in the steps the environment set, the bridges and the trainers read
        (``reset_behaviors``/``step_behaviors``), whatever the wire layout.
    :param dimension_property: one ``DimensionProperty`` per dimension.
    :param observation_type: an ``ObservationType``.
    :param name: the sensor's name (Unity's ``ISensor.GetName()``; made up for API-2).
    """

    shape: Tuple[int, ...]
    dimension_property: Tuple[DimensionProperty, ...] = ()
    observation_type: ObservationType = ObservationType.DEFAULT
    name: str = ""

    @property
    def variable_length(self) -> bool:
        """A sensor whose first dimension varies (a BufferSensor): rows of zeros pad it to ``N_max``."""
        return bool(self.dimension_property) and bool(self.dimension_property[0] & DimensionProperty.VARIABLE_SIZE)

    @property
    def is_visual(self) -> bool:
        return len(self.shape) == 3


def _within_branches(rows: List[List[int]], branches: Tuple[int, ...]) -> bool:
    """Whether every row's index on each branch is one of that branch's actions."""
    return all(0 <= index < size for row in rows for index, size in zip(row, branches))


@dataclasses.dataclass(frozen=True)
class ActionSpec:
    """A behaviour's actions: ``continuous_size`` floats and one index per discrete branch (both: hybrid)."""

    continuous_size: int
    discrete_branches: Tuple[int, ...] = ()

    @property
    def discrete_size(self) -> int:
        return len(self.discrete_branches)

    def is_continuous(self) -> bool:
        return self.continuous_size > 0 and not self.discrete_branches

    def is_discrete(self) -> bool:
        return self.continuous_size == 0 and bool(self.discrete_branches)

    def is_hybrid(self) -> bool:
        return self.continuous_size > 0 and bool(self.discrete_branches)

    def empty_action(self, n_agents: int) -> "ActionTuple":
        """Zeros for ``n_agents``: every float 0, every branch its first action."""
        return ActionTuple(np.zeros((n_agents, self.continuous_size), np.float32),
                           np.zeros((n_agents, self.discrete_size), np.int32))

    def random_action(self, n_agents: int, rng: Optional[np.random.Generator] = None) -> "ActionTuple":
        """Uniform actions for ``n_agents``: floats in [-1, 1), each branch any of its actions."""
        rng = rng if rng is not None else np.random.default_rng()
        continuous = rng.uniform(-1.0, 1.0, (n_agents, self.continuous_size)).astype(np.float32)
        discrete = np.column_stack([rng.integers(0, b, n_agents) for b in self.discrete_branches]).astype(np.int32) \
            if self.discrete_branches else np.zeros((n_agents, 0), np.int32)
        return ActionTuple(continuous, discrete)

    @staticmethod
    def create_continuous(continuous_size: int) -> "ActionSpec":
        return ActionSpec(int(continuous_size), ())

    @staticmethod
    def create_discrete(discrete_branches: Sequence[int]) -> "ActionSpec":
        return ActionSpec(0, tuple(int(b) for b in discrete_branches))

    @staticmethod
    def create_hybrid(continuous_size: int, discrete_branches: Sequence[int]) -> "ActionSpec":
        return ActionSpec(int(continuous_size), tuple(int(b) for b in discrete_branches))

    def tuple_of(self, rows: Any) -> "ActionTuple":
        """``[n, continuous_size + discrete_size]`` rows (the continuous values, then one index per
        branch: the layout of a trainer's action rows and of API-2's messages) as an ``ActionTuple``."""
        array = np.asarray(rows)
        width = self.continuous_size + self.discrete_size
        if array.ndim != 2 or array.shape[1] != width:
            array = array.reshape(-1, width) if width and array.size % width == 0 else array
        if array.ndim != 2 or array.shape[1] != width:
            raise UnityActionException(
                f"Actions of shape {np.shape(rows)} do not fit the action spec ({self}): expected rows of {width} "
                f"values ({self.continuous_size} continuous, then one index per branch "
                f"{list(self.discrete_branches)}). "
                "Give one row per deciding agent.")
        c = self.continuous_size
        return ActionTuple(array[:, :c], array[:, c:])

    def validate(self, actions: "ActionTuple", n_agents: int, name: str) -> "ActionTuple":
        """``actions`` checked against this spec for ``n_agents`` deciding agents of behaviour ``name``.

        Shapes, finiteness and branch ranges; the error names the part, what this spec expects,
        what arrived and how to build the right one.
        """
        if not isinstance(actions, ActionTuple):
            raise UnityActionException(
                f"Behaviour {name!r}: the actions must be an ActionTuple(continuous, discrete); got "
                f"{type(actions).__name__}. Build one with ActionTuple(continuous=[n, {self.continuous_size}] floats, "
                f"discrete=[n, {self.discrete_size}] ints).")
        for part, array, width in (("continuous", actions.continuous, self.continuous_size),
                                   ("discrete", actions.discrete, self.discrete_size)):
            if array.shape != (n_agents, width):
                raise UnityActionException(
                    f"Behaviour {name!r}: the {part} actions have shape {array.shape}; its action spec "
                    f"({self}) expects ({n_agents}, {width}): one row per agent of its last DecisionSteps "
                    f"({n_agents} agents), {width} {part} value(s) each. Give one row per deciding agent.")
        if actions.continuous.size and not np.all(np.isfinite(actions.continuous)):
            raise UnityActionException(
                f"Behaviour {name!r}: the continuous actions contain NaN or infinity "
                f"({actions.continuous[~np.isfinite(actions.continuous)][:4]}); expected finite floats. "
                "Check the policy that produced them.")
        # A few agents' branch indices are checked in Python (numpy's fixed cost per call is larger);
        # many agents', or a wrong one (for the error's row and branch), with numpy.
        if self.discrete_branches and n_agents and (
                actions.discrete.size > 16 or not _within_branches(actions.discrete.tolist(), self.discrete_branches)):
            wrong = (actions.discrete < 0) | (actions.discrete >= np.asarray(self.discrete_branches))
            if wrong.any():
                i, k = map(int, np.argwhere(wrong)[0])
                raise UnityActionException(
                    f"Behaviour {name!r}: row {i} chose {int(actions.discrete[i, k])} on discrete branch {k}, which "
                    f"has {self.discrete_branches[k]} actions: expected an integer in "
                    f"0..{self.discrete_branches[k] - 1}.")
        return actions

    def __str__(self) -> str:
        return f"continuous {self.continuous_size}, discrete branches {list(self.discrete_branches)}"


class BehaviorSpec(NamedTuple):
    """A behaviour's sensors (in ``obs`` order) and actions."""

    observation_specs: List[ObservationSpec]
    action_spec: ActionSpec


class ActionTuple:
    """The actions of the deciding agents of one behaviour, in ``DecisionSteps`` order.

    :param continuous: ``[n_agents, continuous_size]``, kept as float32.
    :param discrete: ``[n_agents, len(discrete_branches)]`` branch indices, kept as int32; a float
        that is not a whole number is refused rather than rounded.
    Either may be omitted for a behaviour without that part (it then has the other's rows and no columns).
    """

    __slots__ = ("continuous", "discrete")

    def __init__(self, continuous: Any = None, discrete: Any = None):
        c = None if continuous is None else _as_rows(continuous, np.float32, "continuous")
        d = None
        if discrete is not None:
            raw = np.asarray(discrete)
            if raw.dtype.kind == "f":
                if not np.all(np.isfinite(raw)) or np.any(raw != np.floor(raw)):
                    bad = raw[~np.isfinite(raw) | (raw != np.floor(raw))][:4]
                    raise UnityActionException(
                        f"The discrete actions must be whole branch indices; got {bad} among them. Pass one "
                        "integer index per branch (e.g. np.argmax of the branch's logits).")
            elif raw.dtype.kind not in "iub":
                raise UnityActionException(
                    f"The discrete actions must be integers; got an array of dtype {raw.dtype}. Pass one "
                    "integer index per branch.")
            d = _as_rows(raw, np.int32, "discrete")
        n = c.shape[0] if c is not None else (d.shape[0] if d is not None else 0)
        if c is not None and d is not None and c.shape[0] != d.shape[0]:
            raise UnityActionException(
                f"An ActionTuple's parts must have one row per agent each; got {c.shape[0]} continuous rows and "
                f"{d.shape[0]} discrete rows. Give both parts the same agents, in DecisionSteps order.")
        self.continuous = c if c is not None else np.zeros((n, 0), np.float32)
        self.discrete = d if d is not None else np.zeros((n, 0), np.int32)

    def __len__(self) -> int:
        return self.continuous.shape[0]

    @property
    def discrete_dtype(self) -> np.dtype:
        """The dtype of the discrete part (int32, as the wire carries it)."""
        return np.dtype(np.int32)

    def add_continuous(self, continuous: Any) -> None:
        """Set the continuous part (the discrete part keeps its rows, or becomes ``[n, 0]``)."""
        c = _as_rows(continuous, np.float32, "continuous")
        self.continuous = c
        if self.discrete.size == 0 and self.discrete.shape[0] != c.shape[0]:
            self.discrete = np.zeros((c.shape[0], 0), np.int32)

    def add_discrete(self, discrete: Any) -> None:
        """Set the discrete part (the continuous part keeps its rows, or becomes ``[n, 0]``)."""
        d = ActionTuple(discrete=discrete).discrete
        self.discrete = d
        if self.continuous.size == 0 and self.continuous.shape[0] != d.shape[0]:
            self.continuous = np.zeros((d.shape[0], 0), np.float32)

    def rows(self, start: int, stop: int) -> "ActionTuple":
        """Agents ``start:stop`` (one environment's share of a merged batch)."""
        return ActionTuple(self.continuous[start:stop], self.discrete[start:stop])

    def __repr__(self) -> str:
        return f"ActionTuple(continuous={self.continuous.shape}, discrete={self.discrete.shape})"


def _as_rows(x: Any, dtype: Any, part: str) -> np.ndarray:
    array = np.asarray(x, dtype=dtype)
    if array.ndim == 1:
        array = array[:, None] if array.size else array.reshape(0, 0)
    if array.ndim != 2:
        raise UnityActionException(
            f"The {part} actions must be a [n_agents, width] array; got shape {array.shape}. Stack one row per "
            "deciding agent.")
    return array


class DecisionStep(NamedTuple):
    """One deciding agent's row of a ``DecisionSteps`` (``steps[agent_id]``)."""

    obs: List[np.ndarray]
    reward: float
    agent_id: Hashable
    action_mask: Optional[List[np.ndarray]]
    group_id: int
    group_reward: float


class TerminalStep(NamedTuple):
    """One ended agent's row of a ``TerminalSteps`` (``steps[agent_id]``)."""

    obs: List[np.ndarray]
    reward: float
    interrupted: bool
    agent_id: Hashable
    group_id: int
    group_reward: float


def _row_of(steps: Any, agent_id: Hashable) -> int:
    row = steps.agent_id_to_index.get(agent_id)
    if row is None:
        raise KeyError(f"agent_id {agent_id!r} is not present in the {type(steps).__name__}; its agents are "
                       f"{list(steps.agent_id_to_index)[:20]}.")
    return row


@dataclasses.dataclass(frozen=True, eq=False)  # arrays have no single truth value: compare fields
class DecisionSteps:
    """The agents of one behaviour that ask for a decision at this step (see the module docstring).

    :param obs: one ``[n, *shape]`` float32 array per sensor, in the behaviour's sensor order.
    :param reward: ``[n]`` float64, the reward since the agent's last decision.
    :param agent_id: ``[n]`` agent ids (int), or ``(environment, agent id)`` keys after ``merge``.
    :param action_mask: one ``[n, branch size]`` bool array per discrete branch, True = not
        available; None where the environment sends no masks.
    :param group_id: ``[n]`` int, the agent's multi-agent group (0: none).
    :param group_reward: ``[n]`` float64, the reward of the agent's group.
    :param memory: ``[n, memorySize]`` what the environment kept as each agent's memory (API-2), or None.
    :param previous_action: ``[n, action width]`` each agent's previous action as the wire knows it, or None.
    """

    obs: List[np.ndarray]
    reward: np.ndarray
    agent_id: np.ndarray
    action_mask: Optional[List[np.ndarray]] = None
    group_id: Optional[np.ndarray] = None
    group_reward: Optional[np.ndarray] = None
    memory: Optional[np.ndarray] = None
    previous_action: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        n = len(self.agent_id)
        if self.group_id is None:
            object.__setattr__(self, "group_id", np.zeros(n, np.int32))
        if self.group_reward is None:
            object.__setattr__(self, "group_reward", np.zeros(n, np.float64))

    def __len__(self) -> int:
        return len(self.agent_id)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.agent_id.tolist())

    @property
    def agent_id_to_index(self) -> Dict[Hashable, int]:
        """Agent id -> its row (built once per batch)."""
        cached = self.__dict__.get("_index")
        if cached is None:
            cached = {a: i for i, a in enumerate(self.agent_id.tolist())}
            object.__setattr__(self, "_index", cached)
        return cached

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self.agent_id_to_index

    def __getitem__(self, agent_id: Hashable) -> DecisionStep:
        """The row of ``agent_id`` (a ``KeyError`` naming the agents when it is not among them)."""
        i = _row_of(self, agent_id)
        mask = None if self.action_mask is None else [m[i] for m in self.action_mask]
        return DecisionStep([o[i] for o in self.obs], self.reward[i], self.agent_id[i], mask, self.group_id[i],
                            self.group_reward[i])

    @staticmethod
    def empty(spec: BehaviorSpec) -> "DecisionSteps":
        """No agents, shaped like the behaviour's (an environment that is down, a behaviour gone quiet)."""
        masks = [np.zeros((0, b), bool) for b in spec.action_spec.discrete_branches] or None
        return DecisionSteps([np.zeros((0,) + tuple(o.shape), np.float32) for o in spec.observation_specs],
                             np.zeros(0, np.float64), np.zeros(0, np.int32), masks)

    @classmethod
    def merge(cls, parts: Sequence[Tuple[Hashable, "DecisionSteps"]]) -> "DecisionSteps":
        """One batch over the agents of several environments, in the order given; agent ``a`` of
        environment ``e`` becomes ``(e, a)``, since agent ids are unique only within one environment."""
        return cls(**_merged_fields(cls, parts))


@dataclasses.dataclass(frozen=True, eq=False)
class TerminalSteps:
    """The agents of one behaviour whose episode ended since the last step (see the module docstring).

    :param obs: one ``[n, *shape]`` array per sensor: the episode's last observation.
    :param reward: ``[n]`` float64, the episode's last reward.
    :param interrupted: ``[n]`` bool: cut by a max step (a trainer bootstraps its value), not ended by the task.
    :param agent_id: as ``DecisionSteps.agent_id``. :param group_id: :param group_reward: likewise.
    :param previous_action: as ``DecisionSteps.previous_action``.
    """

    obs: List[np.ndarray]
    reward: np.ndarray
    interrupted: np.ndarray
    agent_id: np.ndarray
    group_id: Optional[np.ndarray] = None
    group_reward: Optional[np.ndarray] = None
    previous_action: Optional[np.ndarray] = None

    __post_init__ = DecisionSteps.__post_init__
    __len__ = DecisionSteps.__len__
    __iter__ = DecisionSteps.__iter__
    agent_id_to_index = DecisionSteps.agent_id_to_index
    __contains__ = DecisionSteps.__contains__

    def __getitem__(self, agent_id: Hashable) -> TerminalStep:
        """The row of ``agent_id`` (a ``KeyError`` naming the agents when it is not among them)."""
        i = _row_of(self, agent_id)
        return TerminalStep([o[i] for o in self.obs], self.reward[i], bool(self.interrupted[i]), self.agent_id[i],
                            self.group_id[i], self.group_reward[i])

    @staticmethod
    def empty(spec: BehaviorSpec) -> "TerminalSteps":
        return TerminalSteps([np.zeros((0,) + tuple(o.shape), np.float32) for o in spec.observation_specs],
                             np.zeros(0, np.float64), np.zeros(0, bool), np.zeros(0, np.int32))

    @classmethod
    def merge(cls, parts: Sequence[Tuple[Hashable, "TerminalSteps"]]) -> "TerminalSteps":
        """As ``DecisionSteps.merge``."""
        return cls(**_merged_fields(cls, parts))


#: What a behaviour reports at one step: its deciding agents and its agents whose episode ended.
BehaviorSteps = Tuple[DecisionSteps, TerminalSteps]


def merge_steps(parts: Sequence[Tuple[Hashable, BehaviorSteps]]) -> BehaviorSteps:
    """``(DecisionSteps.merge, TerminalSteps.merge)`` of ``(environment, (decisions, terminals))`` pairs."""
    return (DecisionSteps.merge([(e, s[0]) for e, s in parts]), TerminalSteps.merge([(e, s[1]) for e, s in parts]))


def _keys(environment: Hashable, ids: np.ndarray) -> np.ndarray:
    keys = np.empty(len(ids), dtype=object)
    for i, a in enumerate(ids.tolist()):  # tuples cannot be assigned as a slice (numpy unpacks them)
        keys[i] = (environment, a)
    return keys


#: Each step type's field names, read once (``dataclasses.fields`` costs more than the merge of one batch).
_FIELD_NAMES: Dict[type, Tuple[str, ...]] = {}


def _merged_fields(cls: type, parts: Sequence[Tuple[Hashable, Any]]) -> Dict[str, Any]:
    if not parts:
        raise ValueError(f"{cls.__name__}.merge needs at least one (environment, steps) pair.")
    full = [(e, s) for e, s in parts if len(s)] or [parts[0]]
    if len(full) == 1:  # one environment with agents (always so for N = 1): only the ids change
        environment, steps = full[0]
        names = _FIELD_NAMES.get(cls) or _FIELD_NAMES.setdefault(cls, tuple(f.name for f in dataclasses.fields(cls)))
        fields = {name: getattr(steps, name) for name in names}
        fields["agent_id"] = _keys(environment, steps.agent_id)
        fields["obs"] = list(steps.obs)
        if fields.get("action_mask") is not None:
            fields["action_mask"] = list(steps.action_mask)
        return fields
    batches = [s for _, s in full]
    first = batches[0]

    def cat(arrays: List[np.ndarray]) -> np.ndarray:
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=0)

    fields: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        value = getattr(first, f.name)
        if f.name == "agent_id":
            fields[f.name] = cat([_keys(e, s.agent_id) for e, s in full])
        elif f.name == "obs":
            fields[f.name] = [cat([s.obs[k] for s in batches]) for k in range(len(first.obs))]
        elif f.name == "action_mask":
            fields[f.name] = None if value is None else [cat([s.action_mask[k] for s in batches])
                                                         for k in range(len(value))]
        else:
            fields[f.name] = None if value is None else cat([np.asarray(getattr(s, f.name)) for s in batches])
    return fields


def behavior_specs_of(brains: Mapping[str, Any]) -> Dict[str, BehaviorSpec]:
    """The ``BehaviorSpec`` of each brain (``BrainParameters``), by name."""
    return {name: brain.behavior_spec for name, brain in brains.items()}


#: mlagents_envs' aliases, for scripts that annotate with them.
AgentId = int
GroupId = int
BehaviorName = str


class BehaviorMapping(Mapping):
    """The behaviours' specs by name, read-only (what ``BaseEnv.behavior_specs`` returns).

    A view of the dict it is given: a behaviour that the environment adds later shows up here too.
    """

    def __init__(self, specs: Dict[BehaviorName, BehaviorSpec]):
        self._dict = specs

    def __len__(self) -> int:
        return len(self._dict)

    def __getitem__(self, behavior: BehaviorName) -> BehaviorSpec:
        return self._dict[behavior]

    def __iter__(self) -> Iterator[BehaviorName]:
        return iter(self._dict)

    def __repr__(self) -> str:
        return f"BehaviorMapping({self._dict!r})"


class BaseEnv(abc.ABC):
    """What an environment offers a script through the low-level API (mlagents_envs' ``BaseEnv``).

    ``UnityEnvironment`` implements it; a script typed against it runs on any implementation.
    """

    @abc.abstractmethod
    def step(self) -> Any:
        """Send the actions set since the last step (zeros for the others); simulate to the next decisions."""

    @abc.abstractmethod
    def reset(self) -> Any:
        """Start new episodes; the next ``get_steps`` holds their first observations."""

    @abc.abstractmethod
    def close(self) -> None:
        """End the environment and release its port."""

    @property
    @abc.abstractmethod
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        """Each behaviour's ``BehaviorSpec``, by name."""

    @abc.abstractmethod
    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        """The actions of every deciding agent of ``behavior_name`` for the next ``step()``."""

    @abc.abstractmethod
    def set_action_for_agent(self, behavior_name: str, agent_id: Hashable, action: ActionTuple) -> None:
        """The action of one deciding agent for the next ``step()``."""

    @abc.abstractmethod
    def get_steps(self, behavior_name: str) -> BehaviorSteps:
        """``(DecisionSteps, TerminalSteps)`` of ``behavior_name`` at the last reset or step."""


__all__ = ["ActionSpec", "ActionTuple", "AgentId", "BaseEnv", "BehaviorMapping", "BehaviorName", "BehaviorSpec",
           "BehaviorSteps",
           "DecisionStep", "DecisionSteps", "DimensionProperty", "GroupId", "ObservationSpec", "ObservationType",
           "TerminalStep", "TerminalSteps", "behavior_specs_of", "merge_steps"]
