"""SAC's settings (``trainer_type: sac`` of ML-Agents Release 22) and the checks that refuse a
configuration or a brain it cannot train, before any graph is built."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from trainers.encoders import VIS_ENCODE_TYPE_PARAM
from trainers.imitation import bc
from trainers.ppo.models import validate_memory_size
from trainers.reward_signals import REWARD_SIGNALS_PARAM
from trainers.settings.schema import total_memory_bytes
from trainers.settings.self_play import SELF_PLAY_PARAM, check_team_behavior
from trainers.trainer.base import (
    COMMON_HYPERPARAMETERS,
    DETERMINISTIC_PARAM,
    Param,
    TrainerConfigError,
    UnityTrainerException,
    non_negative,
    positive,
    unit_interval,
)
from trainers.trainer.rl_trainer import check_policy_settings
from unityagents.brain import BrainParameters

SAC_HYPERPARAMETERS: Dict[str, Param] = {
    **COMMON_HYPERPARAMETERS,
    "learning_rate": Param(float, 3.0e-4, check=(positive, "> 0"), doc="Adam learning rate of policy, Q and alpha"),
    "learning_rate_schedule": Param(str, "constant", check=(lambda x: x in ("constant", "linear"),
                                                             "'constant' or 'linear'"),
                                    doc="'linear' decays the learning rate to 0 at max_steps"),
    "batch_size": Param(int, 128, check=(positive, "> 0"), doc="transitions sampled for each gradient step"),
    "buffer_size": Param(int, 50000, check=(positive, "> 0"),
                         doc="replay capacity in transitions; the oldest are overwritten"),
    "buffer_init_steps": Param(int, 0, check=(non_negative, ">= 0"),
                               doc="agent steps collected before the first gradient step"),
    "tau": Param(float, 0.005, check=(lambda x: 0.0 < x <= 1.0, "in (0, 1]"),
                 doc="target critics move by target <- tau*online + (1-tau)*target after each gradient step"),
    "steps_per_update": Param(float, 1.0, check=(positive, "> 0"), doc="agent steps per gradient step"),
    "reward_signal_steps_per_update": Param(float, None, check=(positive, "> 0"),
                                            doc="agent steps per update of the curiosity/RND models; "
                                                "default: steps_per_update"),
    "init_entcoef": Param(float, 1.0, check=(positive, "> 0"),
                          doc="initial entropy coefficient alpha (then tuned towards the target entropy)"),
    "save_replay_buffer": Param(bool, False, doc="save the replay buffer with each checkpoint, so --load "
                                                 "continues exactly"),
    "hidden_units": Param(int, 128, check=(positive, "> 0"), doc="units per hidden layer of actor and critics"),
    "num_layers": Param(int, 2, check=(non_negative, ">= 0"), doc="hidden layers of actor and critics"),
    "normalize": Param(bool, False, doc="normalise continuous states by running mean and variance"),
    "vis_encode_type": VIS_ENCODE_TYPE_PARAM,
    "gamma": Param(float, 0.99, check=(unit_interval, "in [0, 1]"),
                   doc="discount factor (without a reward_signals block)"),
    "time_horizon": Param(int, 64, check=(positive, "> 0"),
                          doc="SAC stores single transitions; behavioral cloning runs at most once per "
                              "time_horizon agent steps"),
    "use_recurrent": Param(bool, False, doc="LSTM in the actor (its state is the brain's memory) and in each critic; "
                                            "updates on sequences from the replay buffer"),
    "memory_size": Param(int, 0, check=(lambda x: x >= 0 and x % 2 == 0, "even and >= 0"),
                         doc="LSTM memory floats per agent when use_recurrent; 0 takes the brain's memorySize "
                             "(API-2); modern-protocol brains need it (e.g. 128)"),
    "sequence_length": Param(int, 64, check=(positive, "> 0"),
                             doc="steps per sequence sampled from the replay buffer when use_recurrent"),
    "reward_signals": REWARD_SIGNALS_PARAM,
    "behavioral_cloning": bc.BEHAVIORAL_CLONING_PARAM,
    "self_play": SELF_PLAY_PARAM,
    "deterministic": DETERMINISTIC_PARAM,
}

#: Reward streams that cut their bootstrap at episode ends (the intrinsic ones do not, as in ML-Agents).
EPISODIC_SIGNALS = ("extrinsic",)


def replay_bytes(brain: BrainParameters, buffer_size: int, memory_size: int = 0) -> int:
    """Bytes the replay of ``buffer_size`` transitions takes: states and camera frames twice (float32),
    actions, reward, done, the two action masks of discrete brains, and with a recurrent actor of
    ``memory_size`` floats the memory each step started from and returned plus the padding mask."""
    pixels = sum(int(c.get("width", 0)) * int(c.get("height", 0)) * (1 if c.get("blackAndWhite") else 3)
                 for c in brain.camera_resolutions)
    inputs = (brain.state_width if brain.state_space_size > 0 else 0) + pixels
    masks = 0 if brain.action_space_type == "continuous" else 2 * int(sum(brain.action_branches))
    recurrent = 2 * int(memory_size) + 1 if memory_size else 0
    return int(buffer_size) * 4 * (2 * inputs + brain.action_width + 2 + masks + recurrent)


def unsupported_action_space(brain: BrainParameters) -> Optional[str]:
    """Why SAC cannot act for ``brain``, or None when it can."""
    if brain.action_space_type == "continuous":
        if brain.action_space_size < 1:
            return (f"the sac trainer needs at least one continuous action, but the brain has "
                    f"{brain.action_space_size}. Give the brain an action.")
        return None
    branches = list(brain.action_branches)
    if not branches or min(branches) < 2:
        return (f"the sac trainer needs discrete branches of at least 2 actions each, but the brain's branches "
                f"are {branches}. A branch with one action leaves nothing to choose; remove it.")
    return None


def check_parameters(brain_name: str, params: Dict[str, Any]) -> Dict[str, Any]:
    """Settings that contradict each other refused, as a new block (``SACTrainer.check_parameters``)."""
    params = check_policy_settings(brain_name, params, "the replay buffer could never fill one minibatch")
    if params["use_recurrent"]:
        if params["sequence_length"] > params["buffer_size"]:
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'sequence_length': {params['sequence_length']} is longer than "
                f"buffer_size {params['buffer_size']}; the replay buffer must hold at least one sequence.")
        if params.get("behavioral_cloning"):
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'behavioral_cloning': behavioral cloning clones a memoryless "
                "actor, but use_recurrent is true. Remove behavioral_cloning or set use_recurrent: false.")
    return params

def check_environment(brain_name: str, params: Dict[str, Any],
                      brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
    """Refuse action spaces SAC cannot learn, and a replay buffer this machine cannot hold
    (``SACTrainer.check_environment``)."""
    check_team_behavior(brain_name, params, brains, external_brain_names)
    brain = brains[brain_name]
    problem = unsupported_action_space(brain)
    if problem:
        raise TrainerConfigError(f"brain '{brain_name}', key 'trainer': {problem}")
    bc.check_demonstrations(brain_name, params, brain)
    signals = params.get("reward_signals") or {}
    if "curiosity" in signals and brain.action_space_type == "discrete" and len(brain.action_branches) > 1:
        raise TrainerConfigError(
            f"brain '{brain_name}', key 'reward_signals.curiosity': the curiosity model predicts one discrete "
            f"action, but the brain has {len(brain.action_branches)} branches. Use rnd instead.")
    memory_size = 0
    if params["use_recurrent"]:
        key = "memory_size" if params["memory_size"] else "use_recurrent"
        try:
            memory_size = validate_memory_size(brain, params["memory_size"] or None)
        except UnityTrainerException as e:
            raise TrainerConfigError(f"brain '{brain_name}', key '{key}': {e}") from None
    needed, memory = replay_bytes(brain, params["buffer_size"], memory_size), total_memory_bytes()
    if memory is not None and needed > memory:
        stored = "states, camera frames" + (" and memories" if memory_size else "")
        raise TrainerConfigError(
            f"brain '{brain_name}', key 'buffer_size': a replay buffer of {params['buffer_size']} transitions "
            f"of this brain ({stored} stored twice, as float32) would take "
            f"{needed / 2 ** 30:.1f} GiB, more than this machine's {memory / 2 ** 30:.1f} GiB of memory. "
            f"Use a buffer_size of at most {int(memory // (needed / params['buffer_size']))}.")


__all__ = ["SAC_HYPERPARAMETERS", "EPISODIC_SIGNALS", "replay_bytes", "unsupported_action_space",
           "check_parameters", "check_environment"]
