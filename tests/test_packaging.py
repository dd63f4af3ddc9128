"""The installed package, not only the clone: the wheel holds the shipped files and the code finds them.

A clone has ``trainer_configurations.yaml``, ``config/`` and ``curricula/`` beside ``learn.py``; an installed
package has them under ``unityagents_shipped/`` beside ``learn.py`` (setup.py's build_py copies them), and
``runner.options.shipped_file`` (``learn.shipped_file``) finds either, so the documented commands work from any folder.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import zipfile

import pytest

import learn
import runner.options

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: What a source tree holds that is not source: left out of the copy the wheel is built from.
NOT_SOURCE = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", "results", "models",
                                    "summaries", ".pytest_cache", ".hypothesis", ".venv", "*.pyc")


def shipped_names():
    """Every shipped file of the clone, relative to the root (what the wheel must hold)."""
    names = []
    for name in learn.SHIPPED:
        path = os.path.join(ROOT, name)
        if os.path.isfile(path):
            names.append(name)
        for folder, _, files in os.walk(path):
            names += [os.path.relpath(os.path.join(folder, f), ROOT).replace(os.sep, "/") for f in files
                      if not f.endswith(".pyc")]
    return sorted(names)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """A wheel built from a clean copy of the source tree (no stale build/ can leak into it)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(base / "dist"), str(source)], check=True, capture_output=True, timeout=300)
    (path,) = (base / "dist").glob("unity_tf_trainer-*.whl")
    return path


def test_the_wheel_holds_the_shipped_files_and_the_front_ends(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = shipped_names()
    assert "trainer_configurations.yaml" in expected and "config/ppo/3DBall.yaml" in expected
    assert "curricula/push.json" in expected
    missing = [n for n in expected if f"{learn.SHIPPED_DIR}/{n}" not in names]
    assert not missing, f"the wheel lacks the shipped files {missing}"
    for module in ("learn.py", "learn_hub.py", "learn_r22.py", "trainers/learn_r22.py", "runner/controller.py",
                   "runner/settings/run_config.py", "academy/__main__.py", "unityagents_tune/cli.py"):
        assert module in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    for script in ("learn = learn:cli", "unityagents-learn = learn_r22:cli",
                   "unityagents-tune = unityagents_tune.cli:cli",
                   "unityagents-push-to-hf = learn_hub:push_cli", "unityagents-load-from-hf = learn_hub:load_cli",
                   "unityagents-check-model = trainers.export.model_check.cli:cli"):
        assert script in text
    tables = {n for n in names if n.startswith("trainers/export/model_check/") and n.endswith(".yaml")}
    assert {"trainers/export/model_check/engines/sentis-2.1.yaml", "trainers/export/model_check/packages/"
            "ml-agents-3.x.yaml", "trainers/export/model_check/hints.yaml"} <= tables, "the model check's tables"


def test_shipped_file_finds_the_installed_copy_from_an_empty_folder(tmp_path, monkeypatch):
    installed = tmp_path / "site-packages"
    (installed / learn.SHIPPED_DIR / "config" / "ppo").mkdir(parents=True)
    (installed / learn.SHIPPED_DIR / "config" / "ppo" / "3DBall.yaml").write_text("behaviors: {}\n")
    (installed / learn.SHIPPED_DIR / "trainer_configurations.yaml").write_text("default: {}\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(runner.options, "HERE", str(installed))
    monkeypatch.chdir(empty)
    assert learn.shipped_file("config/ppo/3DBall.yaml") == str(installed / learn.SHIPPED_DIR / "config/ppo/3DBall.yaml")
    assert learn.shipped_file("trainer_configurations.yaml") == str(
        installed / learn.SHIPPED_DIR / "trainer_configurations.yaml")
    # Not shipped: the path as given (the caller's error names it).
    assert learn.shipped_file("config/ppo/Nope.yaml") == "config/ppo/Nope.yaml"
    assert learn.shipped_file("mine.yaml") == "mine.yaml"
    # The user's own file of the same name wins.
    (empty / "config" / "ppo").mkdir(parents=True)
    (empty / "config" / "ppo" / "3DBall.yaml").write_text("behaviors: {}\n")
    assert learn.shipped_file("config/ppo/3DBall.yaml") == "config/ppo/3DBall.yaml"


def test_shipped_file_finds_the_clones_copy_from_another_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert learn.shipped_file("curricula/push.json") == os.path.join(learn.HERE, "curricula", "push.json")
    assert learn.shipped_file("trainer_configurations.yaml") == os.path.join(learn.HERE, "trainer_configurations.yaml")


@pytest.mark.slow
def test_installed_commands_run_from_an_empty_folder(wheel, tmp_path):
    """pip installs the wheel (no dependencies: they are this interpreter's), and from an empty folder the
    front ends find the shipped files: ``unityagents-learn`` checks a shipped run config, and
    ``learn 3DBall --train`` trains with the default configuration until Ctrl-C, which saves the run."""
    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    work = tmp_path / "empty"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(target))
    bin_dir = target / "bin"

    def run(*argv, **kw):
        return subprocess.run([str(bin_dir / argv[0]), *argv[1:]], cwd=work, env=env, capture_output=True,
                              text=True, timeout=300, **kw)

    where = run("unityagents-push-to-hf", "--help")
    assert where.returncode == 0 and "--repo-id" in where.stdout
    probe = subprocess.run([sys.executable, "-c", "import learn; print(learn.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == str(target / "learn.py")
    dry = run("unityagents-learn", "config/ppo/3DBall.yaml", "--env=3DBall", "--run-id=x", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "  3DBall:" in dry.stdout and os.path.join(learn.SHIPPED_DIR, "config") in dry.stderr

    proc = subprocess.Popen([str(bin_dir / "learn"), "3DBall", "--train", "--base-port", "5391"], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "Ball3DBrain: Step:" in line:
                proc.send_signal(signal.SIGINT)
                break
        rest, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = "".join(lines) + rest
    assert proc.returncode == 0, log
    assert os.path.join(learn.SHIPPED_DIR, "trainer_configurations.yaml") in log
    assert (work / "models" / "ppo" / "3DBall.bytes").is_file(), log
