"""The sweep file: what to vary, what to maximise, how much to spend, and which scheduler decides.

```yaml
search:                       # dotted key paths into the run config -> one distribution each
  behaviors.3DBall.hyperparameters.learning_rate: {loguniform: [1.0e-5, 1.0e-3]}
  behaviors.3DBall.hyperparameters.batch_size: {choice: [64, 128, 256]}
objective: {tag: "Environment/Cumulative Reward", mode: max, last: 3}
budget: {trials: 12, max_steps: 150000, concurrent: 2}
scheduler: {name: tpe, early_stopping: asha, grace_steps: 20000}
```

Everything here is checked before a trial starts (``Sweep.check``): each key path against the run
config as ``unityagents-learn`` resolves it, each distribution's bounds, each PBT mutation against
the keys a resumed run may change, the objective against the tags the trainers write, and the
config at every distribution's extremes through ``unityagents-learn``'s own checks. Nothing in this
module imports Ray; TensorFlow is imported only by ``check`` (through the run config's checks).
"""
from __future__ import annotations

import copy
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import yaml


class SweepError(ValueError):
    """The sweep file, or the sweep against its run config, is wrong; the message says what to change."""


#: The kinds of distribution, with what their two-element lists mean.
DISTRIBUTIONS = ("loguniform", "uniform", "randint", "choice")
SCHEDULERS = ("random", "tpe", "asha", "median", "pbt")
EARLY_STOPPING = ("none", "asha", "median")

#: Key paths (below ``behaviors.<name>.`` or ``default_settings.``) that a run resumed from a checkpoint
#: takes from its new config: the optimiser's and the loss's coefficients and the reward signals'
#: discount and weight. Everything else either shapes the graph (network size), the buffers (batch,
#: buffer, horizon) or the schedule's bookkeeping, so population-based training may not change it mid-run.
MUTABLE = (
    re.compile(r"hyperparameters\.(learning_rate|beta|epsilon|lambd|num_epoch|tau|init_entcoef|steps_per_update)$"),
    re.compile(r"reward_signals\.[^.]+\.(gamma|strength)$"),
)

#: The TensorBoard tags the trainers write (trainers/trainer/summaries.py and the trainers), besides
#: ``Policy/<Signal> Reward`` for each reward signal of the config and ``Environment/Lesson Number/<p>``.
TRAINER_TAGS = (
    "Environment/Agent Steps Per Second", "Policy/Extrinsic Reward", "Self-play/ELO", "Self-play/snapshots",
    "Environment/Group Cumulative Reward", "Policy/Extrinsic Value", "Policy/Extrinsic Baseline Estimate",
    "Losses/Baseline Loss", "Losses/Entropy Coeff Loss", "Policy/Continuous Entropy Coeff",
    "Policy/Discrete Entropy Coeff", "Losses/Curiosity Forward Loss", "Losses/Curiosity Inverse Loss",
    "Losses/GAIL Loss", "Policy/GAIL Expert Estimate", "Policy/GAIL Policy Estimate", "Losses/RND Loss",
)


@dataclass
class Distribution:
    """One key's distribution: ``kind`` (``DISTRIBUTIONS``) and its ``args``."""

    key: str
    kind: str
    args: List[Any]

    @classmethod
    def parse(cls, key: str, spec: Any) -> "Distribution":
        where = f"search.{key}"
        if not isinstance(spec, Mapping) or len(spec) != 1:
            raise SweepError(f"{where}: expected one distribution such as {{loguniform: [1.0e-5, 1.0e-3]}} "
                             f"(one of {', '.join(DISTRIBUTIONS)}), got {spec!r}.")
        (kind, args), = spec.items()
        if kind not in DISTRIBUTIONS:
            raise SweepError(f"{where}: {kind!r} is no distribution; use one of {', '.join(DISTRIBUTIONS)}.")
        if kind == "choice":
            if not isinstance(args, list) or not args:
                raise SweepError(f"{where}: choice: expected a non-empty list of values, got {args!r}.")
            return cls(key, kind, list(args))
        if not isinstance(args, list) or len(args) != 2 or not all(
                isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
            raise SweepError(f"{where}: {kind}: expected [low, high] (two numbers), got {args!r}.")
        low, high = args
        if kind == "randint" and not all(float(a).is_integer() for a in args):
            raise SweepError(f"{where}: randint: expected two integers [low, high], got {args!r}.")
        if not low < high:
            raise SweepError(f"{where}: {kind}: the bounds are inverted or equal (low {low} >= high {high}); "
                             "write [low, high] with low < high.")
        if kind == "loguniform" and low <= 0:
            raise SweepError(f"{where}: loguniform: the low bound must be above 0, got {low}; use uniform for "
                             "a range that reaches 0.")
        if kind == "randint":
            return cls(key, kind, [int(low), int(high)])
        return cls(key, kind, [float(low), float(high)])

    def sample(self, rng: random.Random) -> Any:
        low, high = (self.args + [None, None])[:2]
        if self.kind == "choice":
            return rng.choice(self.args)
        if self.kind == "randint":
            return rng.randint(low, high)
        if self.kind == "uniform":
            return rng.uniform(low, high)
        return math.exp(rng.uniform(math.log(low), math.log(high)))

    def extremes(self) -> List[Any]:
        """The values whose configs are checked before any trial starts."""
        return list(self.args)

    def to_ray(self):
        """The same distribution as a Ray Tune search-space domain (``randint``'s high is inclusive here)."""
        from ray import tune

        if self.kind == "choice":
            return tune.choice(self.args)
        if self.kind == "randint":
            return tune.randint(self.args[0], self.args[1] + 1)
        if self.kind == "uniform":
            return tune.uniform(*self.args)
        return tune.loguniform(*self.args)


@dataclass
class Objective:
    tag: str = "Environment/Cumulative Reward"
    mode: str = "max"
    last: int = 3
    #: A stat the scene itself sends (a custom stat): it cannot be checked against the trainers' tags.
    custom: bool = False


@dataclass
class Budget:
    trials: int = 8
    max_steps: Optional[int] = None
    concurrent: int = 1


@dataclass
class Scheduler:
    name: str = "random"
    early_stopping: str = "none"
    #: Agent-steps a trial runs before early stopping or PBT may act on it.
    grace_steps: Optional[int] = None
    reduction_factor: float = 3.0
    perturbation_interval: Optional[int] = None
    mutate: Optional[List[str]] = None
    quantile_fraction: float = 0.25
    resample_probability: float = 0.25
    #: ``search`` (each member draws its values from the search space) or ``config`` (every member starts
    #: from the run config's values; the search space bounds the mutations only): PBT only.
    start: str = "search"


@dataclass
class Sweep:
    path: str
    search: Dict[str, Distribution]
    objective: Objective = field(default_factory=Objective)
    budget: Budget = field(default_factory=Budget)
    scheduler: Scheduler = field(default_factory=Scheduler)
    seed: Optional[int] = None

    @property
    def mutated(self) -> List[str]:
        """The keys population-based training perturbs (all searched keys unless ``mutate`` names some)."""
        if self.scheduler.name != "pbt":
            return []
        return list(self.scheduler.mutate) if self.scheduler.mutate is not None else list(self.search)

    def sample(self, rng: random.Random, config: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """One trial's values; with ``start: config`` the mutated keys keep ``config``'s values."""
        values = {key: d.sample(rng) for key, d in self.search.items()}
        if self.scheduler.start == "config" and config is not None:
            values.update({key: lookup(config, key, self.path) for key in self.mutated})
        return values

    def check(self, raw_config: Mapping[str, Any], resolved: Mapping[str, Any], load=None) -> None:
        """Refuse what would fail or mean nothing once trials run; ``resolved`` is the run config as
        ``unityagents-learn`` resolves it (defaults filled in); ``load(raw)`` runs its checks on a config."""
        for key in self.search:
            lookup(resolved, key, self.path)
        if self.scheduler.name == "pbt":
            for key in self.mutated:
                if key not in self.search:
                    raise SweepError(f"{self.path}: scheduler.mutate: {key} is not under search:, so there is no "
                                     "range to perturb it in. Add it to search:, or drop it from mutate:.")
                if not mid_run_changeable(key):
                    raise SweepError(
                        f"{self.path}: scheduler.mutate: {key} cannot change in the middle of a run (population-"
                        "based training restarts a member from another's checkpoint, and the network's shape and "
                        "the buffers' sizes are fixed by it). Mutate only learning_rate, beta, epsilon, lambd, "
                        "num_epoch or a reward signal's gamma/strength; list the others in scheduler.mutate "
                        "without this key to draw it once per member.")
        check_objective(self.objective, resolved, self.path)
        if self.budget.max_steps is None:
            steps = [b.get("max_steps") for b in (resolved.get("behaviors") or {}).values()]
            if not steps:
                raise SweepError(f"{self.path}: budget.max_steps: missing, and the run config lists no behaviour "
                                 "with a max_steps. Give budget.max_steps (agent-steps per trial).")
        if load is not None:
            for key, dist in self.search.items():
                for value in dist.extremes():
                    values = {k: (value if k == key else d.extremes()[0]) for k, d in self.search.items()}
                    try:
                        load(apply(raw_config, values, self.budget.max_steps))
                    except Exception as e:  # the run config's own refusal, named by the sweep key
                        raise SweepError(f"{self.path}: search.{key}: the run config refuses the value {value!r}: "
                                         f"{e}") from None


def lookup(config: Mapping[str, Any], key: str, where: str = "sweep") -> Any:
    """The value at a dotted key path of ``config``; a ``SweepError`` naming the keys there if it is not."""
    node: Any = config
    done: List[str] = []
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            there = ", ".join(sorted(map(str, node))) if isinstance(node, Mapping) else f"a {type(node).__name__}"
            prefix = ".".join(done) or "the top"
            raise SweepError(f"{where}: search.{key}: the run config has no {part!r} under {prefix} (it has: "
                             f"{there}). Write a key path that exists in the run config.")
        node = node[part]
        done.append(part)
    if isinstance(node, Mapping):
        raise SweepError(f"{where}: search.{key}: names a whole section ({', '.join(map(str, node))}), not one "
                         "value. Name one key inside it.")
    return node


def mid_run_changeable(key: str) -> bool:
    parts = key.split(".")
    if parts[0] == "behaviors" and len(parts) > 2:
        rest = ".".join(parts[2:])
    elif parts[0] == "default_settings":
        rest = ".".join(parts[1:])
    else:
        return False
    return any(p.match(rest) for p in MUTABLE)


def trainer_tags(resolved: Mapping[str, Any]) -> List[str]:
    """Every tag a trial of this config may write (the objective must be one of them)."""
    from trainers.reward_signals import SIGNAL_TITLES
    from trainers.trainer.summaries import SUMMARY_TAGS

    tags = set(SUMMARY_TAGS.values()) | set(TRAINER_TAGS)
    blocks = list((resolved.get("behaviors") or {}).values()) + [resolved.get("default_settings") or {}]
    for block in blocks:
        for signal in (block.get("reward_signals") or {}):
            tags.add(f"Policy/{SIGNAL_TITLES.get(signal, signal.title())} Reward")
    for name in (resolved.get("environment_parameters") or {}):
        tags.add(f"Environment/Lesson Number/{name}")
    return sorted(tags)


def check_objective(objective: Objective, resolved: Mapping[str, Any], where: str) -> None:
    if objective.custom:
        return
    tags = trainer_tags(resolved)
    if objective.tag not in tags:
        raise SweepError(f"{where}: objective.tag: no trial writes {objective.tag!r}. The trainers write: "
                         f"{', '.join(tags)}. For a stat the scene sends itself, add custom: true.")
    if objective.tag.startswith("Self-play/"):
        blocks = list((resolved.get("behaviors") or {}).values())
        if not any(b.get("self_play") for b in blocks):
            raise SweepError(f"{where}: objective.tag: {objective.tag} is written only by self-play behaviours, "
                             "and no behaviour of the run config has self_play:. Pick another tag.")


def apply(raw_config: Mapping[str, Any], values: Mapping[str, Any], max_steps: Optional[int]) -> Dict[str, Any]:
    """A copy of the user's run config with each dotted key set to its value (sections created as needed),
    and every behaviour's ``max_steps`` set to the budget's."""
    config = copy.deepcopy(dict(raw_config))
    for key, value in values.items():
        node = config
        parts = key.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = value.item() if hasattr(value, "item") else value
    if max_steps is not None:
        for block in (config.get("behaviors") or {}).values():
            if isinstance(block, dict):
                block["max_steps"] = int(max_steps)
        if isinstance(config.get("default_settings"), dict):
            config["default_settings"]["max_steps"] = int(max_steps)
    return config


def _section(raw: Mapping[str, Any], name: str, cls, where: str, fields: Mapping[str, type]):
    block = raw.get(name)
    if block is None:
        return cls()
    if not isinstance(block, Mapping):
        raise SweepError(f"{where}: {name}: expected a mapping, got {block!r}.")
    unknown = set(block) - set(fields)
    if unknown:
        raise SweepError(f"{where}: {name}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                         f"{name} takes {', '.join(fields)}.")
    values = {}
    for key, kind in fields.items():
        if key not in block or block[key] is None:
            continue
        value = block[key]
        try:
            if kind is int:
                if isinstance(value, bool) or not float(value).is_integer():
                    raise ValueError
                value = int(float(value))
            elif kind is float:
                value = float(value)
            elif kind is bool:
                if not isinstance(value, bool):
                    raise ValueError
            elif kind is list:
                if not isinstance(value, list):
                    raise ValueError
                value = [str(v) for v in value]
            else:
                value = str(value)
        except (TypeError, ValueError):
            raise SweepError(f"{where}: {name}.{key}: expected a {kind.__name__}, got {value!r}.") from None
        values[key] = value
    return cls(**values)


def parse(path: str, raw: Any) -> Sweep:
    """The sweep file's contents, each section's shape and values checked (not yet against a run config)."""
    if not isinstance(raw, Mapping):
        raise SweepError(f"{path}: expected a mapping with search:, objective:, budget:, scheduler:; got "
                         f"{type(raw).__name__}.")
    unknown = set(raw) - {"search", "objective", "budget", "scheduler", "seed"}
    if unknown:
        raise SweepError(f"{path}: unknown section(s) {', '.join(sorted(map(str, unknown)))}; a sweep file has "
                         "search:, objective:, budget:, scheduler: and seed:.")
    search = raw.get("search")
    if not isinstance(search, Mapping) or not search:
        raise SweepError(f"{path}: search: missing or empty; list dotted key paths of the run config with a "
                         "distribution each, e.g. behaviors.3DBall.hyperparameters.learning_rate: "
                         "{loguniform: [1.0e-5, 1.0e-3]}.")
    dists = {str(k): Distribution.parse(str(k), v) for k, v in search.items()}
    objective = _section(raw, "objective", Objective, path, {"tag": str, "mode": str, "last": int, "custom": bool})
    if objective.mode not in ("max", "min"):
        raise SweepError(f"{path}: objective.mode: expected max or min, got {objective.mode!r}.")
    if objective.last < 1:
        raise SweepError(f"{path}: objective.last: expected 1 or more summaries to average, got {objective.last}.")
    budget = _section(raw, "budget", Budget, path, {"trials": int, "max_steps": int, "concurrent": int})
    for key in ("trials", "max_steps", "concurrent"):
        value = getattr(budget, key)
        if value is not None and value < 1:
            raise SweepError(f"{path}: budget.{key}: expected 1 or more, got {value}.")
    scheduler = _section(raw, "scheduler", Scheduler, path, {
        "name": str, "early_stopping": str, "grace_steps": int, "reduction_factor": float,
        "perturbation_interval": int, "mutate": list, "quantile_fraction": float, "resample_probability": float,
        "start": str})
    if scheduler.name not in SCHEDULERS:
        raise SweepError(f"{path}: scheduler.name: {scheduler.name!r} is not one of {', '.join(SCHEDULERS)}.")
    if scheduler.early_stopping not in EARLY_STOPPING:
        raise SweepError(f"{path}: scheduler.early_stopping: {scheduler.early_stopping!r} is not one of "
                         f"{', '.join(EARLY_STOPPING)}.")
    if scheduler.name == "pbt" and scheduler.early_stopping != "none":
        raise SweepError(f"{path}: scheduler.early_stopping: population-based training replaces poor members "
                         "itself; drop early_stopping or pick another scheduler.")
    if scheduler.start not in ("search", "config"):
        raise SweepError(f"{path}: scheduler.start: expected search or config, got {scheduler.start!r}.")
    if scheduler.start == "config" and scheduler.name != "pbt":
        raise SweepError(f"{path}: scheduler.start: config starts every member from the same values, which only "
                         "population-based training then varies; use it with name: pbt.")
    if scheduler.reduction_factor <= 1:
        raise SweepError(f"{path}: scheduler.reduction_factor: expected more than 1, got "
                         f"{scheduler.reduction_factor}.")
    if not 0 < scheduler.quantile_fraction <= 0.5:
        raise SweepError(f"{path}: scheduler.quantile_fraction: expected a fraction in (0, 0.5], got "
                         f"{scheduler.quantile_fraction}.")
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise SweepError(f"{path}: seed: expected an integer, got {seed!r}.")
    return Sweep(path, dists, objective, budget, scheduler, seed)


def read(path: str) -> Sweep:
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
    except FileNotFoundError:
        raise SweepError(f"{path}: the sweep file does not exist. Check the path.") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise SweepError(f"{path}: cannot be read as YAML: {str(e).splitlines()[0]}") from None
    return parse(path, raw)


def stages(sweep: Sweep, max_steps: int) -> Tuple[int, Sequence[int]]:
    """``(grace, perturbation interval)`` in agent-steps, with defaults from the budget."""
    grace = sweep.scheduler.grace_steps or max(max_steps // 9, 1)
    interval = sweep.scheduler.perturbation_interval or max(max_steps // 6, 1)
    return grace, interval
