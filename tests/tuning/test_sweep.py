"""unityagents-tune without Ray: the sweep file's checks, the trials' configs and ports, the events
reader and what a sweep writes. The behaviour's name is read from the run config the sweeps tune,
so these hold whatever the built-in scene calls it."""
from __future__ import annotations

import math
import os
import random
import struct

import pytest
import yaml

import learn_r22
from unityagents_tune import cli, outputs
from unityagents_tune.sweep import SweepError, apply, lookup, mid_run_changeable, parse, read
from unityagents_tune.trial import PORT_SLOTS, EventReader, TrialContext, TrialRun

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "config", "ppo", "3DBall.yaml")
with open(CONFIG, encoding="utf-8") as _f:
    BEHAVIOR = next(iter(yaml.safe_load(_f)["behaviors"]))
HP = f"behaviors.{BEHAVIOR}.hyperparameters"


def sweep_text(search=None, **sections):
    raw = {"search": search or {f"{HP}.learning_rate": {"loguniform": [1.0e-5, 1.0e-3]}},
           "objective": {"tag": "Environment/Cumulative Reward", "mode": "max", "last": 2},
           "budget": {"trials": 3, "max_steps": 4800}, "scheduler": {"name": "random"}}
    raw.update(sections)
    return raw


def check(raw, tmp_path, monkeypatch, capsys, *extra):
    """``unityagents-tune config/ppo/3DBall.yaml <sweep> --dry-run``: (exit code, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(raw))
    code = cli.main([CONFIG, str(tmp_path / "sweep.yaml"), "--env=3DBall", "--dry-run", *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("name", ["3DBall_tpe.yaml", "3DBall_pbt.yaml"])
def test_the_shipped_sweeps_check_against_the_shipped_config(name, tmp_path, monkeypatch, capsys):
    raw = yaml.safe_load(open(os.path.join(ROOT, "config", "tuning", name), encoding="utf-8"))
    code, out, err = check(raw, tmp_path, monkeypatch, capsys)
    assert code == 0, err
    assert out.count("--- # trial_") == raw["budget"]["trials"]
    assert not os.path.exists(tmp_path / "results")  # a dry run writes nothing


def test_dry_run_prints_each_trials_resolved_config_with_its_values(tmp_path, monkeypatch, capsys):
    search = {f"{HP}.learning_rate": {"loguniform": [1.0e-5, 1.0e-3]}, f"{HP}.batch_size": {"choice": [64, 128]},
              f"behaviors.{BEHAVIOR}.network_settings.num_layers": {"randint": [1, 3]}}
    code, out, err = check(sweep_text(search), tmp_path, monkeypatch, capsys, "--base-port=7000")
    assert code == 0, err
    docs = out.split("--- # ")[1:]
    assert len(docs) == 3
    ports = []
    for doc in docs:
        header, body = doc.split("\n", 1)
        config = yaml.safe_load(body)["behaviors"][BEHAVIOR]
        assert config["max_steps"] == 4800  # the budget's
        assert 1.0e-5 <= config["hyperparameters"]["learning_rate"] <= 1.0e-3
        assert config["hyperparameters"]["batch_size"] in (64, 128)
        assert config["network_settings"]["num_layers"] in (1, 2, 3)
        assert f"learning_rate={config['hyperparameters']['learning_rate']!r}" in header
        ports.append(int(header.rsplit("ports from ", 1)[1]))
    assert ports == [7000, 7000 + PORT_SLOTS, 7000 + 2 * PORT_SLOTS]


def test_a_summary_period_longer_than_a_trial_is_lowered_with_one_line_before_any_trial(tmp_path, monkeypatch,
                                                                                         capsys):
    """config/ppo/3DBall.yaml writes a summary every 2400 agent-steps; trials of 1200 would report nothing
    before they end, so each writes one every 1200 / objective.last (2) instead, and one line says so."""
    code, out, err = check(sweep_text(budget={"trials": 2, "max_steps": 1200}), tmp_path, monkeypatch, capsys)
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: behaviors.{BEHAVIOR}.summary_freq 2400 is longer than a trial (1200 agent-steps): its "
                     "runs would write no summary before they end. Each trial writes one every 600 agent-steps "
                     "instead (budget.max_steps / objective.last 2)."]
    configs = [yaml.safe_load(doc.split("\n", 1)[1])["behaviors"][BEHAVIOR] for doc in out.split("--- # ")[1:]]
    assert [c["summary_freq"] for c in configs] == [600, 600]
    # Within the budget, the user's period stands and nothing is said.
    code, out, err = check(sweep_text(), tmp_path, monkeypatch, capsys)
    assert code == 0 and "note:" not in err
    assert {yaml.safe_load(doc.split("\n", 1)[1])["behaviors"][BEHAVIOR]["summary_freq"]
            for doc in out.split("--- # ")[1:]} == {2400}


@pytest.mark.parametrize("search, sections, message", [
    ({f"{HP}.learning_rat": {"uniform": [0.1, 0.2]}}, {}, "no 'learning_rat' under"),
    ({"behaviors.NoSuchBrain.hyperparameters.beta": {"uniform": [0.1, 0.2]}}, {}, "no 'NoSuchBrain' under behaviors"),
    ({f"{HP}": {"uniform": [0.1, 0.2]}}, {}, "names a whole section"),
    ({f"{HP}.beta": {"uniform": [0.2, 0.1]}}, {}, "inverted"),
    ({f"{HP}.beta": {"loguniform": [0.0, 0.1]}}, {}, "must be above 0"),
    ({f"{HP}.num_epoch": {"randint": [5, 5]}}, {}, "inverted or equal"),
    ({f"{HP}.beta": {"normal": [0.1, 0.2]}}, {}, "is no distribution"),
    ({f"{HP}.batch_size": {"choice": []}}, {}, "non-empty list"),
    ({f"{HP}.batch_size": {"choice": [64, -3]}}, {}, "refuses the value -3"),
    (None, {"objective": {"tag": "Environment/Cumulative Rewards"}},
     "no trial writes 'Environment/Cumulative Rewards'"),
    (None, {"objective": {"tag": "Self-play/ELO"}}, "no behaviour of the run config has self_play"),
    (None, {"objective": {"tag": "Environment/Cumulative Reward", "mode": "maximum"}}, "expected max or min"),
    (None, {"scheduler": {"name": "hyperband"}}, "is not one of"),
    (None, {"scheduler": {"name": "pbt", "early_stopping": "asha"}}, "replaces poor members"),
    (None, {"budget": {"trials": 0}}, "budget.trials: expected 1 or more"),
    (None, {"searchh": {}}, "unknown section"),
])
def test_bad_input_is_refused_before_any_trial_starts(search, sections, message, tmp_path, monkeypatch, capsys):
    code, out, err = check(sweep_text(search, **sections), tmp_path, monkeypatch, capsys)
    assert code == 2
    assert message in err
    assert not os.path.exists(tmp_path / "results")


@pytest.mark.parametrize("key, values", [(f"behaviors.{BEHAVIOR}.network_settings.hidden_units", [64, 128]),
                                         (f"{HP}.batch_size", [64, 128]), (f"{HP}.buffer_size", [2048, 4096]),
                                         (f"behaviors.{BEHAVIOR}.time_horizon", [64, 128])])
def test_pbt_refuses_to_mutate_what_cannot_change_mid_run(key, values, tmp_path, monkeypatch, capsys):
    search = {f"{HP}.learning_rate": {"loguniform": [1.0e-5, 1.0e-3]}, key: {"choice": values}}
    code, _, err = check(sweep_text(search, scheduler={"name": "pbt"}), tmp_path, monkeypatch, capsys)
    assert code == 2 and "cannot change in the middle of a run" in err and key in err
    # drawn once per member instead, it is accepted
    code, _, err = check(sweep_text(search, scheduler={"name": "pbt", "mutate": [f"{HP}.learning_rate"]}),
                         tmp_path, monkeypatch, capsys)
    assert code == 0, err


def test_what_may_change_mid_run():
    assert mid_run_changeable(f"{HP}.learning_rate") and mid_run_changeable(f"{HP}.epsilon")
    assert mid_run_changeable(f"behaviors.{BEHAVIOR}.reward_signals.extrinsic.gamma")
    assert mid_run_changeable("default_settings.hyperparameters.beta")
    assert not mid_run_changeable(f"behaviors.{BEHAVIOR}.network_settings.num_layers")
    assert not mid_run_changeable(f"{HP}.batch_size")
    assert not mid_run_changeable("env_settings.seed")


def test_the_objective_may_be_any_tag_a_trial_writes(tmp_path, monkeypatch, capsys):
    for tag in ("Policy/Entropy", "Losses/Value Loss", "Policy/Extrinsic Reward", "Environment/Episode Length"):
        code, _, err = check(sweep_text(objective={"tag": tag, "mode": "min"}), tmp_path, monkeypatch, capsys)
        assert code == 0, err
    code, _, err = check(sweep_text(objective={"tag": "Scene/My Stat", "custom": True}), tmp_path, monkeypatch,
                         capsys)
    assert code == 0, err


def test_an_existing_sweep_is_neither_overwritten_nor_resumed_silently(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep_text()))
    (tmp_path / "results" / "tune").mkdir(parents=True)
    assert cli.main([CONFIG, "sweep.yaml", "--env=3DBall"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert cli.main([CONFIG, "sweep.yaml", "--env=3DBall", "--resume"]) == 2
    assert "holds no sweep to resume" in capsys.readouterr().err
    assert cli.main([CONFIG, "sweep.yaml", "--env=3DBall", "--resume", "--force", "--run-id=x"]) == 2
    assert "contradict" in capsys.readouterr().err


@pytest.mark.parametrize("scheduler, missing", [("random", "ray.tune"), ("tpe", "optuna")])
def test_a_sweep_without_its_tuning_libraries_is_refused_in_one_line_before_ray_starts(
        scheduler, missing, tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep_text(scheduler={"name": scheduler})))
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as where the module is not installed
    monkeypatch.setattr(cli, "join_ray", lambda *a: pytest.fail("Ray started without its tuning libraries"))
    assert cli.main([CONFIG, "sweep.yaml", "--env=3DBall"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert missing in err and "pip install 'unity-tf-trainer[tune]'" in err
    assert not (tmp_path / "results").exists()


def test_apply_sets_each_key_and_the_budget_without_touching_the_users_config():
    raw = yaml.safe_load(open(CONFIG, encoding="utf-8"))
    before = yaml.safe_dump(raw)
    config = apply(raw, {f"{HP}.beta": 0.01, f"behaviors.{BEHAVIOR}.reward_signals.extrinsic.strength": 0.5}, 999)
    block = config["behaviors"][BEHAVIOR]
    assert block["hyperparameters"]["beta"] == 0.01 and block["reward_signals"]["extrinsic"]["strength"] == 0.5
    assert block["max_steps"] == 999
    assert yaml.safe_dump(raw) == before
    assert lookup(config, f"{HP}.beta") == 0.01


def test_every_distribution_samples_inside_its_bounds():
    sweep = parse("s", sweep_text({"a.lu": {"loguniform": [1e-5, 1e-3]}, "a.u": {"uniform": [-1, 1]},
                                   "a.r": {"randint": [1, 3]}, "a.c": {"choice": ["x", "y"]}}))
    rng = random.Random(0)
    draws = [sweep.sample(rng) for _ in range(200)]
    assert all(1e-5 <= d["a.lu"] <= 1e-3 and -1 <= d["a.u"] <= 1 and d["a.c"] in ("x", "y") for d in draws)
    assert {d["a.r"] for d in draws} == {1, 2, 3}  # randint's high bound is drawn too
    assert math.log10(min(d["a.lu"] for d in draws)) < -4.5  # log-uniform reaches the low decade


def test_trials_never_share_a_port():
    context = TrialContext("t", {}, None, "x", 1, base_port=5005, num_envs=3)
    used = {}
    for index in range(50):
        run = TrialRun(context, index, {})
        for start in range(2 * PORT_SLOTS):
            first = run.port(start)
            for port in range(first, first + 3):
                assert used.setdefault(port, index) == index
        assert run.port(0) != run.port(1)  # a restart does not wait for the old ports


def _record(payload: bytes) -> bytes:
    return struct.pack("<Q", len(payload)) + b"\0" * 4 + payload + b"\0" * 4


def test_the_event_reader_reads_records_as_they_are_written(tmp_path):
    from tensorboard.compat.proto import event_pb2, summary_pb2

    def event(step, tag, value):
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        return event_pb2.Event(wall_time=float(step), step=step, summary=summary).SerializeToString()

    folder = tmp_path / "Brain"
    folder.mkdir()
    path = folder / "events.out.tfevents.1.host"
    whole = _record(event(100, "Environment/Cumulative Reward", 1.5)) + _record(event(100, "Policy/Beta", 0.1))
    second = _record(event(200, "Environment/Cumulative Reward", 2.5))
    path.write_bytes(whole + second[:10])  # the second record half written
    reader = EventReader(str(tmp_path), "Environment/Cumulative Reward")
    assert reader.read() == [(100, 1.5)]
    with open(path, "ab") as f:
        f.write(second[10:])
    assert reader.read() == [(200, 2.5)]
    assert reader.read() == []
    reader.skip_existing()
    assert reader.read() == []


def _history(trials, name, rows, values):
    for event, steps, objective in rows:
        outputs.record(str(trials), name, event, steps, objective, objective, values)


def test_outputs_account_for_every_trial_and_best_yaml_runs_as_is(tmp_path, monkeypatch, capsys):
    trials = tmp_path / "tune" / "trials"
    trials.mkdir(parents=True)
    raw = yaml.safe_load(open(CONFIG, encoding="utf-8"))
    key = f"{HP}.learning_rate"
    for name, lr in (("trial_000", 1e-4), ("trial_001", 3e-4), ("trial_002", 1e-5), ("trial_003", 2e-4)):
        (trials / f"{name}.yaml").write_text(yaml.safe_dump(apply(raw, {key: lr}, 4800)))
    _history(trials, "trial_000", [("summary", 2400, 3.0), ("done", 4800, 5.0)], {key: 1e-4})
    _history(trials, "trial_001", [("summary", 2400, 4.0), ("summary", 4800, 9.0), ("done", 4800, 9.0)],
             {key: 3e-4})
    _history(trials, "trial_002", [("summary", 2400, 1.0)], {key: 1e-5})
    _history(trials, "trial_003", [("failed", 0, float("nan"))], {key: 2e-4})
    (trials / "trial_001").mkdir()
    (trials / "trial_001" / f"{BEHAVIOR}.onnx").write_bytes(b"onnx")
    _history(trials, "trial_005", [("summary", 4800, 2.0)], {key: 1e-4})  # stopped at the budget's end
    rows = outputs.collect(str(trials), [key], {"trial_002": "terminated", "trial_003": "failed",
                                                 "trial_004": "failed", "trial_005": "terminated"}, 4800)
    status = {r.name: r.status for r in rows}
    assert status == {"trial_000": "completed", "trial_001": "completed", "trial_002": "stopped early",
                      "trial_003": "failed", "trial_004": "failed", "trial_005": "completed"}
    top = outputs.best(rows, "max")
    assert top.name == "trial_001" and top.objective == 9.0 and top.values[key] == 3e-4
    assert outputs.best(rows, "min").name == "trial_002"
    outputs.write_trials_csv(str(tmp_path / "tune" / "trials.csv"), rows, [key])
    lines = (tmp_path / "tune" / "trials.csv").read_text().splitlines()
    assert lines[0] == f"trial,status,objective,agent_steps,node,{key}" and len(lines) == 7
    written = outputs.write_best(str(tmp_path / "tune"), str(trials), top)
    assert os.path.exists(tmp_path / "tune" / f"{BEHAVIOR}.onnx") and len(written) == 2
    best = yaml.safe_load((tmp_path / "tune" / "best.yaml").read_text())
    assert best["behaviors"][BEHAVIOR]["hyperparameters"]["learning_rate"] == 3e-4
    monkeypatch.chdir(tmp_path)
    assert learn_r22.main([str(tmp_path / "tune" / "best.yaml"), "--env=3DBall", "--dry-run"]) == 0
    capsys.readouterr()
    text = outputs.table(rows, [key], top.name)
    assert text.splitlines()[1].startswith("* trial_001")
    outputs.write_hparams(str(tmp_path / "tune" / "hparams"), rows, [key], "Environment/Cumulative Reward")
    assert len([f for f in os.listdir(tmp_path / "tune" / "hparams") if f.startswith("trial_")]) == 6


def test_members_csv_holds_each_members_settings_over_time(tmp_path):
    key = f"{HP}.learning_rate"
    _history(tmp_path, "trial_000", [("summary", 2400, 3.0)], {key: 1e-5})
    outputs.record(str(tmp_path), "trial_000", "exploit", 2400, float("nan"), float("nan"), {key: 2e-4},
                   source="trial_001")
    _history(tmp_path, "trial_000", [("summary", 4800, 8.0)], {key: 2e-4})
    outputs.write_members_csv(str(tmp_path / "members.csv"), str(tmp_path), ["trial_000"], [key])
    lines = (tmp_path / "members.csv").read_text().splitlines()
    assert lines[0].split(",") == outputs.HISTORY_COLUMNS + [key]
    assert [line.split(",")[1] for line in lines[1:]] == ["summary", "exploit", "summary"]
    assert lines[2].split(",")[5] == "trial_001" and lines[2].endswith("0.0002")


def test_read_names_a_missing_sweep_file(tmp_path):
    with pytest.raises(SweepError, match="does not exist"):
        read(str(tmp_path / "nope.yaml"))


def test_pbt_members_may_all_start_from_the_run_configs_values(tmp_path, monkeypatch, capsys):
    search = {f"{HP}.learning_rate": {"loguniform": [1.0e-5, 1.0e-3]}, f"{HP}.beta": {"loguniform": [1e-4, 1e-2]}}
    code, out, err = check(sweep_text(search, scheduler={"name": "pbt", "start": "config"}), tmp_path, monkeypatch,
                           capsys)
    assert code == 0, err
    configured = yaml.safe_load(open(CONFIG, encoding="utf-8"))["behaviors"][BEHAVIOR]["hyperparameters"]
    for doc in out.split("--- # ")[1:]:
        block = yaml.safe_load(doc.split("\n", 1)[1])["behaviors"][BEHAVIOR]["hyperparameters"]
        assert block["learning_rate"] == configured["learning_rate"] and block["beta"] == configured["beta"]
    code, _, err = check(sweep_text(search, scheduler={"name": "tpe", "start": "config"}), tmp_path, monkeypatch,
                         capsys)
    assert code == 2 and "use it with name: pbt" in err


def _fake_run(trials, index, step):
    context = TrialContext(str(trials), {}, None, "Environment/Cumulative Reward", 1, 5005, 1)
    run = TrialRun(context, index, {"k": index})
    (trials / run.name / "checkpoints").mkdir(parents=True)
    for suffix in (".index", ".data-00000-of-00001", ".state.json"):
        (trials / run.name / "checkpoints" / f"model-{step}.cptk{suffix}").write_text(run.name)
    (trials / run.name / "checkpoints" / "checkpoint").write_text(f'model_checkpoint_path: "{trials}/{run.name}"')
    return run


def test_an_exploit_copies_the_better_members_checkpoints_and_a_pause_keeps_its_own(tmp_path):
    good, poor = _fake_run(tmp_path, 0, 3000), _fake_run(tmp_path, 1, 2000)
    good.save_to(str(tmp_path / "copy"))
    assert not (tmp_path / "copy" / "checkpoints" / "checkpoint").exists()  # it names the other trial's folder
    poor.load_from(str(tmp_path / "copy"))
    assert sorted(os.listdir(tmp_path / "trial_001" / "checkpoints")) == sorted(
        os.listdir(tmp_path / "copy" / "checkpoints"))
    assert (tmp_path / "trial_001" / "checkpoints" / "model-3000.cptk.index").read_text() == "trial_000"
    assert poor.resume and "--resume" in poor.command(6000)
    [row] = outputs.read_history(str(tmp_path), "trial_001")
    assert (row["event"], row["source"]) == ("exploit", "trial_000")
    # Ray Tune pausing a member and resuming it from its own copy: the run's newer checkpoint stays
    (tmp_path / "trial_000" / "checkpoints" / "model-4000.cptk.index").write_text("newer")
    good.load_from(str(tmp_path / "copy"))
    assert (tmp_path / "trial_000" / "checkpoints" / "model-4000.cptk.index").exists()
    assert outputs.read_history(str(tmp_path), "trial_000")[-1]["event"] == "restore"
