"""runner/timers.py: the tree, counts and totals (on a fake clock: no timing assertions), the JSON."""
from __future__ import annotations

import json
import os

import pytest

from runner.timers import NAMES, Timers, timed
from tests.conftest import fill_the_disk


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_nested_timers_count_and_total_per_parent():
    clock = FakeClock()
    t = Timers(clock=clock)
    for _ in range(3):
        with t("env_step"):
            clock.advance(1.0)
            with t("env_wait"):
                clock.advance(2.0)
        with t("update"):
            clock.advance(0.5)
            with t("env_wait"):  # the same name under another parent is another node
                clock.advance(0.25)
    clock.advance(4.0)  # untimed
    tree = t.to_dict()
    assert tree["name"] == "root" and tree["count"] == 1
    assert tree["total"] == pytest.approx(3 * 3.75 + 4.0)
    assert tree["self"] == pytest.approx(4.0)
    step = tree["children"]["env_step"]
    assert (step["count"], step["total"], step["self"]) == (3, pytest.approx(9.0), pytest.approx(3.0))
    assert step["children"]["env_wait"] == {"total": pytest.approx(6.0), "count": 3, "self": pytest.approx(6.0)}
    assert tree["children"]["update"]["children"]["env_wait"]["total"] == pytest.approx(0.75)
    assert t.find("update", "env_wait").count == 3 and t.find("update", "nothing") is None


def test_an_exception_still_closes_the_timer():
    clock = FakeClock()
    t = Timers(clock=clock)
    with pytest.raises(ValueError):
        with t("checkpoint"):
            clock.advance(1.5)
            raise ValueError("disk full")
    with t("export"):  # opened at the root again, not under "checkpoint"
        clock.advance(1.0)
    assert t.find("checkpoint").total == pytest.approx(1.5) and t.find("checkpoint").count == 1
    assert t.find("export").total == pytest.approx(1.0)


def test_a_recursive_name_nests_and_counts_each_level():
    clock = FakeClock()
    t = Timers(clock=clock)

    @timed("inference", owner=t)
    def depth(n):
        clock.advance(1.0)
        return 0 if n == 0 else 1 + depth(n - 1)

    assert depth(2) == 2
    node = t.find("inference")
    assert node.total == pytest.approx(3.0) and node.count == 1
    assert t.find("inference", "inference", "inference").total == pytest.approx(1.0)


def test_timed_defaults_to_the_qualified_name_and_keeps_the_signature():
    t = Timers(clock=FakeClock())

    class Trainer:
        @timed(owner=t)
        def update_model(self, x: int) -> int:
            """Docstring kept."""
            return 2 * x

    assert Trainer().update_model(21) == 42
    assert Trainer.update_model.__doc__ == "Docstring kept."
    assert t.find("test_timed_defaults_to_the_qualified_name_and_keeps_the_signature.<locals>.Trainer."
                  "update_model").count == 1


def test_gauges_and_write_json_atomically(tmp_path, monkeypatch):
    clock = FakeClock()
    t = Timers(clock=clock)
    for size in (3, 10, 7):
        t.set_gauge("buffer_size", size)
    with t("summaries"):
        clock.advance(0.1)
    t.metadata["run"] = "ppo"
    path = str(tmp_path / "models" / "ppo" / "timers.json")
    assert t.write_json(path) == path
    data = json.loads(open(path).read())
    assert data["gauges"]["buffer_size"] == {"value": 7.0, "min": 3.0, "max": 10.0, "count": 3}
    assert data["children"]["summaries"]["count"] == 1 and data["metadata"]["run"] == "ppo"
    assert os.listdir(os.path.dirname(path)) == ["timers.json"]  # no temporary file left behind
    t.set_gauge("broken", float("nan"))
    fill_the_disk(monkeypatch)  # half of the new file's bytes, then ENOSPC
    with pytest.raises(OSError, match="No space left"):
        t.write_json(path)
    monkeypatch.undo()
    assert json.loads(open(path).read()) == data  # the old file, whole
    assert os.listdir(os.path.dirname(path)) == ["timers.json"]  # the half-written temporary file is gone


def test_reset_forgets_everything_and_names_are_declared():
    clock = FakeClock()
    t = Timers(clock=clock)
    with t("buffer"):
        clock.advance(1.0)
    t.set_gauge("g", 1)
    t.reset()
    assert t.to_dict()["total"] == 0.0 and "children" not in t.to_dict() and t.gauges == {}
    assert set(NAMES) == {"env_step", "env_wait", "inference", "buffer", "update", "background_update", "summaries",
                          "checkpoint", "export"}


def test_a_timer_kept_on_another_thread_is_recorded_under_the_root_with_its_totals():
    t = Timers(clock=FakeClock())
    t.record("background_update", 2.5, 3)
    t.record("background_update", 4.0, 5)  # totals so far: the latest replaces the last
    node = t.to_dict()["children"]["background_update"]
    assert (node["total"], node["count"]) == (4.0, 5)
