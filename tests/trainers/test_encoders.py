"""``vis_encode_type``: ML-Agents' five camera encoders, each down to its own minimum size, in PPO and SAC.

Each encoder builds a PPO policy over a camera exactly at its minimum side (ML-Agents'
``MIN_RESOLUTION_FOR_ENCODER``, written out here) and acts on it; one pixel less is refused
before any graph is built, naming the brain, the sensor and the encoders that would fit. The
new encoders' ops must also survive the ONNX export and Unity's load-time checks.
"""
from __future__ import annotations

import numpy as np
import pytest

from runner.settings.run_config import resolve
from runner.settings.trainer_config import TrainerConfigError
from tests.onnx_contract import assert_contract
from tests.trainers.ppo.test_ppo import make_trainer
from tests.trainers.sac.test_sac import make_sac
from trainers.encoders import VISUAL_ENCODERS
from trainers.export.onnx_model import export_onnx
from trainers.ppo.models import create_agent_model
from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException
from trainers.trainer.brain_info import BrainInfo
from unityagents.brain import BrainParameters

#: ML-Agents' minimum camera side per encoder (release 21 ``ModelUtils.MIN_RESOLUTION_FOR_ENCODER``).
MINIMUM = {"simple": 20, "nature_cnn": 36, "resnet": 15, "match3": 5, "fully_connected": 1}


def camera_brain(side: int, channels_bw: bool = False) -> BrainParameters:
    return BrainParameters("Board?team=0", {
        "stateSize": 2, "actionSize": 4, "cameraResolutions": [{"width": side, "height": side + 1,
                                                               "blackAndWhite": channels_bw}],
        "actionSpaceType": 0, "stateSpaceType": 1, "actionBranches": [4], "actionMasks": True,
        "sensors": [{"name": "Match3Sensor", "shape": [1 if channels_bw else 3, side + 1, side], "camera": 0},
                    {"name": "VectorSensor_size2", "shape": [2], "offset": 0}]})


def test_the_five_encoders_and_their_minimum_sizes():
    assert {k: size for k, (_, size) in VISUAL_ENCODERS.items()} == MINIMUM


@pytest.mark.parametrize("kind", sorted(MINIMUM))
def test_each_encoder_acts_on_a_camera_at_its_minimum_and_refuses_one_pixel_less(kind):
    side = MINIMUM[kind]
    with tf.Graph().as_default() as graph:
        model = create_agent_model(camera_brain(side), h_size=8, num_layers=1, vis_encode_type=kind)
        variables = {v.op.name for v in graph.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES)}
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            image = np.random.default_rng(0).uniform(size=(3, side + 1, side, 3))
            encoded = sess.run(model.inputs.features[1], {model.state_in: np.zeros((3, 2)),
                                                          model.observation_in[0]: image})
    assert encoded.shape == (3, 8) and np.isfinite(encoded).all()
    if kind == "resnet":  # three stages of a convolution and two residual blocks of two
        assert sum("visual_encoder_0/stage_" in v and v.endswith("kernel") for v in variables) == 15
    if side == 1:
        return
    with tf.Graph().as_default(), pytest.raises(UnityTrainerException) as caught:
        create_agent_model(camera_brain(side - 1), vis_encode_type=kind)
    text = str(caught.value)
    assert "'Board?team=0'" in text and "'Match3Sensor'" in text and f"at least {side}x{side}" in text
    assert "fully_connected (1x1)" in text and f"{kind} (" not in text  # the fix: encoders that fit


def test_resnet_and_match3_policies_export_an_onnx_unity_loads(tmp_path):
    for kind, side in (("resnet", 15), ("match3", 5)):
        brain = camera_brain(side, channels_bw=kind == "match3")
        trainer = make_trainer(brain, vis_encode_type=kind, hidden_units=8)
        (path,) = export_onnx(trainer.sess, [trainer], str(tmp_path / kind))
        model = assert_contract(path, brain, sensors=[("Match3Sensor", (1 if kind == "match3" else 3, side + 1, side)),
                                                      ("VectorSensor_size2", (2,))])
        ops = {n.op_type for n in model.graph.node}
        assert {"MaxPool", "Sigmoid"} <= ops if kind == "resnet" else "LeakyRelu" in ops  # pooling and swish
        info = BrainInfo([np.zeros((2, side + 1, side, 1 if kind == "match3" else 3), np.float32)],
                         np.zeros((2, 2), np.float32), agents=[0, 1], action_masks=np.ones((2, 4), np.float32))
        actions = trainer.take_action({brain.brain_name: info})[0]
        assert np.asarray(actions).shape == (2, 1)


def test_a_release_22_run_config_passes_vis_encode_type_to_ppo():
    def run(kind):
        return resolve("run.yaml", {"behaviors": {"Board": {"network_settings": {"vis_encode_type": kind}}}}, ("ppo",))

    assert run("match3").behaviors["Board"].brain.parameters["vis_encode_type"] == "match3"
    assert run("simple").behaviors["Board"].brain.parameters["vis_encode_type"] == "simple"
    with pytest.raises(TrainerConfigError, match="vis_encode_type: expected one of simple, nature_cnn"):
        run("match_3")


def test_sac_builds_its_actor_and_critics_with_the_chosen_encoder_and_refuses_a_camera_too_small():
    """SAC's actor, two critics and their targets each encode the camera with ``vis_encode_type``."""
    spec = {"stateSize": 2, "actionSize": 2, "actionSpaceType": 1, "stateSpaceType": 1,
            "cameraResolutions": [{"width": 5, "height": 6, "blackAndWhite": False}]}
    trainer = make_sac(spec, vis_encode_type="match3", hidden_units=8)
    first = {v.op.name.split("/visual_encoder_0")[0]: v.shape.as_list() for v in
             trainer.sess.graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)
             if v.op.name.endswith("visual_encoder_0/conv_0/kernel")}
    assert len(first) >= 5  # the actor, two critics and their two targets
    assert all(shape == [3, 3, 3, 35] for shape in first.values())  # match3's first layer: 35 3x3 filters
    info = BrainInfo([np.zeros((2, 6, 5, 3), np.float32)], np.zeros((2, 2), np.float32), agents=[0, 1])
    assert np.asarray(trainer.take_action({"Brain": info})[0]).shape == (2, 2)
    with pytest.raises(UnityTrainerException, match="needs at least 20x20"):
        make_sac(spec)  # the default (simple) encoder needs 20x20
