"""Where a trainer's summaries go: a ``StatsReporter`` per trainer, handing them to every ``StatsWriter``.

A trainer reports three things, all through its reporter (``Trainer.stats_reporter``):

* ``write(step, values)``: scalars by tag (``Environment/Cumulative Reward``, ``Losses/...``),
  every ``summary_freq`` agent steps and when a lesson changes;
* ``write_text(step, key, table)``: a two-column table once per run (the hyperparameters);
* ``write_progress(step, progress)``: the numbers behind the console's progress line.

Each writer takes what it can show and ignores the rest: the built-in ``TensorBoardWriter`` writes
scalars and tables as event files in the trainer's ``summary_path`` (created on the first
write), the ``ConsoleWriter`` logs the progress line. Writers come from factories registered
under the entry-point group ``unityagents.stats_writers``, the built-ins included, so that a
plugin package adds a destination with one line in its ``setup.py``::

    entry_points={"unityagents.stats_writers": ["csv = my_plugin.csv_stats:make_writer"]}

A factory is called once per trainer with a ``WriterContext`` and returns a ``StatsWriter`` (or
None to stay out of that trainer's summaries). A factory that fails to import, raises, or returns
something else stops the run at its start with an error naming the entry point: a destination
that silently receives nothing would be found out only after the run.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from unityagents.exception import UnityException

logger = logging.getLogger("unityagents")

ENTRY_POINT_GROUP = "unityagents.stats_writers"
Factory = Callable[["WriterContext"], Optional["StatsWriter"]]


class StatsWriterError(UnityException):
    """A stats writer plugin cannot be used; the message names its entry point."""

#: Used when this project runs from a checkout whose installed metadata does not list them.
_BUILTINS = {
    "console": "trainers.stats:console_writer",
    "tensorboard": "trainers.stats:tensorboard_writer",
}


@dataclass(frozen=True)
class WriterContext:
    """What a writer factory knows of the trainer it writes for.

    :param category: the brain (behaviour) name; every write of this trainer carries it.
    :param summary_path: the trainer's summary folder, or None when the run writes no files.
    :param sess: the run's session (its graph), or None.
    :param training: False when the run only acts.
    """

    category: str
    summary_path: Optional[str]
    sess: Any = None
    training: bool = True


@dataclass(frozen=True)
class Progress:
    """The numbers of one progress line: the episode rewards since the last summary, the speed
    in agent steps per second, and the seconds elapsed and (when training) still to go."""

    rewards: Sequence[float]
    rate: float
    elapsed: float
    eta: float
    training: bool


class StatsWriter:
    """One destination of summaries. Override what the destination can show; the rest is ignored."""

    def write(self, category: str, step: int, values: Mapping[str, float]) -> None:
        """Scalars by tag at agent step ``step``."""

    def write_text(self, category: str, step: int, key: str, table: Mapping[str, Any]) -> None:
        """A two-column table (key, value) under ``key``."""

    def write_progress(self, category: str, step: int, progress: Progress) -> None:
        """The numbers of one progress line."""

    def close(self) -> None:
        """Flush and release what the writer holds; called once, at the end of the run."""


class TensorBoardWriter(StatsWriter):
    """Event files in ``path``, written as protos (no graph ops, so safe after the graph is finalized)."""

    def __init__(self, path: str, sess: Any = None):
        self.path = path
        self.sess = sess
        self._writer = None

    @property
    def file_writer(self):
        """The ``FileWriter`` on ``path``, created (with the folder) on first use."""
        if self._writer is None:
            from trainers.tf_utils import tf

            os.makedirs(self.path, exist_ok=True)
            graph = self.sess.graph if self.sess is not None else tf.Graph()
            with graph.as_default():  # FileWriter refuses eager mode; it adds no op
                self._writer = tf.summary.FileWriter(self.path)
        return self._writer

    def write(self, category: str, step: int, values: Mapping[str, float]) -> None:
        from trainers.tf_utils import tf

        summary = tf.Summary()
        for tag, value in values.items():
            summary.value.add(tag=tag, simple_value=float(value))
        self.file_writer.add_summary(summary, step)
        self.file_writer.flush()

    def write_text(self, category: str, step: int, key: str, table: Mapping[str, Any]) -> None:
        """TensorBoard's text tab shows the table as markdown."""
        from trainers.tf_utils import tf

        rows = [f"| {k} | {v} |" for k, v in sorted(table.items())]
        text = "\n".join(["| key | value |", "|---|---|"] + rows)
        tensor = tf.make_tensor_proto(text.encode())  # a DT_STRING scalar
        metadata = tf.SummaryMetadata(plugin_data=tf.SummaryMetadata.PluginData(plugin_name="text"))
        summary = tf.Summary()
        summary.value.add(tag=key, metadata=metadata, tensor=tensor)
        self.file_writer.add_summary(summary, step)
        self.file_writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class ConsoleWriter(StatsWriter):
    """The progress line in the log: reward statistics, speed, elapsed time and time to go."""

    def write_progress(self, category: str, step: int, progress: Progress) -> None:
        rewards = progress.rewards
        reward_text = (
            f"Mean Reward: {np.mean(rewards):.3f}. Std of Reward: {np.std(rewards):.3f}. Episodes: {len(rewards)}."
            if len(rewards)
            else "No episode completed since the last summary."
        )
        logger.info(
            "%s: Step: %d. %s %.0f agent-steps/s. Elapsed: %s. ETA: %s.",
            category, step, reward_text, progress.rate, hms(progress.elapsed),
            hms(progress.eta) if progress.training else "-",
        )


def tensorboard_writer(context: WriterContext) -> Optional[StatsWriter]:
    """The built-in TensorBoard destination; none for a trainer without a summary folder."""
    return TensorBoardWriter(context.summary_path, context.sess) if context.summary_path else None


def console_writer(context: WriterContext) -> StatsWriter:
    """The built-in console destination."""
    return ConsoleWriter()


def hms(seconds: float) -> str:
    """``H:MM:SS``, or ``?`` for an unknown (infinite) duration."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class StatsReporter:
    """A trainer's summaries, handed to each of its writers (in the factories' name order)."""

    def __init__(self, category: str, writers: Sequence[StatsWriter]):
        self.category = category
        self.writers: List[StatsWriter] = list(writers)

    @classmethod
    def for_trainer(cls, context: WriterContext, group: str = ENTRY_POINT_GROUP) -> "StatsReporter":
        """A reporter with one writer per registered factory (those that return one for ``context``)."""
        writers = []
        for name, target, factory in writer_factories(group):
            try:
                writer = factory(context)
            except Exception as e:
                raise _broken(name, target, f"calling it raised {type(e).__name__}: {e}") from e
            if writer is None:
                continue
            if not isinstance(writer, StatsWriter):
                raise _broken(name, target, f"it returned {writer!r}, which is not a trainers.stats.StatsWriter")
            writers.append(writer)
        return cls(context.category, writers)

    def write(self, step: int, values: Mapping[str, float]) -> None:
        for w in self.writers:
            w.write(self.category, step, values)

    def write_text(self, step: int, key: str, table: Mapping[str, Any]) -> None:
        for w in self.writers:
            w.write_text(self.category, step, key, table)

    def write_progress(self, step: int, progress: Progress) -> None:
        for w in self.writers:
            w.write_progress(self.category, step, progress)

    def close(self) -> None:
        for w in self.writers:
            w.close()


def writer_factories(group: str = ENTRY_POINT_GROUP) -> List[Tuple[str, str, Factory]]:
    """``(name, target, factory)`` of every writer factory: the group's entry points, then the
    built-ins the installed metadata does not list, sorted by name."""
    found: Dict[str, Tuple[str, str, Factory]] = {}
    for ep in entry_points(group=group):
        try:
            factory = ep.load()
        except Exception as e:
            raise _broken(ep.name, ep.value, f"it failed to load: {type(e).__name__}: {e}") from e
        found[ep.name] = (ep.name, ep.value, factory)
    for name, target in _BUILTINS.items():
        if name not in found:
            found[name] = (name, target, _load(target))
    for name, target, factory in found.values():
        if not callable(factory):
            raise _broken(name, target, f"it is {factory!r}, not a callable taking a WriterContext")
    return [found[name] for name in sorted(found)]


def _load(target: str) -> Factory:
    import importlib

    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _broken(name: str, target: str, why: str) -> StatsWriterError:
    return StatsWriterError(
        f"The stats writer plugin {name!r} ({target}, entry-point group '{ENTRY_POINT_GROUP}') is broken: {why}. "
        "A writer factory takes a trainers.stats.WriterContext and returns a trainers.stats.StatsWriter (or "
        "None); fix the plugin, or uninstall its package to train without it.")
