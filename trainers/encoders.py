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
  statistics) and one encoder per camera, in input order. A state that holds variable-length
  sensors (entity lists) gives its vector sensors' values and their attention encoding instead
  (``trainers/attention.py``).

The camera encoder is ML-Agents' ``vis_encode_type`` (``VISUAL_ENCODERS``, with the smallest side
each accepts, ML-Agents' ``MIN_RESOLUTION_FOR_ENCODER``): ``simple`` is the original trainer's two
convolutions (``models.visual_encoder``, unchanged); ``nature_cnn`` the DQN paper's three;
``resnet`` the IMPALA stack (three conv + max-pool stages of two residual blocks each);
``match3`` two 3x3 convolutions for boards of a few cells (King's Candy Crush network);
``fully_connected`` one dense layer over the pixels. Layer sizes follow ML-Agents' encoders
(``torch_entities/encoders.py``, release 21); they are written here with this project's
initialisers (orthogonal kernels, zero biases) and leaky ReLUs (slope 0.01) as there. A camera
smaller than its encoder's minimum is refused before any graph is built, naming the brain, the
sensor and the encoders that would fit.

The order in which ops are created is part of the behaviour: with a graph-level seed, TensorFlow
seeds each initialiser from the number of ops created before it, so a graph built here initialises
exactly as the per-model code it replaced (same seed, same weights, same outputs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from trainers.attention import variable_length_inputs, variable_length_sensors
from trainers.models import (
    HIDDEN_GAIN,
    RunningNormalizer,
    conv2d,
    dense,
    flatten,
    visual_encoder,
    visual_encoder_min_size,
)
from trainers.tf_utils import tf
from trainers.trainer.base import Param, UnityTrainerException
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


def _leaky(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.leaky_relu(x, alpha=0.01)


def _swish(x: tf.Tensor) -> tf.Tensor:
    return x * tf.sigmoid(x)


def _conv_same(x: tf.Tensor, filters: int, name: str) -> tf.Tensor:
    """A 3x3 stride-1 SAME-padded convolution (the ResNet's), orthogonal kernel, zero bias."""
    with tf.variable_scope(name):
        kernel = tf.get_variable("kernel", [3, 3, int(x.shape[-1]), filters],
                                 initializer=tf.orthogonal_initializer(HIDDEN_GAIN))
        bias = tf.get_variable("bias", [filters], initializer=tf.zeros_initializer())
    return tf.nn.bias_add(tf.nn.conv2d(x, kernel, strides=[1, 1, 1, 1], padding="SAME"), bias)


def _convolutions(layers):
    def encoder(image: tf.Tensor, h_size: int, name: str) -> tf.Tensor:
        with tf.variable_scope(name):
            x = image
            for i, (filters, kernel, stride) in enumerate(layers):
                x = conv2d(x, filters, kernel, stride, f"conv_{i}", _leaky)
            return dense(flatten(x), h_size, "dense", _leaky)
    return encoder


def _resnet(image: tf.Tensor, h_size: int, name: str) -> tf.Tensor:
    with tf.variable_scope(name):
        x = image
        for stage, filters in enumerate((16, 32, 32)):
            x = _conv_same(x, filters, f"stage_{stage}/conv")
            x = tf.nn.max_pool2d(x, 3, 2, "VALID")
            for block in range(2):
                y = _conv_same(_swish(x), filters, f"stage_{stage}/block_{block}/conv_0")
                x = x + _conv_same(_swish(y), filters, f"stage_{stage}/block_{block}/conv_1")
        return dense(flatten(_swish(x)), h_size, "dense", tf.nn.relu)


def _fully_connected(image: tf.Tensor, h_size: int, name: str) -> tf.Tensor:
    with tf.variable_scope(name):
        return dense(flatten(image), h_size, "dense", _leaky)


#: ``vis_encode_type`` -> (encoder ``(image [N, H, W, C], h_size, scope name) -> [N, h_size]``,
#: the smallest height and width it accepts).
VISUAL_ENCODERS: Dict[str, tuple] = {
    "simple": (visual_encoder, visual_encoder_min_size()),
    "nature_cnn": (_convolutions(((32, 8, 4), (64, 4, 2), (64, 3, 1))), 36),
    "resnet": (_resnet, 15),
    "match3": (_convolutions(((35, 3, 1), (144, 3, 1))), 5),
    "fully_connected": (_fully_connected, 1),
}


#: The ``vis_encode_type`` hyperparameter, declared by every trainer whose networks read cameras.
VIS_ENCODE_TYPE_PARAM = Param(
    str, "simple", check=(lambda x: x in VISUAL_ENCODERS, " or ".join(repr(k) for k in VISUAL_ENCODERS)),
    doc="camera encoder: simple (min 20x20), nature_cnn (36), resnet (15), match3 (5), fully_connected (1)")


def visual_encoder_of(vis_encode_type: str) -> Callable[[tf.Tensor, int, str], tf.Tensor]:
    """The camera encoder named ``vis_encode_type`` (one of ``VISUAL_ENCODERS``)."""
    try:
        return VISUAL_ENCODERS[vis_encode_type][0]
    except KeyError:
        raise UnityTrainerException(f"vis_encode_type {vis_encode_type!r} is not one of "
                                    f"{', '.join(VISUAL_ENCODERS)}.") from None


def check_inputs(brain: BrainParameters, reader: str = "a policy", vis_encode_type: str = "simple") -> None:
    """Refuse a brain the encoder cannot read: no input at all, or a camera below its encoder's minimum."""
    if brain.state_space_size <= 0 and brain.number_observations == 0:
        raise UnityTrainerException(
            f"Brain '{brain.brain_name}' has neither a state (stateSize is {brain.state_space_size}) nor a camera, "
            f"so {reader} has nothing to look at. Give it a state or a camera.")
    visual_encoder_of(vis_encode_type)
    smallest = VISUAL_ENCODERS[vis_encode_type][1]
    names = {s.camera: s.name for s in getattr(brain, "sensors", ()) if s.is_camera}
    for k, camera in enumerate(brain.camera_resolutions):
        side = min(int(camera["height"]), int(camera["width"]))
        if side < smallest:
            fitting = [f"{kind} ({size}x{size})" for kind, (_, size) in VISUAL_ENCODERS.items() if size <= side]
            raise UnityTrainerException(
                f"Brain '{brain.brain_name}': camera sensor {names.get(k, f'camera_{k}')!r} (camera {k}) is "
                f"{camera['width']}x{camera['height']} pixels, but vis_encode_type {vis_encode_type!r} of {reader} "
                f"needs at least {smallest}x{smallest}. Raise the sensor's resolution, or set vis_encode_type to an "
                f"encoder whose minimum it meets: {', '.join(fitting) or 'none'}.")


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


def encode(vector: Optional[tf.Tensor], observations: List[tf.Tensor], h_size: int,
           vis_encode_type: str = "simple") -> tf.Tensor:
    """The state vector next to one camera encoder per camera (variables in the current scope).

    For networks built over inputs that already exist: a second copy of a network (DQN's target
    network, ``reuse``), or a reward signal's encoder over the policy's placeholders. A camera
    below the encoder's minimum is an error that says which encoders fit.
    """
    encoder, smallest = visual_encoder_of(vis_encode_type), VISUAL_ENCODERS[vis_encode_type][1]
    for k, image in enumerate(observations):
        height, width = (int(d) for d in image.shape[1:3])
        if min(height, width) < smallest:
            fitting = [kind for kind, (_, size) in VISUAL_ENCODERS.items() if size <= min(height, width)]
            raise UnityTrainerException(
                f"Camera {k} is {width}x{height} pixels; this network's {vis_encode_type!r} encoder needs at least "
                f"{smallest}x{smallest}. Raise the camera resolution (encoders that fit: {', '.join(fitting)}).")
    features = [vector] if vector is not None else []
    features += [encoder(image, h_size, f"visual_encoder_{k}") for k, image in enumerate(observations)]
    return concat_features(features)


def create_inputs(
    brain: BrainParameters,
    h_size: int,
    normalize: bool,
    vector_name: Optional[str] = "vector_in",
    reader: str = "a policy",
    vis_encode_type: str = "simple",
) -> Inputs:
    """The contract's input placeholders and their features, in the current variable scope.

    :param h_size: width of each camera's encoding.
    :param normalize: normalise a continuous state by running mean and variance
        (``models.RunningNormalizer``, whose statistics are checkpointed variables).
    :param vector_name: name of the un-normalised state vector node (``vector_in``); None leaves a
        continuous state unwrapped and a one-hot state unnamed (the imitation graph's layout).
    :param reader: who reads the inputs, for the error about a brain without any.
    :param vis_encode_type: the camera encoder (``VISUAL_ENCODERS``).
    """
    check_inputs(brain, reader, vis_encode_type)
    encoder = visual_encoder_of(vis_encode_type)
    state: Optional[tf.Tensor] = None
    vector_in: Optional[tf.Tensor] = None
    update_normalization: Optional[tf.Operation] = None
    normalize = bool(normalize and brain.state_space_type == "continuous" and brain.state_space_size > 0)
    features: List[tf.Tensor] = []
    if brain.state_space_size > 0:
        state = state_placeholder(brain, "state")
        if variable_length_sensors(brain):  # entity lists in the state: attention.py encodes them
            vector_in, update_normalization, normalize, encoded = variable_length_inputs(
                brain, state, h_size, normalize, vector_name)
            features.extend(encoded)
        elif normalize:
            normalizer = RunningNormalizer(state)
            vector_in, update_normalization = normalizer.normalized, normalizer.update
        else:
            vector_in = state_vector(brain, state, vector_name)
        if not features:
            features.append(vector_in)
    observations = []
    for k in range(brain.number_observations):
        image = observation_placeholder(brain, k)
        observations.append(image)
        features.append(encoder(image, h_size, f"visual_encoder_{k}"))
    return Inputs(state, observations, vector_in, update_normalization, normalize, features)


__all__ = [
    "VISUAL_ENCODERS",
    "Inputs",
    "check_inputs",
    "concat_features",
    "create_inputs",
    "encode",
    "observation_placeholder",
    "observation_placeholders",
    "state_placeholder",
    "state_vector",
    "visual_encoder_of",
]
