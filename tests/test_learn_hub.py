"""unityagents-push-to-hf / unityagents-load-from-hf up to the library call: the folder, config.json, the model
card and its metadata, the files uploaded, with ``huggingface_hub``'s HfApi replaced by a recording fake."""
from __future__ import annotations

import json
import os
import sys

import huggingface_hub
import pytest
import yaml

import learn_hub

R22_RUN = {
    "default_settings": None,
    "behaviors": {"PyramidsBrain": {"trainer_type": "ppo", "max_steps": 250000,
                                    "hyperparameters": {"batch_size": 256, "learning_rate": 0.0003}}},
    "env_settings": {"env_path": "Pyramids", "num_envs": 1, "seed": 0},
    "checkpoint_settings": {"run_id": "pyr", "results_dir": "results"},
}


def write_run(folder, config, files=("Pyramids.bytes", "PyramidsBrain.onnx", "checkpoints/model-2000.cptk.index",
                                     "run_logs/timers.json", "PyramidsBrain/PyramidsBrain-2000.onnx")):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "configuration.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"x" * 7)
    return folder


class RecordingApi:
    """HfApi's two calls the push makes, recorded with the folder as it is when the upload is asked for."""

    calls = []
    fail_with = None

    def create_repo(self, repo_id, **kw):
        RecordingApi.calls.append(("create_repo", repo_id, kw))
        if RecordingApi.fail_with is not None:
            raise RecordingApi.fail_with
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, **kw):
        folder = kw["folder_path"]
        snapshot = {os.path.relpath(os.path.join(d, f), folder).replace(os.sep, "/")
                    for d, _, fs in os.walk(folder) for f in fs}
        RecordingApi.calls.append(("upload_folder", kw, snapshot))


@pytest.fixture
def hub(monkeypatch):
    RecordingApi.calls = []
    RecordingApi.fail_with = None
    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_test")
    return RecordingApi


def front_matter(card):
    assert card.startswith("---\n")
    head, _, body = card[4:].partition("\n---\n")
    return yaml.safe_load(head), body


def test_push_writes_config_json_and_the_card_then_uploads_the_whole_folder(tmp_path, hub, capsys):
    run = write_run(tmp_path / "results" / "pyr", R22_RUN)
    code = learn_hub.push_main(["--run-id", "pyr", "--local-dir", str(run), "--repo-id", "me/ppo-Pyramids",
                                "--commit-message", "first push"])
    assert code == 0
    (create, repo_id, kw), (upload, up, uploaded) = hub.calls
    assert (create, repo_id, kw) == ("create_repo", "me/ppo-Pyramids", {"exist_ok": True})
    assert upload == "upload_folder"
    assert up == {"repo_id": "me/ppo-Pyramids", "folder_path": str(run), "commit_message": "first push"}
    assert uploaded == {"configuration.yaml", "config.json", "README.md", "Pyramids.bytes", "PyramidsBrain.onnx",
                        "checkpoints/model-2000.cptk.index", "run_logs/timers.json",
                        "PyramidsBrain/PyramidsBrain-2000.onnx"}
    assert json.loads((run / "config.json").read_text()) == R22_RUN
    meta, body = front_matter((run / "README.md").read_text())
    assert meta == {"library_name": "ml-agents", "tags": ["Pyramids", "deep-reinforcement-learning",
                                                          "reinforcement-learning", "ML-Agents-Pyramids"]}
    assert "# ppo agent for Pyramids" in body and "`PyramidsBrain`" in body and "unityagents-learn" in body
    assert ("unityagents-learn ./downloads/ppo-Pyramids/configuration.yaml --env=Pyramids "
            "--results-dir=./downloads --run-id=ppo-Pyramids --resume") in body
    assert "unityagents-load-from-hf --repo-id=me/ppo-Pyramids" in body
    assert "https://huggingface.co/me/ppo-Pyramids" in capsys.readouterr().out


def test_a_learn_run_gets_its_trainer_the_env_of_its_bytes_and_learns_resume_command(tmp_path, hub):
    flat = {"TennisBrain": {"trainer": "ppo", "max_steps": 6e5}, "ghost-TennisBrain": {"is_ghost": True}}
    run = write_run(tmp_path / "models" / "tennis", flat, files=("Tennis.bytes",))
    assert learn_hub.push_main(["--local-dir", str(run), "--repo-id", "me/tennis"]) == 0
    meta, body = front_matter((run / "README.md").read_text())
    assert meta["tags"] == ["Tennis", "deep-reinforcement-learning", "reinforcement-learning", "ML-Agents-Tennis"]
    assert "# ppo agent for Tennis" in body and "learn Tennis --train --load --run-path=tennis" in body
    assert hub.calls[1][1]["commit_message"] == "Push to Hub"  # Release 22's default


def test_without_a_frozen_graph_or_a_build_the_env_is_the_first_behavior_as_in_release_22(tmp_path):
    config = {"behaviors": {"Walker?team=0": {"trainer_type": "sac"}}}
    run = write_run(tmp_path / "run", config, files=())
    info = learn_hub.describe(str(run), config)
    assert info == {"env": "Walker", "behavior": "Walker?team=0", "trainer": "sac", "front_end": "unityagents-learn"}
    config["env_settings"] = {"env_path": "builds/Crawler.x86_64"}
    assert learn_hub.describe(str(run), config)["env"] == "Crawler"


def test_dry_run_lists_the_upload_and_prints_the_card_and_touches_nothing(tmp_path, monkeypatch, capsys):
    def no_api(*a, **kw):
        raise AssertionError("--dry-run reached the Hub")

    monkeypatch.setattr(huggingface_hub, "HfApi", no_api)
    run = write_run(tmp_path / "pyr", R22_RUN)
    before = sorted(os.listdir(run))
    assert learn_hub.push_main(["--local-dir", str(run), "--repo-id", "me/ppo-Pyramids", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert sorted(os.listdir(run)) == before
    for name in ("configuration.yaml", "Pyramids.bytes", "checkpoints/model-2000.cptk.index",
                 "config.json  (written by this command)", "README.md  (written by this command)"):
        assert f"  {name}" in out
    assert "library_name: ml-agents" in out and "- ML-Agents-Pyramids" in out


def test_without_a_token_one_line_and_exit_1_and_nothing_written(tmp_path, hub, monkeypatch, capsys):
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    run = write_run(tmp_path / "pyr", R22_RUN)
    assert learn_hub.push_main(["--local-dir", str(run), "--repo-id", "me/x"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Hugging Face token" in err and "hf auth login" in err
    assert not (run / "README.md").exists() and hub.calls == []


def test_offline_one_line_and_exit_1(tmp_path, hub, capsys):
    hub.fail_with = huggingface_hub.errors.OfflineModeIsEnabled("Cannot reach https://huggingface.co: offline mode")
    run = write_run(tmp_path / "pyr", R22_RUN)
    assert learn_hub.push_main(["--local-dir", str(run), "--repo-id", "me/x"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "OfflineModeIsEnabled" in err and "could not be reached" in err


def test_refusals_name_the_fix(tmp_path, hub, monkeypatch, capsys):
    with pytest.raises(SystemExit) as bad:
        learn_hub.push_main(["--repo-id", "no-slash", "--local-dir", str(tmp_path)])
    assert bad.value.code == 2 and "exactly one '/'" in capsys.readouterr().err
    assert learn_hub.push_main(["--repo-id", "me/x", "--local-dir", str(tmp_path)]) == 1
    assert "must be a run's folder" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    run = write_run(tmp_path / "pyr", R22_RUN)
    assert learn_hub.push_main(["--repo-id", "me/x", "--local-dir", str(run)]) == 1
    err = capsys.readouterr().err
    assert "pip install 'unity-tf-trainer[hub]'" in err and "pip install 'unityagents" not in err


def test_load_downloads_into_the_repository_name(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **kw: calls.append(kw) or kw["local_dir"])
    assert learn_hub.load_main(["--repo-id", "me/ppo-Pyramids", "--local-dir", str(tmp_path)]) == 0
    assert calls == [{"repo_id": "me/ppo-Pyramids", "local_dir": os.path.join(str(tmp_path), "ppo-Pyramids")}]
    assert "has been downloaded to" in capsys.readouterr().out

    def offline(**kw):
        raise huggingface_hub.errors.OfflineModeIsEnabled("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    assert learn_hub.load_main(["--repo-id", "me/ppo-Pyramids", "--local-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "could not download me/ppo-Pyramids" in err


def test_the_cards_install_line_is_the_distribution_by_name_or_the_repository_it_came_from(tmp_path, monkeypatch):
    """The card's reader installs this project, not Unity's 2018 ``unityagents`` that owns that name."""
    import importlib.metadata as metadata

    config = {"behaviors": {"Walker": {"trainer_type": "sac"}}}
    info = learn_hub.describe(str(write_run(tmp_path / "run", config, files=())), config)

    class Installed:
        version = "0.3.0"

        def __init__(self, direct_url):
            self.direct_url = direct_url

        def read_text(self, name):
            return json.dumps(self.direct_url) if name == "direct_url.json" and self.direct_url else None

    for direct_url in (None, {"url": "file:///home/me/clone", "dir_info": {"editable": True}}):
        monkeypatch.setattr(metadata, "distribution", lambda name, d=direct_url: Installed(d))
        body = learn_hub.model_card(info, "me/walker", None)
        assert "pip install 'unity-tf-trainer[hub]'\n" in body and "unityagents[" not in body
    git = {"url": "https://github.com/someone/project", "vcs_info": {"vcs": "git", "commit_id": "abc123"}}
    monkeypatch.setattr(metadata, "distribution", lambda name: Installed(git))
    assert ("pip install 'unity-tf-trainer[hub] @ git+https://github.com/someone/project@abc123'\n"
            in learn_hub.model_card(info, "me/walker", None))
