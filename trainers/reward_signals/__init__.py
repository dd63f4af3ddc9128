"""Reward signals: the extrinsic reward, intrinsic ones (curiosity, RND) and GAIL, for on-policy trainers.

Why: on a sparse-reward task (``Pyramids``: nothing pays until the gold brick) a policy trained on
the environment's reward alone almost never sees the goal. An intrinsic reward for reaching states
the agent cannot yet predict makes it explore until it does. Configured as ML-Agents users know it::

    PyramidsBrain:
        reward_signals:
            extrinsic: {strength: 1.0, gamma: 0.99}
            rnd: {strength: 0.01, gamma: 0.99, encoding_size: 64, learning_rate: 1.0e-4}

Each signal has its own value head (``PPOModel.values[name]``) and its own GAE (its own
``gamma``); its rewards enter GAE multiplied by its ``strength``, and the policy's advantage is
the sum of the signals' advantages. Without a ``reward_signals`` block a trainer behaves exactly as
before: one extrinsic signal with the flat ``gamma``. A block lists every signal used: leaving
``extrinsic`` out trains on the intrinsic reward alone (as in ML-Agents).

* **Curiosity** (Pathak et al. 2017, "Curiosity-driven exploration by self-supervised
  prediction"): an encoder ``phi`` of the brain's inputs (the state and the cameras, through the
  shared ``trainers.encoders``), an inverse model that predicts the action from ``phi(s), phi(s')``
  (which shapes ``phi`` to keep what the agent controls) and a forward model that predicts
  ``phi(s')`` from ``phi(s)`` and the action. The reward is the forward model's error. Transitions
  that ended an episode have no next state in API-2 (the state sent with ``done`` is already the
  next episode's first), so they get no curiosity reward and are not trained on.
* **RND** (Burda et al. 2018, "Exploration by random network distillation"): a fixed, randomly
  initialised target network and a predictor trained to match it, both over the state normalised
  by running statistics of its own (and the cameras). The reward is the prediction error of
  ``s``, divided by a running standard deviation of those errors, so its scale does not depend on
  the inputs' scale and falls as states become familiar.

Both train on the same minibatches as the policy (their update ops run in the same
``session.run``), every op is built once in the trainer's ``__init__``, their variables (the fixed
target included) are checkpointed with the rest, and nothing of them reaches the exported graph
(the exporter keeps only what the output nodes need).
"""
from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Type

import numpy as np

from trainers.returns import get_gae
from trainers.reward_signals.base import RewardSignal, SignalInputs
from trainers.reward_signals.curiosity import CuriositySignal
from trainers.reward_signals.extrinsic import ExtrinsicSignal
from trainers.reward_signals.gail import GAILSignal
from trainers.reward_signals.rnd import RNDSignal
from trainers.settings.schema import (
    Param,
    TrainerConfigError,
    Where,
    brain_key,
    check_block,
    nested,
    settings_type,
    settings_view,
)
from unityagents.brain import BrainParameters

#: The registry: a signal's name in a ``reward_signals`` block -> its class. A new signal is a
#: module of this package and one line here.
SIGNALS: Dict[str, Type[RewardSignal]] = {
    "extrinsic": ExtrinsicSignal,
    "curiosity": CuriositySignal,
    "rnd": RNDSignal,
    "gail": GAILSignal,
}

#: The keys of each signal, with their types, defaults and checks (docs/configuration.md lists them).
SIGNAL_PARAMETERS: Dict[str, Dict[str, Param]] = {name: cls.parameters for name, cls in SIGNALS.items()}

#: How each signal is named in TensorBoard tags (``Policy/<title> Reward``).
SIGNAL_TITLES: Dict[str, str] = {name: cls.title for name, cls in SIGNALS.items()}

def validate_reward_signals(brain_name: str, value: Any) -> Optional[Dict[str, Dict[str, Any]]]:
    """The ``reward_signals`` block checked and completed with defaults, or None when absent.

    Errors are ``TrainerConfigError``s naming the brain and the dotted key
    (``reward_signals.rnd.strenght``), with a "did you mean" for near misses, as for flat keys.
    """
    return check_reward_signals(brain_key(f"brain '{brain_name}'", "reward_signals"), value)


def check_reward_signals(where: Where, value: Any) -> Optional[Dict[str, Dict[str, Any]]]:
    """``validate_reward_signals`` with the block named by ``where`` (the declaration's ``Param.block``)."""
    if value is None:
        return None
    blocks = check_block(where, value, _SIGNAL_BLOCKS, "reward_signals", unknown="reward signal", partial=True)
    if not blocks:
        raise TrainerConfigError(
            f"{where('')}: the block is empty, so nothing would reward the agent. List at least one signal "
            f"({', '.join(SIGNAL_PARAMETERS)}), or remove the key to train on the extrinsic reward alone.")
    settings = {name: check_block(nested(where, name), block, SIGNAL_PARAMETERS[name], f"the {name} signal")
                for name, block in blocks.items()}
    # The extrinsic signal comes first: its value head is the exported value_estimate.
    return dict(sorted(settings.items(), key=lambda item: item[0] != "extrinsic"))


def complete_reward_signals(signals: Mapping[str, Mapping[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Checked signals' blocks (a reader checked them in its own layout) with every declared key,
    defaults where a block gives none, extrinsic first: the form ``check_reward_signals`` returns."""
    completed = {name: {key: copy.deepcopy(block[key]) if key in block else copy.deepcopy(param.default)
                        for key, param in SIGNAL_PARAMETERS[name].items()} for name, block in signals.items()}
    return dict(sorted(completed.items(), key=lambda item: item[0] != "extrinsic"))


def _typed_signals(brain_name: str, value: Mapping[str, Any]) -> Mapping[str, Any]:
    """The checked block as ``{signal: its frozen settings}`` (``settings.reward_signals['rnd'].strength``)."""
    return MappingProxyType({name: settings_view(SIGNAL_PARAMETERS[name], block, SIGNAL_SETTINGS[name].__name__)
                             for name, block in value.items()})


#: Each signal's settings as a frozen dataclass (``CuriositySettings``, ...).
SIGNAL_SETTINGS: Dict[str, type] = {
    name: settings_type(params, f"{SIGNALS[name].__name__.replace('Signal', '')}Settings")
    for name, params in SIGNAL_PARAMETERS.items()}
#: The outer block: one sub-block per signal (each checked against its own keys).
_SIGNAL_BLOCKS = {name: Param(dict, None) for name in SIGNAL_PARAMETERS}

#: The ``reward_signals`` hyperparameter, for trainers that support reward signals (PPO).
REWARD_SIGNALS_PARAM = Param(
    dict, None,
    doc=f"nested block {{signal: {{key: value}}}} with signals {', '.join(SIGNALS)} (see below); "
        "absent: the extrinsic reward alone, with the flat gamma", view=_typed_signals, block=check_reward_signals)


def signal_settings(params: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The signals a trainer uses: the validated block, or the extrinsic reward with the flat ``gamma``."""
    block = params.get("reward_signals")
    if block:
        return dict(block)
    return {"extrinsic": {"strength": 1.0, "gamma": float(params.get("gamma", 0.99))}}


def create_reward_signals(brain: BrainParameters, settings: Mapping[str, Mapping[str, Any]]) -> Dict[str, RewardSignal]:
    """Build the signals of ``settings`` (from ``signal_settings``) in the current graph and scope."""
    signals: Dict[str, RewardSignal] = {}
    for name, values in settings.items():
        if name not in SIGNALS:  # validate_reward_signals refuses these first; a direct caller may not have
            raise TrainerConfigError(f"Unknown reward signal {name!r}; the signals are: {', '.join(SIGNALS)}.")
        signals[name] = SIGNALS[name](brain, values)
    return signals


def signal_gae(
    rewards: Mapping[str, np.ndarray],
    values: Mapping[str, np.ndarray],
    value_next: Mapping[str, float],
    gammas: Mapping[str, float],
    lambd: float,
) -> Dict[str, Dict[str, np.ndarray]]:
    """Per signal: GAE advantages and TD(lambda) returns of one trajectory (its own gamma).

    :param rewards: per signal, the rewards that enter GAE (already multiplied by ``strength``).
    :return: ``{signal: {"advantages": [T], "returns": [T]}}``; the policy's advantage is the sum
        of the signals' advantages.
    """
    out: Dict[str, Dict[str, np.ndarray]] = {}
    for name, reward in rewards.items():
        v = np.asarray(values[name], dtype=np.float64)
        advantages = get_gae(reward, v, float(value_next[name]), gamma=float(gammas[name]), lambd=lambd)
        out[name] = {"advantages": advantages, "returns": advantages + v}
    return out


__all__ = [
    "CuriositySignal",
    "ExtrinsicSignal",
    "GAILSignal",
    "REWARD_SIGNALS_PARAM",
    "RNDSignal",
    "RewardSignal",
    "SIGNALS",
    "SIGNAL_PARAMETERS",
    "SIGNAL_SETTINGS",
    "SIGNAL_TITLES",
    "SignalInputs",
    "check_reward_signals",
    "complete_reward_signals",
    "create_reward_signals",
    "signal_gae",
    "signal_settings",
    "validate_reward_signals",
]
