"""unityagents-tune: search a run config's hyperparameters with Ray Tune; every trial is a unityagents-learn run.

Usage:
  unityagents-tune <run_config> <sweep_file> [options]
  unityagents-tune (-h | --help)

Arguments:
  <run_config>                      A Release 22 run config, as unityagents-learn takes it.
  <sweep_file>                      The sweep: search:, objective:, budget:, scheduler: (docs/tuning.md).

Options:
  -h --help                         Show this message.
  --env=<path>                      A Unity build, or a built-in scene (3DBall, Basic, ...), for every trial.
  --run-id=<id>                     The sweep's folder under --results-dir [default: tune].
  --results-dir=<dir>               Where sweeps are written [default: results].
  --resume                          Continue the sweep --run-id where it stopped (finished trials are kept).
  --force                           Overwrite the sweep --run-id if it exists.
  --num-envs=<n>                    Environments of each trial [default: 1].
  --base-port=<n>                   First port of the sweep; each trial uses a block of its own above it
                                    [default: 6005].
  --seed=<n>                        The sweep's sampling seed and every trial's run seed (overrides the
                                    sweep file's seed:).
  --timeout-wait=<s>                Seconds each trial waits for an environment.
  --torch-device=<device>           Where each trial's graph runs: cpu, cuda or cuda:N.
  --ray-address=<address>           The Ray cluster that runs the trials: local (a private one on this
                                    machine), auto, or host:port [default: local].
  --cpus-per-trial=<n>              CPUs Ray reserves for each trial [default: 1].
  --dry-run                         Check everything, print each trial's resolved run config, start nothing.
  --debug                           Debug logging.

Results: <results-dir>/<run-id>/ (trials.csv, best.yaml, the best trial's .onnx, members.csv, hparams/,
trials/<trial>/ each trial's unityagents-learn results folder, ray/ Ray Tune's state for --resume).
"""
from __future__ import annotations

import glob
import importlib
import logging
import os
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import yaml
from docopt import docopt

from unityagents.distribution import install_hint
from unityagents_tune import outputs
from unityagents_tune.sweep import Sweep, SweepError, apply, lookup, read, stages
from unityagents_tune.trial import TrialContext, trial_name

logger = logging.getLogger("unityagents")

#: Options given to each trial's unityagents-learn as they are.
PASSED = ("--seed", "--timeout-wait", "--torch-device")


@dataclass
class Plan:
    """A checked sweep: everything the trials need, before anything starts."""

    sweep: Sweep
    config_path: str
    raw_config: Dict[str, Any]
    env: str
    run_dir: str
    max_steps: int
    seed: int
    options: Dict[str, Any]
    #: The run config as unityagents-learn resolves it (defaults filled in).
    resolved: Dict[str, Any]
    #: What the checks changed in the run config for the trials, one line each (printed before any trial).
    notes: List[str] = field(default_factory=list)

    @property
    def trials_dir(self) -> str:
        return os.path.join(self.run_dir, "trials")

    def context(self) -> TrialContext:
        args = [f"--env={self.env}"] + [f"{flag}={self.options[flag]}" for flag in PASSED if self.options.get(flag)]
        return TrialContext(trials_dir=self.trials_dir, raw_config=self.raw_config, max_steps=self.max_steps,
                            tag=self.sweep.objective.tag, last=self.sweep.objective.last,
                            base_port=int(self.options["--base-port"]), num_envs=int(self.options["--num-envs"]),
                            learn_args=args)


def _int_option(options: Dict[str, Any], flag: str, low: int = 1) -> int:
    value = options[flag]
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise SweepError(f"{flag}: expected an integer, got {value!r}.") from None
    if number < low:
        raise SweepError(f"{flag}: expected {low} or more, got {number}.")
    return number


def prepare(options: Dict[str, Any]) -> Plan:
    """Read and check the run config and the sweep against each other; refuse before any trial starts."""
    from runner.options import shipped_file
    from runner.settings import release22
    from trainers.trainer.registry import load_registry

    registry = load_registry()
    config_path = shipped_file(options["<run_config>"])
    raw = release22.read_yaml(config_path)
    sweep = read(shipped_file(options["<sweep_file>"]))
    for flag, low in (("--num-envs", 1), ("--base-port", 1), ("--cpus-per-trial", 1)):
        _int_option(options, flag, low)
    env = options["--env"] or ((raw.get("env_settings") or {}).get("env_path"))
    if not env:
        raise SweepError("--env: missing, and the run config has no env_settings.env_path. Pass --env=<build or "
                         "built-in scene> (every trial runs it).")
    if os.path.exists(env):
        env = os.path.abspath(env)
    run, *_ = release22.load(config_path, {"--env": env}, None, registry)

    def load(config: Dict[str, Any]) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "trial.yaml")
            with open(path, "w", encoding="utf-8") as f:
                yaml.safe_dump(config, f)
            release22.load(path, {"--env": env}, None, registry)

    sweep.check(raw, run.as_dict(), load)
    max_steps = sweep.budget.max_steps or max(int(float(b.settings["max_steps"])) for b in run.behaviors.values())
    seed = int(options["--seed"]) if options.get("--seed") else (sweep.seed if sweep.seed is not None else 0)
    run_id = options["--run-id"]
    if not run_id or os.path.isabs(run_id) or ".." in run_id.replace("\\", "/").split("/"):
        raise SweepError(f"--run-id: {run_id!r} must name a folder inside --results-dir (no absolute path, no '..').")
    run_dir = os.path.abspath(os.path.join(options["--results-dir"], run_id))
    if options["--resume"] and options["--force"]:
        raise SweepError("--resume and --force contradict each other: --resume continues the sweep, --force starts "
                         "it over. Pass one of them.")
    if options["--resume"] and not os.path.isdir(os.path.join(run_dir, "ray")):
        raise SweepError(f"--resume: {run_dir} holds no sweep to resume. Check --run-id and --results-dir, or drop "
                         "--resume.")
    if os.path.exists(run_dir) and not options["--resume"] and not options["--force"] and not options["--dry-run"]:
        raise SweepError(f"The sweep {run_dir} already exists. Use another --run-id, --resume to continue it, or "
                         "--force to start it over.")
    if sweep.scheduler.name == "pbt":  # a member copies the newest checkpoint: one per perturbation interval
        raw = with_checkpoint_interval(raw, run.as_dict(), stages(sweep, max_steps)[1])
    raw, notes = with_summaries_inside_the_budget(raw, run.as_dict(), max_steps, sweep)
    return Plan(sweep, config_path, raw, env, run_dir, max_steps, seed, options, run.as_dict(), notes)


def with_summaries_inside_the_budget(raw: Dict[str, Any], resolved: Dict[str, Any], max_steps: int,
                                     sweep: Sweep):
    """``raw`` with every behaviour writing summaries often enough for the objective, and a line per change.

    A trial reports its objective from the summaries its run writes (the mean of the last
    ``objective.last``). A summary period longer than a trial's agent-steps leaves a trial one summary, the
    one every run writes as it ends, and the early-stopping schedulers nothing to compare before then; such a
    period is lowered to ``budget.max_steps / objective.last``. A period the user set within the budget
    is left as it is."""
    if sweep.objective.custom or sweep.search.keys() & {f"behaviors.{n}.summary_freq" for n in
                                                         (resolved.get("behaviors") or {})}:
        return raw, []
    period = max(max_steps // max(sweep.objective.last, 1), 1)
    raw = dict(raw, behaviors={name: dict(block or {}) for name, block in (raw.get("behaviors") or {}).items()})
    notes = []
    blocks = [(f"behaviors.{name}", raw["behaviors"].setdefault(name, {}), settings)
              for name, settings in (resolved.get("behaviors") or {}).items()]
    if isinstance(resolved.get("default_settings"), dict):
        raw["default_settings"] = dict(raw.get("default_settings") or {})
        blocks.append(("default_settings", raw["default_settings"], resolved["default_settings"]))
    for where, block, settings in blocks:
        current = int(float(settings.get("summary_freq") or 0))
        if current > max_steps:
            block["summary_freq"] = period
            notes.append(f"{where}.summary_freq {current} is longer than a trial ({max_steps} agent-steps): its "
                         f"runs would write no summary before they end. Each trial writes one every {period} "
                         f"agent-steps instead (budget.max_steps / objective.last {sweep.objective.last}).")
    return raw, notes


def with_checkpoint_interval(raw: Dict[str, Any], resolved: Dict[str, Any], interval: int) -> Dict[str, Any]:
    """``raw`` with every behaviour checkpointing at least every ``interval`` agent-steps."""
    raw = dict(raw, behaviors={name: dict(block or {}) for name, block in (raw.get("behaviors") or {}).items()})
    for name, block in raw["behaviors"].items():
        current = (resolved.get("behaviors") or {}).get(name, {}).get("checkpoint_interval") or interval
        block["checkpoint_interval"] = int(min(int(current), interval))
    return raw


def dry_run_text(plan: Plan) -> str:
    """Each trial's resolved run config as ``unityagents-learn`` would run it (the first draws of the search)."""
    from runner.settings import release22
    from trainers.trainer.registry import load_registry

    registry, rng = load_registry(), random.Random(plan.seed)
    sweep = plan.sweep
    grace, interval = stages(sweep, plan.max_steps)
    lines = [f"# {sweep.path}: {sweep.budget.trials} trial(s) of {plan.max_steps} agent-steps, scheduler "
             f"{sweep.scheduler.name}"
             + (f", early stopping {sweep.scheduler.early_stopping} after {grace}" if
                sweep.scheduler.early_stopping != "none" else "")
             + (f", perturbing {', '.join(sweep.mutated)} every {interval}" if sweep.scheduler.name == "pbt" else "")
             + f"; objective: {sweep.objective.mode} of {sweep.objective.tag!r} (mean of the last "
               f"{sweep.objective.last} summaries).",
             "# The values are drawn at random from the search space; TPE draws later trials from the results."]
    context = plan.context()
    for index in range(sweep.budget.trials):
        values = sweep.sample(rng, plan.resolved)
        config = apply(plan.raw_config, values, plan.max_steps)
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "trial.yaml")
            with open(path, "w", encoding="utf-8") as f:
                yaml.safe_dump(config, f)
            run, _, params, _, _ = release22.load(path, {"--env": plan.env}, None, registry)
        name = trial_name(index)
        port = context.base_port + index * 4 * context.num_envs
        lines.append(f"--- # {name}: {', '.join(f'{k}={v!r}' for k, v in values.items())}; results "
                     f"{os.path.join(plan.trials_dir, name)}, ports from {port}")
        lines.append(release22.resolved_yaml(run, params).rstrip("\n"))
    return "\n".join(lines) + "\n"


class TrialNamer:
    """Names each Ray Tune trial ``trial_000``, ``trial_001``, ... in the order the sweep creates them,
    whatever the search algorithm's trial ids look like; the names are claimed as files
    (``trials/<name>.id`` holding the Ray trial id), so a resumed sweep keeps them and never reuses one."""

    def __init__(self, trials_dir: str):
        self.trials_dir = trials_dir

    def __call__(self, trial) -> str:
        trial_id = str(trial.trial_id)
        os.makedirs(self.trials_dir, exist_ok=True)
        for path in sorted(glob.glob(os.path.join(self.trials_dir, "trial_*.id"))):
            with open(path, encoding="utf-8") as f:
                if f.read().strip() == trial_id:
                    return os.path.basename(path)[: -len(".id")]
        index = 0
        while True:
            path = os.path.join(self.trials_dir, trial_name(index) + ".id")
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                index += 1
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(trial_id)
            return trial_name(index)


def recorded_trial_ids(run_dir: str) -> set:
    """The ids of the trials in the sweep's saved Ray Tune state (what ``--resume`` restores)."""
    from ray.tune import ExperimentAnalysis

    return {str(trial.trial_id) for trial in ExperimentAnalysis(os.path.join(run_dir, "ray")).trials}


def set_aside_unrecorded(run_dir: str, trials_dir: str, recorded: set) -> List[str]:
    """Moves the trials that a killed sweep named but that Ray Tune's saved state does not hold into
    ``<run>/unrecorded/`` and returns their names.

    Ray Tune saves the experiment's state now and then; a trial created after the last save (the
    search suggests the next one as soon as a slot frees) is named, and may have started, but the
    restored sweep knows nothing of it and suggests another in its place. Its claim is released so
    that name goes to the trial that replaces it (the sweep's trials stay ``trial_000`` to
    ``trial_<budget - 1>``), and its files are kept aside rather than resumed with another trial's
    hyperparameters or counted as a trial of their own."""
    moved = []
    for claim in sorted(glob.glob(os.path.join(trials_dir, "trial_*.id"))):
        with open(claim, encoding="utf-8") as f:
            trial_id = f.read().strip()
        if trial_id in recorded:
            continue
        name = os.path.basename(claim)[: -len(".id")]
        target = os.path.join(run_dir, "unrecorded", f"{name}-{trial_id}")
        os.makedirs(target, exist_ok=True)
        for path in glob.glob(os.path.join(trials_dir, name)) + glob.glob(os.path.join(trials_dir, name + ".*")):
            shutil.move(path, os.path.join(target, os.path.basename(path)))
        if os.path.isdir(os.path.join(run_dir, "ray", name)):
            shutil.move(os.path.join(run_dir, "ray", name), os.path.join(target, "ray"))
        moved.append(name)
    return moved


def require_libraries(scheduler: str) -> None:
    """Refuse in one line, before Ray starts, when Ray Tune (or Optuna for ``tpe``) cannot be imported.

    ``ray`` installs without its ``tune`` extra (pandas, pyarrow, ...), and then ``ray.tune`` fails
    to import only once the sweep is about to start; the extra is what to install."""
    needed = [("ray.tune", "Ray Tune")] + ([("optuna", "Optuna")] if scheduler == "tpe" else [])
    for module, name in needed:
        try:
            importlib.import_module(module)
        except ImportError as e:
            cause = e.__cause__ if isinstance(e.__cause__, ImportError) else e
            raise SweepError(f"unityagents-tune runs its trials on {name} ({module}), which cannot be imported here "
                             f"({cause}). Install the tuning extra: {install_hint('tune')}, or pip install 'ray[tune]' "
                             "optuna.") from None


def join_ray(address: str, cpus: int):
    """Ray for the sweep: a private local instance (``local``) or the cluster at ``address``."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        return ray
    try:
        if address == "local":  # a private instance, even where RAY_ADDRESS names a running cluster
            ray.init(address="local", num_cpus=max(os.cpu_count() or 1, cpus), include_dashboard=False,
                     _node_ip_address="127.0.0.1", logging_level=logging.WARNING)
        else:
            ray.init(address=address, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise SweepError(f"--ray-address {address}: could not join the Ray cluster: {e}. Start one first (`ray start "
                         "--head`; docs/cluster.md), pass its address, or use --ray-address local.") from None
    return ray


def tuner_for(plan: Plan):
    """The Ray Tune ``Tuner`` of the sweep (restored from ``<run>/ray`` with --resume)."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, MedianStoppingRule, PopulationBasedTraining
    from ray.tune.search.basic_variant import BasicVariantGenerator

    from unityagents_tune.trial import _trainable_class

    sweep, objective = plan.sweep, plan.sweep.objective
    trainable = tune.with_resources(tune.with_parameters(_trainable_class(), context=plan.context()),
                                    {"cpu": int(plan.options["--cpus-per-trial"])})
    storage = os.path.join(plan.run_dir, "ray")
    if plan.options["--resume"] and tune.Tuner.can_restore(storage):
        return tune.Tuner.restore(storage, trainable, resume_unfinished=True, resume_errored=False)
    grace, interval = stages(sweep, plan.max_steps)
    name, stop = sweep.scheduler.name, sweep.scheduler.early_stopping
    if name == "asha":
        stop = "asha"
    if name == "median":
        stop = "median"
    if name == "pbt":
        scheduler = PopulationBasedTraining(
            time_attr="agent_steps", perturbation_interval=interval, burn_in_period=0,
            hyperparam_mutations={k: sweep.search[k].to_ray() for k in sweep.mutated},
            quantile_fraction=sweep.scheduler.quantile_fraction,
            resample_probability=sweep.scheduler.resample_probability)
    elif stop == "asha":
        scheduler = ASHAScheduler(time_attr="agent_steps", max_t=plan.max_steps, grace_period=grace,
                                  reduction_factor=sweep.scheduler.reduction_factor)
    elif stop == "median":
        scheduler = MedianStoppingRule(time_attr="agent_steps", grace_period=grace, min_samples_required=3)
    else:
        scheduler = FIFOScheduler()
    if name == "tpe":
        import optuna
        from ray.tune.search.optuna import OptunaSearch

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(n_startup_trials=max(2, sweep.budget.trials // 3), seed=plan.seed)
        search = OptunaSearch(sampler=sampler)
    else:
        search = BasicVariantGenerator(random_state=plan.seed)
    tune_config = tune.TuneConfig(metric="objective", mode=objective.mode, num_samples=sweep.budget.trials,
                                  max_concurrent_trials=sweep.budget.concurrent, search_alg=search,
                                  scheduler=scheduler, reuse_actors=False,
                                  trial_name_creator=TrialNamer(plan.trials_dir),
                                  trial_dirname_creator=TrialNamer(plan.trials_dir))
    run_config = tune.RunConfig(name="ray", storage_path=plan.run_dir, verbose=1,
                                failure_config=tune.FailureConfig(max_failures=0, fail_fast=False))
    space = {k: d.to_ray() for k, d in sweep.search.items()}
    if sweep.scheduler.start == "config":
        space.update({k: lookup(plan.resolved, k) for k in sweep.mutated})
    return tune.Tuner(trainable, param_space=space,
                      tune_config=tune_config, run_config=run_config)


def write_outputs(plan: Plan, statuses: Dict[str, str]) -> int:
    keys = list(plan.sweep.search)
    rows = outputs.collect(plan.trials_dir, keys, statuses, plan.max_steps)
    top = outputs.best(rows, plan.sweep.objective.mode)
    outputs.write_trials_csv(os.path.join(plan.run_dir, "trials.csv"), rows, keys)
    outputs.write_members_csv(os.path.join(plan.run_dir, "members.csv"), plan.trials_dir, [r.name for r in rows],
                              keys)
    outputs.write_hparams(os.path.join(plan.run_dir, "hparams"), rows, keys, plan.sweep.objective.tag)
    print(outputs.table(rows, keys, top.name if top else None))
    run = sum(r.agent_steps for r in rows)
    full = plan.max_steps * len(rows)
    print(f"{len(rows)} trial(s), {run} agent-steps run of {full} for every trial to the end "
          f"({100.0 * (full - run) / full if full else 0:.1f}% saved by stopping early).")
    if top is None:
        print(f"No trial wrote {plan.sweep.objective.tag!r}; see each trial's log in {plan.trials_dir}.")
        return 1
    written = outputs.write_best(plan.run_dir, plan.trials_dir, top)
    print(f"Best: {top.name}, objective {top.objective:.4g} at {top.agent_steps} agent-steps. Written: "
          + ", ".join(os.path.relpath(p, plan.run_dir) for p in written)
          + f" (in {plan.run_dir}; also trials.csv, members.csv, hparams/).")
    return 0


def run(plan: Plan) -> int:
    require_libraries(plan.sweep.scheduler.name)
    if plan.options["--force"] and not plan.options["--resume"] and os.path.isdir(plan.run_dir):
        shutil.rmtree(plan.run_dir)
    os.makedirs(plan.trials_dir, exist_ok=True)
    cpus = int(plan.options["--cpus-per-trial"]) * plan.sweep.budget.concurrent
    join_ray(plan.options["--ray-address"], cpus)
    tuner = tuner_for(plan)
    if plan.options["--resume"]:
        for name in set_aside_unrecorded(plan.run_dir, plan.trials_dir, recorded_trial_ids(plan.run_dir)):
            print(f"{name} was named just before the sweep stopped, but Ray Tune's saved state does not hold it: "
                  f"its files are in {os.path.join(plan.run_dir, 'unrecorded')}, and the name goes to the trial "
                  "the sweep suggests in its place.")
    results = tuner.fit()
    statuses = {}
    for result in results:
        name = os.path.basename(str(result.path or "")) if result.path else ""
        if name:
            statuses[name] = "failed" if result.error else "terminated"
    return write_outputs(plan, statuses)


def main(argv: Optional[List[str]] = None) -> int:
    from runner.settings.run_config import RunConfigError
    from unityagents.exception import UnityException

    options = docopt(__doc__, argv=sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.DEBUG if options["--debug"] else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    try:
        plan = prepare(options)
        for note in plan.notes:
            print(f"note: {note}", file=sys.stderr)
        if options["--dry-run"]:
            print(dry_run_text(plan), end="")
            return 0
    except (SweepError, RunConfigError, UnityException) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        return run(plan)
    except SweepError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def cli() -> None:
    """Console-script entry point (``unityagents-tune``)."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
