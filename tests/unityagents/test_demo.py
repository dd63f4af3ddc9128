"""``.demo`` files: the layout ``academy --record-demo`` writes, reading them back, and bad input.

The layout test parses a recorded file with the generated message classes and protobuf's varint
decoder only, so it checks the bytes against Unity's format rather than against our own reader.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
from google.protobuf.internal.decoder import _DecodeVarint32

from academy import load_scene
from academy.academy import Academy
from academy.demo_recorder import DemonstrationWriter, brain_parameters_proto, record_demonstration
from tests.conftest import ROOT
from unityagents.brain import BrainParameters
from unityagents.demo import DemonstrationError, load_demonstration
from unityagents.wire.protos import communicator_objects_pb2 as pb


def _record(tmp_path, scene: str, episodes: int, name: str = "rec.demo", seed: int = 0) -> str:
    path = str(tmp_path / name)
    record_demonstration(Academy(load_scene(scene)(seed)), load_scene(scene).brains[0].name, path, episodes)
    return path


def _brain(scene: str) -> BrainParameters:
    spec = load_scene(scene).brains[0]
    return BrainParameters(spec.name, spec.parameters_json())


def test_recorded_file_has_unitys_layout(tmp_path):
    path = str(tmp_path / "pyramids.demo")
    out = subprocess.run([sys.executable, "-m", "academy", "Pyramids", "--record-demo", path,
                          "--brain", "PyramidsBrain=heuristic", "--episodes", "3"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    printed_mean = float(out.stdout.split("mean_reward PyramidsBrain ")[1].split()[0])
    data = open(path, "rb").read()

    size, start = _DecodeVarint32(data, 0)
    meta = pb.DemonstrationMetaProto.FromString(data[start:start + size])
    assert start + size <= 33 and data[start + size:33] == b"\0" * (33 - start - size)
    assert (meta.api_version, meta.demonstration_name, meta.number_episodes) == (1, "PyramidsAcademy", 3)
    assert meta.mean_reward == pytest.approx(printed_mean, abs=1e-4)

    size, start = _DecodeVarint32(data, 33)
    brain = pb.BrainParametersProto.FromString(data[start:start + size])
    assert (brain.brain_name, brain.is_training) == ("Pyramids?team=0", False)
    assert (brain.action_spec.num_discrete_actions, list(brain.action_spec.discrete_branch_sizes)) == (1, [4])

    offset, pairs = start + size, []
    for _ in range(meta.number_steps):
        size, start = _DecodeVarint32(data, offset)
        pairs.append(pb.AgentInfoActionPairProto.FromString(data[start:start + size]))
        offset = start + size
    assert data[offset:] == meta.SerializeToString()  # Unity's trailing undelimited meta copy
    dones = [p.agent_info.done for p in pairs]
    assert sum(dones) == 3 and dones[-1]
    assert all(len(p.action_info.discrete_actions) == 1 for p in pairs)
    assert [(o.name, tuple(o.shape)) for o in pairs[0].agent_info.observations] == [  # Unity's two sensors
        ("RayPerceptionSensor", (35,)), ("VectorSensor_size2", (2,))]
    episode_sum = sum(p.agent_info.reward for p in pairs)
    assert episode_sum / 3 == pytest.approx(meta.mean_reward, abs=1e-4)


def test_reader_returns_what_the_scene_showed(tmp_path):
    """GridWorld: a PNG camera, its goal signal and action masks come back as the scene sent them."""
    path = _record(tmp_path, "GridWorld", 2, seed=3)
    grid = BrainParameters("GridWorldBrain", {**_brain("GridWorld").to_dict(), "stateSize": 2})  # + its goal
    demo = load_demonstration(path, grid)
    scene = load_scene("GridWorld")(3)
    academy = Academy(scene)
    academy.reset()
    frame = scene.render("GridWorldBrain", 0)[0] / 255.0
    goal, camera = demo.observations  # in Unity's sensor order: GoalSensor, RenderTextureSensor
    assert camera.shape[1:] == (scene.brains[0].cameras[0].height, scene.brains[0].cameras[0].width, 3)
    np.testing.assert_allclose(camera[0], frame, atol=1e-6)
    np.testing.assert_array_equal(demo.action_masks[0], 1.0 - scene.action_mask("GridWorldBrain")[0])
    assert demo.actions[0, 0] == int(scene.heuristic("GridWorldBrain")[0, 0])
    assert int(demo.dones.sum()) == 2 and demo.dones[-1]
    states, cameras = demo.brain_inputs(grid)
    assert states.tolist() == goal.tolist() == [[1.0, 0.0]] * len(demo) and len(cameras) == 1  # GreenPlus
    steps = demo.steps()  # the step types: one array per sensor, the masks per branch (True = masked)
    assert [o.shape[1:] for o in steps.obs] == [(2,), camera.shape[1:]] and len(steps) == len(demo)
    np.testing.assert_array_equal(steps.action_mask[0][0], scene.action_mask("GridWorldBrain")[0] > 0.5)


def test_writer_and_reader_round_trip(tmp_path):
    """Every field the writer puts in a pair comes back in the reader's arrays, per step."""
    path = str(tmp_path / "hand.demo")
    brain = pb.BrainParametersProto(brain_name="Ball?team=0")
    brain.action_spec.num_continuous_actions = 2
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((5, 8)).astype(np.float32)
    acts = rng.standard_normal((5, 2)).astype(np.float32)
    with open(path, "wb") as f:
        writer = DemonstrationWriter(f, "hand made!", brain)
        pairs = []
        for i in range(5):
            info = pb.AgentInfoProto(reward=0.1 * i, done=i in (2, 4), max_step_reached=i == 4)
            info.observations.add(shape=[8]).float_data.data.extend(obs[i].tolist())
            pairs.append(pb.AgentInfoActionPairProto(agent_info=info,
                                                     action_info=pb.AgentActionProto(continuous_actions=acts[i])))
        writer.write_episode(pairs[:3])
        writer.write_episode(pairs[3:])
        writer.close()
    demo = load_demonstration(path, BrainParameters("Ball", {"stateSize": 8, "actionSize": 2, "actionSpaceType": 1}))
    assert demo.metas[0].demonstration_name == "hand made"
    np.testing.assert_array_equal(demo.observations[0], obs)
    np.testing.assert_array_equal(demo.actions, acts)
    np.testing.assert_allclose(demo.rewards, [0.0, 0.1, 0.2, 0.3, 0.4], atol=1e-6)
    assert demo.dones.tolist() == [False, False, True, False, True]
    assert demo.max_step_reached.tolist() == [False] * 4 + [True]
    assert demo.episode_rewards == pytest.approx([0.3, 0.7])


def test_folder_loads_every_demo_in_name_order(tmp_path):
    _record(tmp_path, "3DBall", 1, "b.demo", seed=1)
    _record(tmp_path, "3DBall", 2, "a.demo", seed=2)
    (tmp_path / "notes.txt").write_text("not a demo")
    demo = load_demonstration(str(tmp_path), _brain("3DBall"))
    assert [os.path.basename(p) for p in demo.paths] == ["a.demo", "b.demo"]
    assert int(demo.dones.sum()) == 3
    assert len(demo) == sum(m.number_steps for m in demo.metas)
    assert demo.actions.shape == (len(demo), 2) and demo.brain_inputs()[0].shape == (len(demo), 8)


def _raises(path, expected, *needles):
    with pytest.raises(DemonstrationError) as info:
        load_demonstration(path, expected)
    message = str(info.value)
    for needle in (path,) + needles:
        assert needle in message, message


def test_bad_input_is_a_clear_error_naming_the_file(tmp_path):
    good = _record(tmp_path, "Pyramids", 1, "good.demo")
    data = open(good, "rb").read()
    pyramids = _brain("Pyramids")

    truncated = str(tmp_path / "truncated.demo")
    open(truncated, "wb").write(data[:len(data) // 2])
    _raises(truncated, pyramids, "truncated")
    header_only = str(tmp_path / "header.demo")
    open(header_only, "wb").write(data[:20])
    _raises(header_only, pyramids, "truncated")

    _raises(good, _brain("3DBall"), "another behaviour spec", "2 continuous actions", "discrete branches [4]")

    size, start = _DecodeVarint32(data, 0)
    meta = pb.DemonstrationMetaProto.FromString(data[start:start + size])
    meta.api_version = 7
    header = meta.SerializeToString()
    newer = str(tmp_path / "newer.demo")
    open(newer, "wb").write((bytes([len(header)]) + header).ljust(33, b"\0") + data[33:])
    _raises(newer, pyramids, "version 7", "[0, 1]")

    empty = str(tmp_path / "empty.demo")
    open(empty, "wb").close()
    _raises(empty, pyramids, "empty")

    folder = tmp_path / "nothing"
    folder.mkdir()
    (folder / "readme.txt").write_text("no demos here")
    _raises(str(folder), pyramids, "no .demo file")
    _raises(str(tmp_path / "missing.demo"), pyramids, "does not exist")


def test_a_folder_mixing_behaviors_is_refused(tmp_path):
    _record(tmp_path, "Pyramids", 1, "a.demo")
    other = _record(tmp_path, "3DBall", 1, "b.demo")
    with pytest.raises(DemonstrationError, match="another behaviour spec") as info:
        load_demonstration(str(tmp_path))
    assert other in str(info.value)


def test_record_demo_needs_one_brain_named(tmp_path):
    out = subprocess.run([sys.executable, "-m", "academy", "Tennis", "--record-demo", str(tmp_path / "t.demo")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--brain NAME=heuristic" in out.stderr
    assert brain_parameters_proto(Academy(load_scene("3DBall")(0)).brains[0]).action_spec.num_continuous_actions == 2


def test_record_demo_refuses_to_serve_a_trainer_too(tmp_path, capsys):
    from academy.__main__ import main

    code = main(["3DBall", "--record-demo", str(tmp_path / "b.demo"), "--brain", "Ball3DBrain=heuristic",
                 "--mlagents-port", "1"])
    assert code == 2 and "cannot also serve a trainer" in capsys.readouterr().err
    assert not (tmp_path / "b.demo").exists()
