"""TensorBoard reads what a run writes: every tag, through its own event reader and its own server.

The README promises ``tensorboard --logdir summaries`` after the set-up command, and
docs/getting-started.md documents the summary tags; a short ``learn.py Basic --train`` must produce
exactly tags that TensorBoard shows.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import time
import urllib.request

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.conftest import copy_run, free_port
from trainers.tf_utils import tf

ROOT = __file__.rsplit("/tests/", 1)[0]
#: What every PPO brain writes at each summary (docs/getting-started.md, "TensorBoard").
#: ML-Agents Release 22's names where it has the same quantity.
PPO_TAGS = {"Environment/Cumulative Reward", "Environment/Episode Length", "Policy/Extrinsic Value Estimate",
            "Policy/Extrinsic Reward", "Policy/Entropy", "Losses/Policy Loss", "Losses/Value Loss",
            "Losses/Update Entropy", "Policy/Approx KL", "Policy/Clip Fraction", "Policy/Learning Rate",
            "Policy/Epsilon", "Policy/Beta",
            "Environment/Agent Steps Per Second"}


def written_tags(event_file: str) -> dict:
    """tag -> number of values, read with TensorFlow's own record reader (what the run wrote)."""
    counts: dict = {}
    for event in tf.train.summary_iterator(event_file):
        for value in event.summary.value:
            counts[value.tag] = counts.get(value.tag, 0) + 1
    return counts


@pytest.mark.slow
def test_tensorboard_reads_every_tag_the_run_wrote(tmp_path, basic_short_run):
    copy_run(basic_short_run[0], tmp_path)  # 3000 steps, a summary every 1000
    (run_dir,) = glob.glob(str(tmp_path / "summaries" / "*"))
    (event_file,) = glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))
    written = written_tags(event_file)
    assert PPO_TAGS <= set(written), sorted(PPO_TAGS - set(written))
    assert written["Environment/Cumulative Reward"] == 3  # one value per summary_freq

    reader = EventAccumulator(run_dir, size_guidance={"scalars": 0, "tensors": 0})
    reader.Reload()
    tags = reader.Tags()
    seen = set(tags["scalars"]) | set(tags["tensors"])
    assert seen == set(written), (sorted(set(written) - seen), sorted(seen - set(written)))
    for tag in tags["scalars"]:
        assert len(reader.Scalars(tag)) == written[tag], tag
    assert "Hyperparameters" in tags["tensors"]  # the text tab's table

    guide = open(os.path.join(ROOT, "docs", "getting-started.md")).read()
    undocumented = sorted(t for t in written if f"`{t}`" not in guide)
    assert not undocumented, f"tags missing from docs/getting-started.md's TensorBoard section: {undocumented}"

    # The README's command, as a user runs it: the server lists the run and its tags.
    assert shutil.which("tensorboard"), "requirements.txt must install the tensorboard command"
    port = free_port()
    proc = subprocess.Popen([shutil.which("tensorboard"), "--logdir", "summaries", "--host", "127.0.0.1",
                             "--port", str(port)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, served = time.time() + 120, None
        while time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/tags", timeout=5) as r:
                    served = json.loads(r.read())
                if served:
                    break
            except OSError:
                time.sleep(0.5)
        errors = proc.stderr.read().decode()[-2000:] if proc.poll() is not None else ""
        assert served, f"tensorboard did not serve the tags: {errors}"
        assert set(served) == {os.path.basename(run_dir)}
        assert set(served[os.path.basename(run_dir)]) == set(tags["scalars"])
    finally:
        proc.kill()
        proc.wait()
