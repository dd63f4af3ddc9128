"""``unityagents.registry``: mlagents_envs' registry, handing out the built-in scenes offline."""
from __future__ import annotations

import socket

import pytest

from unityagents.exception import UnityEnvironmentException
from unityagents.registry import BaseRegistryEntry, LocalRegistryEntry, UnityEnvRegistry, default_registry


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_built_in_scene_is_listed_under_unity_s_example_name():
    import academy

    unity = {scene: alias for alias, scene in academy.SCENE_ALIASES.items()}
    assert sorted(default_registry) == sorted(unity.get(s, s) for s in academy.SCENES)
    assert {"3DBall", "Basic", "PushBlock", "SoccerTwos", "Tennis"} <= set(default_registry)
    for name in default_registry:
        entry = default_registry[name]
        assert isinstance(entry, BaseRegistryEntry) and entry.identifier == name and entry.description
        if entry.expected_reward is not None:  # measured on the built-in scene, and said so
            assert f"python -m academy {entry.scene} --episodes 20" in entry.description
    assert default_registry["Basic"].expected_reward == pytest.approx(0.94)
    assert default_registry["SoccerTwos"].expected_reward is None  # self-play: no fixed reward marks it solved


def test_the_registry_is_a_read_only_mapping_and_a_wrong_name_gets_the_names():
    with pytest.raises(TypeError):
        default_registry["Mine"] = default_registry["Basic"]
    with pytest.raises(KeyError, match=r"'3Dball' is not present.*Did you mean '3DBall'\?.*Basic"):
        default_registry["3Dball"]
    with pytest.raises(KeyError, match="Did you mean 'SoccerTwos'"):
        default_registry["Soccer"]


def test_make_starts_the_scene_with_the_modern_protocol():
    from unityagents.envs.unity_parallel_env import UnityParallelEnv
    from unityagents.side_channels import EngineConfigurationChannel

    channel = EngineConfigurationChannel()
    env = default_registry["Basic"].make(base_port=free_port(), seed=0, side_channels=[channel])
    try:
        assert list(env.behavior_specs) == ["Basic?team=0"] and env.protocol == "grpc"
        channel.set_configuration_parameters(time_scale=5.0)
        env.reset()
        decisions, _ = env.get_steps("Basic?team=0")
        assert len(decisions) == 1 and channel.message_queue == []  # sent with the reset
        assert UnityParallelEnv(env).side_channel == {"EngineConfigurationChannel": channel}
    finally:
        env.close()


def test_a_user_s_own_builds_from_yaml(tmp_path):
    (tmp_path / "builds").mkdir()
    (tmp_path / "builds" / "Mine.x86_64").write_text("")
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        "environments:\n"
        "  - MyBasic:\n      expected_reward: 0.9\n      description: my copy\n      file_name: Basic\n"
        "  - Mine:\n      expected_reward: null\n      description: a build\n      file_name: builds/Mine.x86_64\n"
        "      additional_args: ['-screen-width', '84']\n")
    registry = UnityEnvRegistry()
    registry.register_from_yaml(str(manifest))
    assert sorted(registry) == ["Mine", "MyBasic"] and len(registry) == 2
    mine = registry["Mine"]
    assert isinstance(mine, LocalRegistryEntry) and mine.file_name == str(tmp_path / "builds" / "Mine.x86_64")
    env = registry["MyBasic"].make(base_port=free_port(), seed=0, protocol="grpc")
    try:
        assert list(env.behavior_specs) == ["Basic?team=0"]
    finally:
        env.close()
    registry.clear()
    assert len(registry) == 0


def test_what_the_registry_cannot_do_is_said(tmp_path):
    registry = UnityEnvRegistry()
    with pytest.raises(UnityEnvironmentException, match="downloads nothing"):
        registry.register_from_yaml("https://example.invalid/manifest.yaml")
    remote = tmp_path / "remote.yaml"
    remote.write_text("environments:\n  - Far:\n      expected_reward: 1\n      description: x\n"
                      "      linux_url: https://example.invalid/Far.zip\n")
    registry.register_from_yaml(str(remote))
    with pytest.raises(UnityEnvironmentException, match=r"'Far' names no file_name.*Far\.zip.*download and unzip"):
        len(registry)
    with pytest.raises(UnityEnvironmentException, match="BaseRegistryEntry"):
        registry.register("Basic")


def test_the_environments_page_lists_the_registry_as_it_is():
    import os
    import re

    page = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "environments.md")).read()
    section = page[page.index("## The registry"):page.index("## Pictures")]
    rows = {m[0]: (m[1], m[2]) for m in re.findall(r"^\| (\S+) \| (\S+) \| ([^|]+?) \|$", section, re.M)
            if m[0] not in ("registry", "---")}
    assert sorted(rows) == sorted(default_registry)
    for name, (scene, reward) in rows.items():
        entry = default_registry[name]
        assert entry.scene == scene
        assert (entry.expected_reward is None) if reward.startswith("none") else entry.expected_reward == float(reward)
