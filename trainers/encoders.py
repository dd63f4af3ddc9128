"""The one input encoder: a brain's input placeholders (the export contract) and their features.

Every graph that acts for a brain (PPO's model, hence the ghost's copy of it; the imitation
student; plugin trainers such as the example A2C and DQN) and every network that reads a brain's
inputs (the curiosity and RND reward signals) builds them here, so the contract that Unity's
Internal brain and ``academy/internal.py`` rely on (``docs/plugins.md`` §6) lives in one place. Names are
relative to the caller's variable scope:

* ``state``: float32 ``[N, stateSize]`` for a continuous state, int32 ``[N, 1]`` (the index) for
  a discrete one; absent when ``stateSize`` is 0;
* ``observation_k``: float32 ``[N, H, W, C]`` in 0..1, one per camera (C = 1 for black and white);
* the features: the state as floats (one-hot if discrete, optionally normalised by running
  statistics) and one small CNN per camera (``models.visual_encoder``), in input order.

The order in which ops are created is part of the behaviour: with a graph-level seed, TensorFlow
seeds each initialiser from the number of ops created before it, so a graph built here initialises
exactly as the per-model code it replaced (same seed, same weights, same outputs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from trainers.models import RunningNormalizer, visual_encoder, visual_encoder_min_size
from trainers.tf_utils import tf
from trainers.trainer import UnityTrainerException
from unityagents.brain import BrainParameters


@dataclass
class Inputs:
    """The placeholders of one brain's inputs, and what the networks read from them.

    :param state: the ``state`` placeholder, None for a brain without a state.
    :param observations: one ``observation_k`` placeholder per camera.
    :param vector_in: the float vector the networks see (one-hot, raw or normalised state), None
        without a state; feedable, so an update can replay exactly the normalised input the
        policy acted on.
    :param update_normalization: folds the fed ``state`` into the running statistics (None
        unless normalising).
    :param normalize: whether ``vector_in`` is the running-normalised state.
    :param features: ``vector_in`` (if any) and one ``[N, h_size]`` encoding per camera.
    """

    state: Optional[tf.Tensor]
    observations: List[tf.Tensor]
    vector_in: Optional[tf.Tensor]
    update_normalization: Optional[tf.Operation]
    normalize: bool
    features: List[tf.Tensor] = field(default_factory=list)

    @property
    def encoded(self) -> tf.Tensor:
        """``[N, d]``: the features concatenated (built on first use; call it once, while building)."""
        return concat_features(self.features)


def check_inputs(brain: BrainParameters, reader: str = "a policy") -> None:
    """Refuse a brain the encoder cannot read: no input at all, or a camera too small for the CNN."""
    if brain.state_space_size <= 0 and brain.number_observations == 0:
        raise UnityTrainerException(
            f"Brain '{brain.brain_name}' has neither a state (stateSize is {brain.state_space_size}) nor a camera, "
            f"so {reader} has nothing to look at. Give it a state or a camera.")
    smallest = visual_encoder_min_size()
    for k, camera in enumerate(brain.camera_resolutions):
        if camera["height"] < smallest or camera["width"] < smallest:
            raise UnityTrainerException(
                f"Camera {k} of brain '{brain.brain_name}' is {camera['width']}x{camera['height']} pixels; the "
                f"visual encoder needs at least {smallest}x{smallest}. Raise the camera resolution.")


def state_placeholder(brain: BrainParameters, name: str = "state") -> tf.Tensor:
    """``[N, stateSize]`` float32 for a continuous state, ``[N, 1]`` int32 (the index) for a discrete one."""
    if brain.state_space_type == "continuous":
        return tf.placeholder(tf.float32, [None, brain.state_space_size], name=name)
    return tf.placeholder(tf.int32, [None, 1], name=name)


def observation_placeholder(brain: BrainParameters, k: int, prefix: str = "observation") -> tf.Tensor:
    """The ``[N, H, W, C]`` float32 placeholder of camera ``k``, named ``<prefix>_<k>``."""
    camera = brain.camera_resolutions[k]
    channels = 1 if camera.get("blackAndWhite") else 3
    return tf.placeholder(tf.float32, [None, camera["height"], camera["width"], channels], name=f"{prefix}_{k}")


def observation_placeholders(brain: BrainParameters, prefix: str = "observation") -> List[tf.Tensor]:
    """One camera placeholder per camera of ``brain`` (see ``observation_placeholder``)."""
    return [observation_placeholder(brain, k, prefix) for k in range(brain.number_observations)]


def state_vector(brain: BrainParameters, state: tf.Tensor, name: Optional[str] = None) -> tf.Tensor:
    """The state as floats: one-hot for a discrete state, the state itself for a continuous one.

    :param name: name the result (``tf.identity`` for a continuous state); None adds no op for a
        continuous state, which is what a network that reads the placeholder directly had.
    """
    if brain.state_space_type == "continuous":
        return state if name is None else tf.identity(state, name=name)
    return tf.one_hot(tf.reshape(state, [-1]), brain.state_space_size, name=name)


def concat_features(features: List[tf.Tensor]) -> tf.Tensor:
    """``[N, sum d_i]``; a single feature is returned as it is (no op)."""
    if not features:
        raise UnityTrainerException("A brain without a state and without a camera gives a network nothing to read.")
    return features[0] if len(features) == 1 else tf.concat(features, axis=1)


def encode(vector: Optional[tf.Tensor], observations: List[tf.Tensor], h_size: int) -> tf.Tensor:
    """The state vector next to one ``visual_encoder`` per camera (variables in the current scope).

    For networks built over inputs that already exist: a second copy of a network (DQN's target
    network, ``reuse``), or a reward signal's encoder over the policy's placeholders.
    """
    features = [vector] if vector is not None else []
    features += [visual_encoder(image, h_size, f"visual_encoder_{k}") for k, image in enumerate(observations)]
    return concat_features(features)


def create_inputs(
    brain: BrainParameters,
    h_size: int,
    normalize: bool,
    vector_name: Optional[str] = "vector_in",
    reader: str = "a policy",
) -> Inputs:
    """The contract's input placeholders and their features, in the current variable scope.

    :param h_size: width of each camera's encoding.
    :param normalize: normalise a continuous state by running mean and variance
        (``models.RunningNormalizer``, whose statistics are checkpointed variables).
    :param vector_name: name of the un-normalised state vector node (``vector_in``); None leaves a
        continuous state unwrapped and a one-hot state unnamed (the imitation graph's layout).
    :param reader: who reads the inputs, for the error about a brain without any.
    """
    check_inputs(brain, reader)
    state: Optional[tf.Tensor] = None
    vector_in: Optional[tf.Tensor] = None
    update_normalization: Optional[tf.Operation] = None
    normalize = bool(normalize and brain.state_space_type == "continuous" and brain.state_space_size > 0)
    features: List[tf.Tensor] = []
    if brain.state_space_size > 0:
        state = state_placeholder(brain, "state")
        if normalize:
            normalizer = RunningNormalizer(state)
            vector_in, update_normalization = normalizer.normalized, normalizer.update
        else:
            vector_in = state_vector(brain, state, vector_name)
        features.append(vector_in)
    observations = []
    for k in range(brain.number_observations):
        image = observation_placeholder(brain, k)
        observations.append(image)
        features.append(visual_encoder(image, h_size, f"visual_encoder_{k}"))
    return Inputs(state, observations, vector_in, update_normalization, normalize, features)


__all__ = [
    "Inputs",
    "check_inputs",
    "concat_features",
    "create_inputs",
    "encode",
    "observation_placeholder",
    "observation_placeholders",
    "state_placeholder",
    "state_vector",
]
