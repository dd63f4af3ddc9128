"""What a trainer writes for people: the console line and TensorBoard summaries, every ``summary_freq`` steps
and once more when the run ends (``write_final_summary``), so that no statistic gathered is lost.

``TrainerSummaries`` is mixed into ``trainers.trainer.base.Trainer``: a trainer records values with
``add_stat``, and ``write_summary`` writes each key's mean under the tags of ``SUMMARY_TAGS``, the
names ML-Agents Release 22 gives the same quantities; the scene's own stats, which the controller
records with their aggregation, go under the scene's names, reduced as the scene said.
Everything goes through the trainer's ``trainers.stats.StatsReporter`` (TensorBoard, the console,
writer plugins); no graph op is involved, so summaries are safe after ``finalize``.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any, Dict, Mapping, Optional

import numpy as np

logger = logging.getLogger("unityagents")


def mean_of(values: np.ndarray) -> float:
    """``float(np.mean(values))`` of a float array, bit for bit, without ``np.mean``'s Python layers:
    the stats a policy records at every decision (its value estimates, its entropy) cost less."""
    total = np.add.reduce(values, axis=None)
    return float(total.dtype.type(total / values.size))


class TrainerSummaries:
    """Recording and writing summaries; the ``Trainer`` sets up the state it reads in ``__init__``.

    It reads ``stats`` (under ``_stats_lock``), ``episode_rewards``, ``episodes_completed``, ``step``, ``brain_name``,
    ``_context.summary_path``, ``settings.summary_freq``, ``sess``, ``is_training`` and
    ``get_max_steps``.
    """

    @property
    def stats_reporter(self):
        """The ``trainers.stats.StatsReporter`` every summary goes through (TensorBoard, console, plugins)."""
        if self._stats_reporter is None:
            from trainers.stats import StatsReporter, WriterContext

            self._stats_reporter = StatsReporter.for_trainer(WriterContext(
                self.brain_name, self._context.summary_path, self.sess, self.is_training))
        return self._stats_reporter

    def add_stat(self, key: str, value: float, aggregation: Optional[str] = None) -> None:
        """Record ``value`` under ``key`` for the next summary, which writes the mean of a key's
        values under its ``summary_tag``.

        ``aggregation`` marks a scene's own stat (the controller passes what the scene sent), kept
        apart from the trainer's: its key is its tag, as the scene named it, and its values are
        reduced as it says: ``average``, ``sum`` or ``most_recent`` (a ``histogram`` is written as
        its average). Safe from a ``threaded`` trainer's background update, which records its
        losses while the controller's thread writes summaries.
        """
        with self._stats_lock:
            if aggregation is not None:
                self._scene_stats.setdefault(key, (aggregation, []))[1].append(float(value))
                return
            self.stats.setdefault(key, []).append(float(value))
        if key == "cumulative_reward":  # the episodes a curriculum's reward criteria look at
            self.episode_rewards.append(float(value))
            self.episodes_completed += 1

    def _write_scalars(self, values: Mapping[str, float], step: Optional[int] = None) -> None:
        """Write scalar summaries (no graph ops, so safe after ``finalize``)."""
        self.stats_reporter.write(self.step if step is None else step, values)

    def write_tensorboard_text(self, key: str, input_dict: Mapping[str, Any]) -> None:
        """Write a two-column table (e.g. the hyperparameters) to TensorBoard's text tab."""
        self.stats_reporter.write_text(self.step, key, input_dict)

    def _summary_due(self) -> bool:
        """True once per ``summary_freq`` agent steps."""
        freq = int(self.settings.summary_freq)
        return self.step // freq > self._last_summary_step // freq

    @property
    def _writes_signal_rewards(self) -> bool:
        """Whether the trainer writes ``Policy/<Signal> Reward`` itself (a ``reward_signals``
        block); otherwise the extrinsic reward is the episode's reward and is written as such."""
        return False

    def write_summary(self, lesson: Any = None) -> None:
        """Every ``summary_freq`` agent steps: a console line and the mean of each stat.

        ``lesson``: parameter -> lesson index of the curriculum (``lesson_tags``), or None.
        """
        if self._summary_due():
            self._write_summary(lesson)

    def write_final_summary(self, lesson: Any = None) -> None:
        """At the end of a run (``max_steps``, Ctrl-C, SIGTERM, the Editor leaving, a failed environment):
        what was gathered since the last summary, at the step reached, so a run shorter than
        ``summary_freq`` still has its reward in TensorBoard; nothing when nothing was gathered since."""
        with self._stats_lock:
            pending = any(self.stats.values()) or any(v for _, v in self._scene_stats.values())
        if pending and self.step > self._last_summary_step:
            self._write_summary(lesson)

    def _write_summary(self, lesson: Any) -> None:
        self._last_summary_step = self.step
        with self._stats_lock:  # a background update may be adding its losses
            stats, self.stats = self.stats, {}
            scene_stats, self._scene_stats = self._scene_stats, {}
        rewards = stats.get("cumulative_reward", [])
        elapsed = time.time() - self._start_time
        rate = (self.step - self._start_step) / elapsed if elapsed > 0 else 0.0
        remaining = max(self.get_max_steps - self.step, 0)
        eta = remaining / rate if rate > 0 else math.inf
        from trainers.stats import Progress

        self.stats_reporter.write_progress(self.step, Progress(rewards, rate, elapsed, eta, self.is_training))
        reduce = {"sum": np.sum, "most_recent": lambda v: v[-1]}
        values = {summary_tag(k): float(np.mean(v)) for k, v in stats.items() if v}
        if "Environment/Cumulative Reward" in values and not self._writes_signal_rewards:
            values["Policy/Extrinsic Reward"] = values["Environment/Cumulative Reward"]
        values.update(lesson_tags(lesson))
        values["Environment/Agent Steps Per Second"] = rate
        for key, (aggregation, entries) in scene_stats.items():  # last, under the scene's own names
            values[key] = float(reduce.get(aggregation, np.mean)(entries))
        self._write_scalars(values)

    def close(self) -> None:
        """Flush and close the summary writers."""
        if self._stats_reporter is not None:
            self._stats_reporter.close()
            self._stats_reporter = None


#: TensorBoard tag of each stat key a trainer records with ``add_stat``: ML-Agents Release 22's
#: names where it has the same quantity, so that dashboards and scripts written for it read these
#: runs; the rest sit in the same groups under names of their own.
SUMMARY_TAGS: Dict[str, str] = {
    "cumulative_reward": "Environment/Cumulative Reward",
    "episode_length": "Environment/Episode Length",
    "entropy": "Policy/Entropy",
    "value_estimate": "Policy/Extrinsic Value Estimate",
    "learning_rate": "Policy/Learning Rate",
    "epsilon": "Policy/Epsilon",
    "beta": "Policy/Beta",
    "policy_loss": "Losses/Policy Loss",
    "value_loss": "Losses/Value Loss",
    "policy_entropy": "Losses/Update Entropy",
    "approx_kl": "Policy/Approx KL",
    "clip_fraction": "Policy/Clip Fraction",
    "loss": "Losses/Pretraining Loss",
    "bc_loss": "Losses/Pretraining Loss",
    "bc_learning_rate": "Policy/Pretraining Learning Rate",
    "accuracy": "Policy/Cloning Accuracy",
    "teacher_reward": "Environment/Teacher Cumulative Reward",
}


def summary_tag(key: str) -> str:
    """The TensorBoard tag of stat ``key``: ``SUMMARY_TAGS``, else ``Policy/<key>`` as given."""
    return SUMMARY_TAGS.get(key, key if "/" in key else f"Policy/{key}")


def lesson_tags(lesson: Any) -> Dict[str, float]:
    """``Environment/Lesson Number/<parameter>`` per curriculum parameter, as ML-Agents names them.

    ``lesson`` is a mapping parameter -> lesson index (each parameter on its own track), or None
    (no curriculum: no tag). A bare integer (a caller written for one shared track) has no
    parameter name and is written as ``Environment/Lesson Number``.
    """
    if lesson is None:
        return {}
    if isinstance(lesson, Mapping):
        return {f"Environment/Lesson Number/{name}": float(n) for name, n in lesson.items()}
    return {"Environment/Lesson Number": float(lesson)}

