"""One ONNX input per sensor: from the wire's ObservationSpecs to ``obs_k`` as Unity binds them.

Every built-in scene is served in-process by the academy's modern Unity stand-in (its gRPC client
in a thread) to the trainer's gRPC server, so the brains are what the trainer's decoding makes of
the scene's real messages. Each scene's export is then held against the sensor list the scene put
on the wire (names and shapes read from the academy's own messages, not from the trainer), with
the load-time checks of ``tests/onnx_contract.py`` reading the file alone, as Unity does.
"""
from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

from academy import SCENES, UNITY_NAMES, load_scene
from academy.academy import Academy
from academy.internal import OnnxInternalBrain
from academy.scene import BrainSpec, VectorSensor, modern_observations
from tests.onnx_contract import assert_contract
from tests.served_scene import Served
from tests.trainers.export.test_onnx_export import randomise
from tests.trainers.ppo.test_ppo import make_trainer
from trainers.export.onnx_model import export_onnx
from unityagents.brain import BrainParameters


def behaviors():
    """(scene, behaviour) for one External behaviour of each built-in scene (Tennis' two are alike)."""
    out = []
    for scene in SCENES:
        cls = load_scene(scene)
        brain = next(b for b in cls.brains if b.brain_type == "external")
        unity = UNITY_NAMES.get(brain.name, brain.name)
        out.append((scene, getattr(cls, "behavior_names", {}).get(brain.name, f"{unity}?team=0")))
    return out


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Per built-in scene: its brain as decoded from the wire, the wire's sensors, a trainer with
    random weights (normalising, so the normaliser sits between the inputs and the network), its ONNX."""
    out = {}
    for scene, name in behaviors():
        with Served(scene) as served:
            brain, sensors = served.handshake().brains[name], served.wire_sensors(name)
        trainer = make_trainer(brain, normalize=True, hidden_units=8, num_layers=1)
        randomise(trainer, np.random.default_rng(1))
        (path,) = export_onnx(trainer.sess, [trainer], str(tmp_path_factory.mktemp(scene)))
        out[scene] = (brain, sensors, trainer, path)
    return out


def test_every_builtin_scene_exports_one_obs_k_per_wire_sensor_that_unity_accepts(exports):
    for scene, (brain, sensors, _, path) in exports.items():
        model = assert_contract(path, brain, sensors=sensors)
        assert sorted(i.name for i in model.graph.input if i.name.startswith("obs_")) == \
            [f"obs_{k}" for k in range(len(sensors))], scene
    # The multi-sensor scenes, spelled out: Unity's order is by sensor name.
    assert exports["Pyramids"][1] == [("RayPerceptionSensor", (35,)), ("VectorSensor_size2", (2,))]
    assert exports["Hallway"][1] == [("RayPerceptionSensor", (5,)), ("VectorSensor_size1", (1,))]
    assert exports["GridWorld"][1] == [("GoalSensor", (2,)), ("RenderTextureSensor", (3, 84, 84))]


def onnx_feed(brain: BrainParameters, state: np.ndarray, images: list) -> dict:
    """Per sensor its own slice of the state or its camera (NCHW), as Unity writes them."""
    feed = {}
    for k, sensor in enumerate(brain.sensors):
        if sensor.is_camera:
            feed[f"obs_{k}"] = images[sensor.camera].transpose(0, 3, 1, 2)
        else:
            feed[f"obs_{k}"] = state[:, sensor.offset:sensor.offset + sensor.size]
    if brain.action_space_type == "discrete":
        feed["action_masks"] = np.ones((len(state), sum(brain.action_branches)), np.float32)
    return feed


@pytest.mark.parametrize("scene", ["Pyramids", "GridWorld", "Hallway"])
def test_the_graph_concatenates_the_sensors_where_training_saw_them(exports, scene):
    """The file's value and greedy actions on per-sensor inputs equal the training graph's on the
    concatenated state (its running normaliser included): each sensor lands at its own offset."""
    brain, _, trainer, path = exports[scene]
    rng = np.random.default_rng(4)
    n = 5
    state = rng.normal(size=(n, brain.state_space_size)).astype(np.float32)
    images = [rng.uniform(size=(n, c["height"], c["width"], 3)).astype(np.float32) for c in brain.camera_resolutions]
    m = trainer.model
    feed = {m.batch_size: n, m.sequence_length: 1, m.state_in: state}
    feed.update(zip(m.observation_in, images))
    want_value, want_probs = trainer.sess.run([m.value, m.probs], feed)  # one branch: argmax of its probs
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    value, greedy = session.run(["value_estimate", "deterministic_discrete_actions"], onnx_feed(brain, state, images))
    np.testing.assert_allclose(value.reshape(-1), np.asarray(want_value).reshape(-1), rtol=1e-4, atol=1e-5)
    assert greedy.reshape(-1).tolist() == np.argmax(want_probs, axis=1).tolist()


def test_the_academy_onnx_brain_feeds_each_sensor_its_input(exports):
    """GridWorld's file run by the academy's ONNX brain on the scene's own sensors decides like
    onnxruntime fed by hand in Unity's order; a file made for other sensors is refused by name."""
    brain, _, _, path = exports["GridWorld"]
    academy = Academy(load_scene("GridWorld")(3))
    academy.reset()
    spec = academy.brains[0].spec
    values = modern_observations(academy.scene, spec)
    deciding = OnnxInternalBrain(path, spec, deterministic=True)
    actions, _ = deciding.decide_sensors(values, np.zeros((1, 0)))
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    by_hand = session.run(["deterministic_discrete_actions"], {
        "obs_0": values[0], "obs_1": values[1].astype(np.float32).transpose(0, 3, 1, 2) / 255.0,
        "action_masks": np.ones((1, 4), np.float32)})[0]
    assert actions.reshape(-1).tolist() == by_hand.reshape(-1).tolist()
    pyramids = load_scene("Pyramids").brains[0]
    with pytest.raises(ValueError, match=r"obs_0 of shape \[2\] but sensor 0 \(RayPerceptionSensor\) gives \[35\]"):
        OnnxInternalBrain(path, pyramids)


def test_an_observation_unlike_its_spec_names_the_behavior_and_the_sensor():
    with Served("Pyramids") as served:
        served.handshake()
        del served.templates[1].shape[:]
        served.templates[1].shape.append(3)  # VectorSensor_size2 now claims 3 floats
        text = served.refused_step("Pyramids?team=0")
    assert "'Pyramids?team=0'" in text and "sensor 'VectorSensor_size2'" in text and "shape" in text


def test_sensor_lists_must_tile_the_state_and_name_every_camera():
    base = {"stateSize": 4, "actionSize": 2, "cameraResolutions": [], "actionSpaceType": 1, "stateSpaceType": 1}
    ok = BrainParameters("B", {**base, "sensors": [{"name": "a", "shape": [3]}, {"name": "b", "shape": [1],
                                                                                   "offset": 3}]})
    assert [s.offset for s in ok.sensors] == [0, 3] and ok.to_dict()["sensors"][1]["offset"] == 3
    with pytest.raises(ValueError, match=r"sensor 1 \('b', shape \(1,\)\) does not fit"):
        BrainParameters("B", {**base, "sensors": [{"name": "a", "shape": [3]}, {"name": "b", "shape": [1]}]})
    with pytest.raises(ValueError, match="cover 3 state floats"):
        BrainParameters("B", {**base, "sensors": [{"name": "a", "shape": [3]}]})
    with pytest.raises(ValueError, match="cover the continuous state of 4 floats"):
        BrainSpec(name="B", n_agents=1, state_size=4, action_size=2, sensors=(VectorSensor("a", 3),))


def test_a_file_exported_from_the_api2_brain_runs_with_its_one_state_input(tmp_path):
    """Hallway's API-2 brain (one state of 6) exports one ``obs_0`` [b, 6]; the academy's ONNX brain
    feeds it the whole state, and the same scene's modern file (rays, then the vector) per sensor."""
    spec = load_scene("Hallway").brains[0]
    brain = BrainParameters(spec.name, spec.parameters_json())
    trainer = make_trainer(brain, normalize=True, hidden_units=8, num_layers=1)
    (path,) = export_onnx(trainer.sess, [trainer], str(tmp_path))
    legacy = OnnxInternalBrain(path, spec, deterministic=True)
    assert [s.name for s in legacy.sensors] == ["VectorSensor_size6"]
    academy = Academy(load_scene("Hallway")(0))
    academy.reset()
    state = academy.scene.states(spec.name).astype(np.float32)
    actions, _ = legacy.decide_sensors(modern_observations(academy.scene, spec, sensors=legacy.sensors),
                                       np.zeros((8, 0)))
    m = trainer.model
    probs = trainer.sess.run(m.probs, {m.batch_size: 8, m.sequence_length: 1, m.state_in: state})
    assert actions.reshape(-1).tolist() == np.argmax(probs, axis=1).tolist()


@pytest.mark.slow
def test_hallway_trained_over_grpc_plays_as_well_run_as_unity_runs_its_two_sensors(tmp_path):
    """PPO (no memory) over the wire, then its ``.onnx`` run by the academy's ONNX brain fed per
    sensor (rays as obs_0, the vector as obs_1), sampled actions as Unity's default: it scores
    like the last training mean. A policy without memory reaches about 0.4; random play about -0.3."""
    from tests.conftest import run_academy
    from tests.e2e.test_grpc_learn import mean_rewards, train

    code, out = train(tmp_path, "Hallway", """
        "Hallway?team=0":
            normalize: true
            time_horizon: 64
            batch_size: 128
            buffer_size: 1024
            hidden_units: 64
            beta: 0.01
            max_steps: 2.0e4
            summary_freq: 2000
        """, timeout=900)
    assert code == 0, out[-3000:]
    rewards = mean_rewards(out, "Hallway?team=0")
    assert rewards and rewards[-1] >= 0.0, rewards  # it learned something a wrong binding would lose
    onnx_path = tmp_path / "models" / "grpc" / "Hallway.onnx"
    deployed = run_academy("Hallway", "--brain", f"HallwayBrain=internal:{onnx_path}", "--episodes", "60")
    assert deployed >= rewards[-1] - 0.2, (deployed, rewards)
