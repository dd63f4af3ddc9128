"""The benchmarks read our trainer's console: each one's pattern must read the line the trainer writes.

Every timing and learning figure of ``bench/`` comes from the summary line that ``trainers.stats``'
``ConsoleWriter`` logs (``<behaviour>: Step: N. Mean Reward: R. ... X agent-steps/s. Elapsed: ...``).
A pattern that stops matching after a change to that line would not fail: the benchmark would
report every run as never reaching its target. So each pattern is checked here against lines the
writer itself produces, for the values it must read back.
"""
import logging
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import gridworld_seeds  # noqa: E402
import mlagents_configs  # noqa: E402
import plugin_release22  # noqa: E402
import train  # noqa: E402
import trained_scaling  # noqa: E402
import variable_length  # noqa: E402
import vs_mlagents  # noqa: E402
import vs_sb3  # noqa: E402
import zoo  # noqa: E402

from trainers.stats import ConsoleWriter, Progress  # noqa: E402


def console_line(caplog, category: str, step: int, rewards, rate: float = 4321.0, elapsed: float = 3725.0) -> str:
    """The line ``ConsoleWriter`` logs for one summary, as the console shows it."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="unityagents"):
        ConsoleWriter().write_progress(category, step, Progress(rewards, rate, elapsed, 60.0, True))
    (record,) = caplog.records
    return record.getMessage()


#: (name, pattern, behaviour the benchmark trains): each reads the step (group 1) and the mean reward.
PATTERNS = [
    ("vs_sb3.LINE", vs_sb3.LINE, "Ball3DBrain"),
    ("vs_mlagents.OURS_LINE", vs_mlagents.OURS_LINE, "3DBall?team=0"),
    ("zoo.summary_pattern", zoo.summary_pattern("Hallway"), "Hallway?team=0"),
    ("variable_length.LINE", variable_length.LINE, "Sorter?team=0"),
    ("gridworld_seeds.LINE", re.compile(gridworld_seeds.LINE.format(brain=re.escape("GridWorldBrain"))),
     "GridWorldBrain"),
    ("plugin_release22.LINE", plugin_release22.LINE, "3DBall?team=0"),
    ("mlagents_configs.LINE", mlagents_configs.LINE, "3DBall?team=0"),
]


@pytest.mark.parametrize("name, pattern, category", PATTERNS, ids=[p[0] for p in PATTERNS])
def test_each_benchmark_reads_the_step_and_the_mean_reward(caplog, name, pattern, category):
    line = console_line(caplog, category, 26400, [99.5, 100.5, -1.0, 101.0])
    m = pattern.search(line)
    assert m, f"{name} does not match {line!r}"
    assert int(m[1]) == 26400
    assert float(m[2]) == pytest.approx(75.0, abs=5e-4)
    negative = pattern.search(console_line(caplog, category, 2000, [-0.5, -0.25]))
    assert negative and float(negative[2]) == pytest.approx(-0.375, abs=5e-4)


def test_a_summary_without_episodes_is_no_reward(caplog):
    line = console_line(caplog, "Ball3DBrain", 2400, [])
    assert not any(pattern.search(line) for _, pattern, _ in PATTERNS)


def test_vs_sb3_also_reads_the_rate_and_the_elapsed_time(caplog):
    m = vs_sb3.LINE.search(console_line(caplog, "Ball3DBrain", 26400, [100.0], rate=6789.0, elapsed=3725.0))
    assert float(m[3]) == 6789.0
    assert (int(m[4]), int(m[5]), int(m[6])) == (1, 2, 5)


def test_train_reads_the_brain_step_mean_and_elapsed_time(caplog):
    (brain, step, mean, h, mnt, s), = train.LINE.findall(console_line(caplog, "Ball3DBrain", 4800, [90.0, 92.0]))
    assert (brain, int(step), float(mean)) == ("Ball3DBrain", 4800, 91.0)
    assert (int(h), int(mnt), int(s)) == (1, 2, 5)


def test_trained_scaling_counts_every_progress_line(caplog):
    for rewards in ([1.0], []):
        m = trained_scaling.PROGRESS.search(console_line(caplog, "3DBall?team=0", 12000, rewards))
        assert m and int(m[1]) == 12000
