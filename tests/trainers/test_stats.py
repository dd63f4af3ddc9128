"""Stats writers: plugins are discovered through the ``unityagents.stats_writers`` entry points.

A plugin is made discoverable the way ``pip install`` would: a ``*.dist-info`` directory with an
``entry_points.txt`` on ``sys.path`` (real ``importlib.metadata`` discovery, nothing mocked).
"""
import glob
import logging
import textwrap

import numpy as np
import pytest

from tests.e2e.test_plugins import write_dist_info
from trainers.stats import ENTRY_POINT_GROUP, StatsReporter, StatsWriterError, WriterContext
from trainers.tf_utils import tf
from trainers.trainer.base import Trainer
from unityagents.brain import BrainParameters

RECORDER = textwrap.dedent("""
    from trainers.stats import StatsWriter

    received = []

    class Recorder(StatsWriter):
        def write(self, category, step, values):
            received.append(("write", category, step, dict(values)))

        def write_text(self, category, step, key, table):
            received.append(("text", category, step, key, dict(table)))

        def write_progress(self, category, step, progress):
            received.append(("progress", category, step, list(progress.rewards)))

        def close(self):
            received.append(("close", None, None, None))

    def make(context):
        return Recorder()
""")


def install(site, module: str, source: str, entry_points: dict) -> None:
    """``module`` and a distribution that registers ``entry_points`` under the stats writers' group."""
    (site / f"{module}.py").write_text(source)
    write_dist_info(site, module, entry_points, group=ENTRY_POINT_GROUP)


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return site


def brain() -> BrainParameters:
    return BrainParameters("B", {"stateSize": 2, "actionSize": 2, "actionSpaceType": 1, "stateSpaceType": 1,
                                 "cameraResolutions": [], "actionDescriptions": ["", ""]})


def test_a_plugin_writer_receives_a_trainers_summaries_beside_the_builtins(site, tmp_path, caplog):
    install(site, "recorder_stats_for_test", RECORDER, {"recorder": "recorder_stats_for_test:make"})
    summaries = tmp_path / "summaries"
    trainer = Trainer(tf.compat.v1.Session(graph=tf.Graph()), {"B": brain()}, "B",
                      {"max_steps": 100, "summary_freq": 2, "summary_path": str(summaries)}, True)
    trainer.write_tensorboard_text("Hyperparameters", {"gamma": 0.99})
    trainer.add_stat("cumulative_reward", 1.0)
    trainer.add_stat("cumulative_reward", 3.0)
    trainer.increment_step(2)
    with caplog.at_level(logging.INFO, logger="unityagents"):
        trainer.write_summary(None)
    trainer.close()

    from recorder_stats_for_test import received

    assert received[0] == ("text", "B", 0, "Hyperparameters", {"gamma": 0.99})
    assert received[1] == ("progress", "B", 2, [1.0, 3.0])
    kind, category, step, values = received[2]
    assert (kind, category, step) == ("write", "B", 2)
    assert values["Environment/Cumulative Reward"] == values["Policy/Extrinsic Reward"] == 2.0
    assert received[3][0] == "close"
    # The built-in writers still write: the console line and the event file with the same tags.
    assert "B: Step: 2. Mean Reward: 2.000. Std of Reward: 1.000. Episodes: 2." in caplog.text
    (events,) = glob.glob(str(summaries / "events.out.tfevents.*"))
    tags = {v.tag for e in tf.compat.v1.train.summary_iterator(events) for v in e.summary.value}
    assert tags == set(values) | {"Hyperparameters"}


@pytest.mark.parametrize("target, source, why", [
    ("no_such_module_for_stats_test:make", None, "failed to load: ModuleNotFoundError"),
    ("raising_stats_for_test:make", "def make(context):\n    raise RuntimeError('no token')\n",
     "raised RuntimeError: no token"),
    ("wrong_stats_for_test:make", "def make(context):\n    return object()\n", "is not a trainers.stats.StatsWriter"),
], ids=["does-not-import", "raises", "returns-no-writer"])
def test_a_broken_writer_plugin_is_an_error_naming_it(site, target, source, why):
    if source is not None:
        install(site, target.partition(":")[0], source, {"flaky": target})
    else:
        install(site, "broken_stats_dist_for_test", "", {"flaky": target})
    with pytest.raises(StatsWriterError) as raised:
        StatsReporter.for_trainer(WriterContext("B", None))
    message = str(raised.value)
    assert "'flaky'" in message and target in message and ENTRY_POINT_GROUP in message, message
    assert why in message, message


def test_a_scenes_own_stats_are_written_under_its_names_reduced_as_it_says(site):
    install(site, "recorder_stats_scene_test", RECORDER, {"recorder": "recorder_stats_scene_test:make"})
    from runner.controller import pass_environment_stats

    trainer = Trainer(tf.compat.v1.Session(graph=tf.Graph()), {"B": brain()}, "B",
                      {"max_steps": 100, "summary_freq": 2}, True)
    # What the environment collected from the stats side channel: key -> [(value, aggregation)].
    pass_environment_stats({"entropy": [(1.0, "sum"), (2.0, "sum")],
                            "Hits": [(3.0, "most_recent"), (5.0, "most_recent")],
                            "Scene/Speed": [(1.0, "average"), (4.0, "average")], "Spread": [(2.0, "histogram")]},
                           {"B": trainer})
    trainer.add_stat("entropy", 0.5)  # the trainer's own stat of the same key keeps its tag and mean
    trainer.add_stat("entropy", 1.5)
    trainer.increment_step(2)
    trainer.write_summary(None)
    trainer.close()

    from recorder_stats_scene_test import received

    (values,) = [values for kind, _, _, values in received if kind == "write"]
    assert values["entropy"] == 3.0 and values["Hits"] == 5.0 and values["Scene/Speed"] == 2.5
    assert values["Spread"] == 2.0
    assert "Policy/entropy" not in values and "Policy/Hits" not in values


def test_the_last_reward_follows_each_new_episode_and_the_next_summary_period(tmp_path):
    """``update_last_reward`` runs every step and takes the mean only when the rewards changed:
    it still follows every appended episode, and a summary's fresh list of the same length."""
    trainer = Trainer(tf.compat.v1.Session(graph=tf.Graph()), {"B": brain()}, "B",
                      {"max_steps": 100, "summary_freq": 2, "summary_path": str(tmp_path / "summaries")}, True)
    try:
        trainer.add_stat("cumulative_reward", 1.0)
        trainer.update_last_reward()
        assert trainer.get_last_reward == 1.0
        trainer.update_last_reward()  # nothing new
        assert trainer.get_last_reward == 1.0
        trainer.add_stat("cumulative_reward", 3.0)
        trainer.update_last_reward()
        assert trainer.get_last_reward == 2.0
        trainer.increment_step(2)
        trainer.write_summary(None)  # a new period: a new, empty list of rewards
        trainer.update_last_reward()
        assert trainer.get_last_reward == 2.0  # kept while the period has no episode
        trainer.add_stat("cumulative_reward", 7.0)
        trainer.add_stat("cumulative_reward", 9.0)  # as long as the last period's list
        trainer.update_last_reward()
        assert trainer.get_last_reward == 8.0
    finally:
        trainer.close()


def test_mean_of_is_numpys_mean_bit_for_bit():
    from trainers.trainer.summaries import mean_of

    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 12, 100, 4097):
        for dtype in (np.float32, np.float64):
            for shape in ((n,), (n, 1)):
                values = (rng.standard_normal(shape) * rng.uniform(0.01, 1e4)).astype(dtype)
                assert mean_of(values) == float(np.mean(values))
