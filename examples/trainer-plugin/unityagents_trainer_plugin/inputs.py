"""Input placeholders and encoders shared by the A2C and DQN graphs.

The names follow the export contract (DESIGN §5), relative to the brain's graph scope: ``state``
(float32 ``[N, stateSize]``, or int32 ``[N, 1]`` for a discrete state), ``observation_k``
(float32 ``[N, H, W, C]`` in 0..1) and ``batch_size`` (int32; Unity feeds it, nothing needs it).
Unity's Internal brain finds the inputs by these names, so a plugin graph must use them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from trainers.models import RunningNormalizer, visual_encoder
from trainers.tf_utils import tf
from trainers.trainer import UnityTrainerException
from unityagents.brain import BrainParameters


@dataclass
class Inputs:
    """The placeholders of one brain's observation, and what the networks read from them.

    :param state: the ``state`` placeholder, None for a brain without a state.
    :param observations: one placeholder per camera.
    :param vector_in: the float vector the networks see (one-hot, raw or normalised state);
        feedable, so an update can replay exactly the normalised input the policy acted on.
    :param update_normalization: folds the fed ``state`` into the running statistics (None
        unless normalising).
    :param features: ``[N, d]``: ``vector_in`` and one encoding per camera, concatenated.
    """

    state: Optional[tf.Tensor]
    observations: List[tf.Tensor]
    vector_in: Optional[tf.Tensor]
    update_normalization: Optional[tf.Operation]
    features: tf.Tensor


def state_placeholder(brain: BrainParameters, name: str) -> tf.Tensor:
    """``[N, stateSize]`` float32 for a continuous state, ``[N, 1]`` int32 (the index) for a discrete one."""
    if brain.state_space_type == "continuous":
        return tf.placeholder(tf.float32, [None, brain.state_space_size], name=name)
    return tf.placeholder(tf.int32, [None, 1], name=name)


def observation_placeholders(brain: BrainParameters, prefix: str) -> List[tf.Tensor]:
    """One ``[N, H, W, C]`` float32 placeholder per camera, named ``<prefix>_<k>``."""
    placeholders = []
    for k, camera in enumerate(brain.camera_resolutions):
        channels = 1 if camera.get("blackAndWhite") else 3
        placeholders.append(
            tf.placeholder(tf.float32, [None, camera["height"], camera["width"], channels], name=f"{prefix}_{k}"))
    return placeholders


def state_vector(brain: BrainParameters, state: tf.Tensor) -> tf.Tensor:
    """The state as floats: one-hot for a discrete state, unchanged for a continuous one."""
    if brain.state_space_type == "continuous":
        return state
    return tf.one_hot(tf.reshape(state, [-1]), brain.state_space_size)


def encode(vector: Optional[tf.Tensor], observations: List[tf.Tensor], h_size: int) -> tf.Tensor:
    """Concatenate the state vector with one ``visual_encoder`` per camera (in the current scope)."""
    features = [vector] if vector is not None else []
    features += [visual_encoder(image, h_size, f"visual_encoder_{k}") for k, image in enumerate(observations)]
    if not features:
        raise UnityTrainerException("A brain without a state and without a camera gives a network nothing to read.")
    return features[0] if len(features) == 1 else tf.concat(features, axis=1)


def create_inputs(brain: BrainParameters, h_size: int, normalize: bool) -> Inputs:
    """The contract's input placeholders and their encoding, for policies that act on one state.

    :param normalize: normalise a continuous state by running mean and variance.
    """
    if brain.state_space_size <= 0 and brain.number_observations == 0:
        raise UnityTrainerException(
            f"Brain '{brain.brain_name}' has neither a state (stateSize is {brain.state_space_size}) nor a camera, "
            "so a policy has nothing to look at. Give it a state or a camera.")
    state = state_placeholder(brain, "state") if brain.state_space_size > 0 else None
    vector_in: Optional[tf.Tensor] = None
    update_normalization: Optional[tf.Operation] = None
    if state is not None:
        if normalize and brain.state_space_type == "continuous":
            normalizer = RunningNormalizer(state)
            vector_in, update_normalization = normalizer.normalized, normalizer.update
        else:
            vector_in = tf.identity(state_vector(brain, state), name="vector_in")
    observations = observation_placeholders(brain, "observation")
    return Inputs(state, observations, vector_in, update_normalization, encode(vector_in, observations, h_size))
