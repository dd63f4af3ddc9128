"""Release 22's checkpoint files per behaviour: ``<Behavior>-<step>.onnx`` named by the behaviour's own
agent steps, saved when that behaviour's steps pass its ``checkpoint_interval`` and kept
``keep_checkpoints`` at a time, each behaviour on its own."""
from __future__ import annotations

from types import SimpleNamespace

from runner.controller import TrainerController
from runner.run_paths import RunPaths
from runner.saver import RunSaver


def saver(paths: RunPaths, keep: int, per_behavior) -> RunSaver:
    files = RunSaver.__new__(RunSaver)  # no session: only the file bookkeeping is exercised
    files.paths, files.keep_checkpoints, files.keep_per_behavior = paths, keep, per_behavior
    return files


def test_each_behavior_keeps_its_own_newest_onnx_files_by_step_number(tmp_path):
    paths = RunPaths.results(str(tmp_path), "run")
    steps = {"Walker": [600, 900, 1000, 1200, 12000], "Striker": [10, 20, 30, 40, 50, 60, 70]}
    for behavior, numbers in steps.items():
        folder = tmp_path / "run" / behavior
        folder.mkdir(parents=True)
        for n in numbers:
            (folder / f"{behavior}-{n}.onnx").write_bytes(b"")
        (folder / f"{behavior}.onnx").write_bytes(b"")  # not a checkpoint's file: never counted
    trainers = {"Walker": SimpleNamespace(brain_name="Walker"),
                "Striker?team=1": SimpleNamespace(brain_name="Striker?team=1")}
    saver(paths, 5, {"Walker": 2, "Striker": 3})._forget_unkept_onnx(trainers)
    assert sorted(p.name for p in (tmp_path / "run" / "Walker").glob("*.onnx")) == [
        "Walker-1200.onnx", "Walker-12000.onnx", "Walker.onnx"]  # 12000 > 1200: numbers, not text
    assert sorted(p.name for p in (tmp_path / "run" / "Striker").glob("*.onnx")) == [
        "Striker-50.onnx", "Striker-60.onnx", "Striker-70.onnx", "Striker.onnx"]


def test_the_results_layout_names_by_the_behaviors_steps_and_the_legacy_one_by_the_environments(tmp_path):
    walker = SimpleNamespace(brain_name="Walker", get_step=26400)
    assert saver(RunPaths.results(str(tmp_path), "run"), 5, {}).onnx_step(walker, 2200) == 26400
    assert saver(RunPaths.legacy(str(tmp_path / "models"), str(tmp_path / "summaries"), "ppo"), 5, {}).onnx_step(
        walker, 2200) == 2200


def test_each_learner_is_due_when_its_own_steps_pass_its_own_interval():
    controller = TrainerController.__new__(TrainerController)  # the interval bookkeeping alone
    controller._checkpoint_interval, controller._intervals = {"Walker": 1000, "Crawler": 300, "": 700}, {}
    due = []
    for walker, crawler, other in [(0, 0, 0), (500, 200, 500), (1000, 310, 710), (1500, 590, 1000),
                                   (2100, 600, 1400)]:
        due.append([name for name, step in (("Walker", walker), ("Crawler?team=0", crawler), ("Other", other))
                    if controller._interval(name).due(step)])
    assert due == [[], [], ["Walker", "Crawler?team=0", "Other"], [], ["Walker", "Crawler?team=0", "Other"]]


def test_an_interval_answers_a_question_about_a_later_step_without_counting_it():
    from runner.checkpoints import StepInterval

    interval = StepInterval(100)
    assert not interval.would_be_due(250)  # nothing is counted before the first step it is asked about
    assert not interval.due(40)
    assert [interval.would_be_due(s) for s in (99, 100, 250)] == [False, True, True]
    assert not interval.due(99) and interval.due(130)  # the questions moved nothing
    assert not interval.would_be_due(199) and interval.would_be_due(200)
    assert not StepInterval(0).would_be_due(10**6) and not StepInterval(None).would_be_due(10**6)
