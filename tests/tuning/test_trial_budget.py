"""A trial whose summaries already reach the sweep's budget is reported once its run has ended.

A resumed trial reads its run's old summaries first; reporting the budget from them at once would
have the scheduler stop the run it just started, before its last save and export.
"""
import csv
import json

import unityagents_tune.trial as trial
from unityagents_tune.trial import TrialContext, TrialRun


class FakeProcess:
    def __init__(self, polls_until_done: int):
        self.polls = polls_until_done

    def poll(self):
        self.polls -= 1
        return 0 if self.polls < 0 else None


def run_at(tmp_path, summaries, max_steps, polls_until_done):
    context = TrialContext(trials_dir=str(tmp_path), raw_config={}, max_steps=max_steps,
                           tag="Environment/Cumulative Reward", last=1, base_port=6000, num_envs=1)
    run = TrialRun(context, 0, {})
    reads = [list(summaries)]
    run.reader.read = lambda: reads.pop(0) if reads else []
    run.process = FakeProcess(polls_until_done)
    return run


def step(run, monkeypatch):
    monkeypatch.setattr(trial, "POLL_S", 0.0)
    trainable = trial._trainable_class()
    instance = object.__new__(trainable)
    instance.run = run
    return trainable.step(instance)


def test_summaries_at_the_budget_wait_for_the_run_to_end(tmp_path, monkeypatch):
    run = run_at(tmp_path, [(1200, 1.0), (2400, 2.0)], max_steps=2400, polls_until_done=3)
    result = step(run, monkeypatch)
    assert result["done"] is True and result["agent_steps"] == 2400
    assert run.process.polls < 0  # reported only after the process had exited


def test_summaries_below_the_budget_are_reported_at_once(tmp_path, monkeypatch):
    run = run_at(tmp_path, [(1200, 1.0)], max_steps=2400, polls_until_done=3)
    result = step(run, monkeypatch)
    assert result["done"] is False and result["agent_steps"] == 1200
    assert run.process.polls == 2


def test_a_run_that_ends_past_its_last_summary_reports_the_steps_of_its_last_save(tmp_path, monkeypatch):
    # Killed after its checkpoint at the budget and before that step's summary, the resumed run ends at
    # once from the checkpoint: the summaries stop at 1200, the run's training status says 2400.
    run = run_at(tmp_path, [(1200, 1.0)], max_steps=2400, polls_until_done=0)
    status = tmp_path / "trial_000" / "run_logs"
    status.mkdir(parents=True)
    (status / "training_status.json").write_text(json.dumps({
        "3DBall": {"checkpoints": [{"steps": 2400}], "final_checkpoint": {"steps": 2400}},
        "ball_scale": {"lesson_num": 0}, "metadata": {"stats_format_version": "0.3.0"}}))
    result = step(run, monkeypatch)
    assert result["done"] is True and result["agent_steps"] == 2400
    rows = list(csv.DictReader(open(tmp_path / "trial_000.history.csv")))
    assert rows[-1]["event"] == "done" and rows[-1]["agent_steps"] == "2400"


def test_a_run_without_a_training_status_reports_its_last_summary(tmp_path, monkeypatch):
    run = run_at(tmp_path, [(1200, 1.0)], max_steps=2400, polls_until_done=0)
    result = step(run, monkeypatch)
    assert result["done"] is True and result["agent_steps"] == 1200
