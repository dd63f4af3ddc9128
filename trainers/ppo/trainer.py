"""Proximal Policy Optimisation for one External brain, on ``trainers.trainer.on_policy.OnPolicyTrainer``.

The base collects per-agent trajectories (keeping the transition that starts from a done agent's
post-reset state: Unity resets done agents before sending their state, and the original trainer's
"skip if done" dropped each new episode's first transition), cuts them at done or ``time_horizon``
and calls the hooks below; PPO adds what is specific to it, in three parts:

1. acting (``trainers.ppo.policy.PPOPolicy``): one compiled call acts for every agent of the
   brain (and, when training with ``normalize``, folds their states into the running
   normaliser in the same call); the ghost and the team self-play opponent act through the same;
2. ``bootstrap_values``: V of the current state of trajectories cut at ``time_horizon`` (one
   compiled call); ``process_trajectory``: GAE advantages and TD(lambda) returns;
3. the update (``trainers.ppo.optimizer.PPOOptimizer``) once the update buffer holds
   ``buffer_size`` steps, then behavioral cloning when configured.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from trainers.buffer import AgentBuffer
from trainers.encoders import VIS_ENCODE_TYPE_PARAM
from trainers.imitation import bc
from trainers.ppo.models import create_agent_model, validate_memory_size
from trainers.ppo.optimizer import BETA_FLOOR, EPSILON_FLOOR, PPOOptimizer
from trainers.ppo.policy import PPOPolicy
from trainers.returns import add_gae_fields
from trainers.reward_signals import REWARD_SIGNALS_PARAM
from trainers.settings.schema import Follows
from trainers.settings.self_play import SELF_PLAY_PARAM, check_team_behavior
from trainers.tf_utils import tf
from trainers.trainer.base import (
    DETERMINISTIC_PARAM,
    Param,
    TrainerConfigError,
    UnityTrainerException,
    discount_param,
    learning_rate_param,
    max_grad_norm_param,
    network_params,
    non_negative,
    positive,
    unit_interval,
)
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.on_policy import ON_POLICY_HYPERPARAMETERS, OnPolicyTrainer
from trainers.trainer.rl_trainer import check_policy_settings
from trainers.trainer.snapshot_actor import SnapshotActor
from trainers.trainer.summaries import mean_of
from trainers.trainer.trajectory import PolicyOutput
from unityagents.brain import CONTINUOUS_ACTION_CLIP, BrainParameters


def _one_of(*options: str):
    return (lambda x: x in options, " or ".join(repr(o) for o in options))


PPO_HYPERPARAMETERS: Dict[str, Param] = {
    **ON_POLICY_HYPERPARAMETERS,  # max_steps, summary_freq, trainer, buffer_size, time_horizon, ...
    "batch_size": Param(int, 1024, check=(positive, "> 0"),
                        doc="samples per minibatch (sequences x sequence_length when recurrent)"),
    "beta": Param(float, 5.0e-3, check=(non_negative, ">= 0"),
                  doc="entropy bonus coefficient, for discrete and continuous actions"),
    "epsilon": Param(float, 0.2, check=(lambda x: 0.0 < x < 1.0, "in (0, 1)"),
                     doc="PPO clip range of the ratio (and of the value when clip_value)"),
    "gamma": discount_param(),
    **network_params(128, "the policy and value MLPs"),
    "lambd": Param(float, 0.95, check=(unit_interval, "in [0, 1]"),
                   doc="GAE lambda: bias (0) versus variance (1) of the advantages"),
    "learning_rate": learning_rate_param(3.0e-4, "Adam learning rate at step 0"),
    "learning_rate_schedule": Param(str, "linear", check=_one_of("linear", "constant"),
                                    doc="'linear' decays the learning rate to 0 at max_steps"),
    "beta_schedule": Param(str, "constant", check=_one_of("linear", "constant"),
                           doc=f"'linear' decays beta to {BETA_FLOOR} at max_steps (Release 22's run config "
                               "follows learning_rate_schedule when it is not given)"),
    "epsilon_schedule": Param(str, "constant", check=_one_of("linear", "constant"),
                              doc=f"'linear' decays epsilon to {EPSILON_FLOOR} at max_steps (as beta_schedule)"),
    "normalize": Param(bool, True, doc="normalise continuous states by running mean and variance"),
    "num_epoch": Param(int, 3, check=(positive, "> 0"), doc="passes over the update buffer per update"),
    "sequence_length": Param(int, 32, check=(positive, "> 0"), doc="steps per training sequence when use_recurrent"),
    "use_recurrent": Param(bool, False,
                           doc="LSTM whose state round-trips through the brain's memory (memorySize: even, > 0)"),
    "memory_size": Param(int, 0, check=(lambda x: x >= 0 and x % 2 == 0, "even and >= 0"),
                         doc="LSTM memory floats per agent when use_recurrent; 0 takes the brain's memorySize "
                             "(API-2); modern-protocol brains need it (e.g. 128), their memories kept per agent here"),
    "max_grad_norm": max_grad_norm_param(0.5),
    "vf_coef": Param(float, 0.5, check=(non_negative, ">= 0"), doc="weight of the value loss"),
    "clip_value": Param(bool, True, doc="clip the value loss around the old value predictions (PPO2)"),
    "vis_encode_type": VIS_ENCODE_TYPE_PARAM,
    "reward_signals": REWARD_SIGNALS_PARAM,
    "behavioral_cloning": bc.BEHAVIORAL_CLONING_PARAM,
    "self_play": SELF_PLAY_PARAM,
    "deterministic": DETERMINISTIC_PARAM,
}


class PPOTrainer(PPOOptimizer, OnPolicyTrainer):
    """PPO for one brain: discrete or continuous actions and states, cameras, optional LSTM."""

    trainer_type = "ppo"
    hyperparameters = PPO_HYPERPARAMETERS
    #: Release 22's run config: an omitted beta or epsilon schedule follows learning_rate_schedule.
    release22_defaults = {"beta_schedule": Follows("learning_rate_schedule"),
                          "epsilon_schedule": Follows("learning_rate_schedule")}
    #: A hybrid brain (continuous actions and discrete branches) gets one policy over both parts.
    supports_hybrid_actions = True

    def setup(self) -> None:
        super().setup()
        self.use_recurrent = self.settings.use_recurrent
        self.sequence_length = self.settings.sequence_length if self.use_recurrent else 1
        # Reward signals (trainers.reward_signals): one value head each, then their own networks.
        signals = self.reward_signal_names()
        with self.build_scope():
            self.model = create_agent_model(self.brain, **self.model_arguments(self._values), reward_signals=signals)
            self.signal_names = self.build_reward_signals()
            self.bc = bc.create_behavioral_cloning(self)  # behavioral cloning hook (trainers/imitation/bc.py)
        self.memory_size = self.model.m_size
        #: The acting side; with a recurrent policy and an environment that keeps no memory
        #: (modern protocol: memorySize 0), it keeps each agent's next memory.
        self.policy = PPOPolicy(self.sess, self.model, self.brain, self.rng,
                                keeps_memories=self.use_recurrent and not self.brain.memory_space_size)
        self.deterministic = self.settings.deterministic
        self._acting_fetches = self._act_fetches()
        # The fields each transition carries to the update buffer ('rewards' stays behind).
        self.update_fields = (
            (["states"] if self.model.state_in is not None else [])
            + [f"observations{k}" for k in range(len(self.model.observation_in))]
            + (["memory"] if self.use_recurrent else [])
            + ["actions", "log_probs", "value_estimates", "advantages", "discounted_returns", "masks"]
            + (["action_masks"] if getattr(self.model, "action_masks", None) is not None else [])
            + self.reward_signal_update_fields()
        )

    @property
    def acts_apart_from_experience(self) -> bool:
        """Acting and the experience's processing touch nothing of each other's but the weights and
        the normaliser, unless the policy is recurrent (acting moves on the memories the bootstrap
        values read) or an intrinsic reward signal reads the states the normaliser scales."""
        return not self.use_recurrent and (not self.model.normalize or set(self.reward_signals) <= {"extrinsic"})

    @property
    def bootstrap_reads_acting(self) -> bool:
        """Acting folds each state into the running normaliser, which the bootstrap values read."""
        return bool(self.model.normalize)

    @staticmethod
    def model_arguments(params: Mapping[str, Any]) -> Dict[str, Any]:
        """``create_agent_model`` keyword arguments for these hyperparameters (missing keys: defaults).

        The ghost trainer builds its acting copy of a PPO brain with exactly these, so the two
        networks always have the same variables. The scheduled values (``learning_rate``,
        ``epsilon``, ``beta``) are not among them: the optimizer feeds each one's current value at
        every update (``PPOOptimizer.current_learning_rate`` and the like), its only way into the graph.
        """
        def hp(key: str) -> Any:
            return params.get(key, PPO_HYPERPARAMETERS[key].default)

        return dict(
            h_size=int(hp("hidden_units")), normalize=bool(hp("normalize")), use_recurrent=bool(hp("use_recurrent")),
            num_layers=int(hp("num_layers")), vf_coef=float(hp("vf_coef")),
            max_grad_norm=float(hp("max_grad_norm")), clip_value=bool(hp("clip_value")),
            m_size=int(hp("memory_size")) or None,
            vis_encode_type=str(hp("vis_encode_type")),
        )

    # ------------------------------------------------------------------ configuration checks
    @classmethod
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> Dict[str, Any]:
        """Settings that are each valid but cannot work together; the nested blocks, completed."""
        return check_policy_settings(brain_name, params, "no minibatch could ever be filled")

    @classmethod
    def check_environment(cls, brain_name: str, params: Dict[str, Any],
                          brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        """A recurrent brain needs a usable memorySize from the scene; BC's and GAIL's demonstrations must fit it."""
        check_team_behavior(brain_name, params, brains, external_brain_names)
        if brain_name in brains and getattr(brains[brain_name], "is_hybrid", False):
            # The curiosity/GAIL networks and behavioral cloning read one kind of action.
            learned = [k for k in (params.get("reward_signals") or {}) if k != "extrinsic"]
            for key in (["reward_signals"] if learned else []) + (
                    ["behavioral_cloning"] if params.get("behavioral_cloning") else []):
                raise TrainerConfigError(
                    f"brain '{brain_name}', key '{key}': the brain has hybrid actions (continuous and discrete "
                    f"branches), which {', '.join(learned) if key == 'reward_signals' else 'behavioral cloning'} "
                    "cannot read here. Remove the key (train on the extrinsic reward), or give the behaviour one "
                    "kind of action.")
        if brain_name in brains:  # behavioral cloning hook (trainers/imitation/bc.py)
            bc.check_demonstrations(brain_name, params, brains[brain_name])
        if params["use_recurrent"]:
            key = "memory_size" if params["memory_size"] else "use_recurrent"
            try:
                validate_memory_size(brains[brain_name], params["memory_size"] or None)
            except UnityTrainerException as e:
                raise TrainerConfigError(f"brain '{brain_name}', key '{key}': {e}") from None


    # ------------------------------------------------------------------ acting
    def _memories(self, info: BrainInfo) -> Optional[np.ndarray]:
        """The memories the agents of ``info`` start from (``PPOPolicy.memories``); None unless recurrent."""
        return self.policy.memories(info) if self.use_recurrent else None

    def _input_feed(self, info: BrainInfo, rows: Optional[np.ndarray] = None) -> Dict[tf.Tensor, Any]:
        """Feed for acting / evaluating on the agents ``rows`` of ``info`` (all when None)."""
        inputs = self.policy.inputs
        return dict(zip(inputs.placeholders, inputs.values(info, rows, self._memories(info))))

    def end_episode(self, agents=None) -> None:
        """The base's bookkeeping, and the kept memories of ``agents`` (None: all) are dropped."""
        agents = None if agents is None else list(agents)
        self.policy.forget(agents)
        super().end_episode(agents)

    def _act_fetches(self) -> Dict[str, tf.Tensor]:
        """What an action returns: the action, its log-probability, the values and entropy, the
        normalised state (when normalising) and the next memory (when recurrent)."""
        m = self.model
        fetches = {"actions": m.output, "log_probs": m.log_prob, "values": m.value, "entropy": m.entropy}
        for name in self.signal_names[1:]:
            fetches[f"values_{name}"] = m.values[name]
        if m.normalize:
            fetches["states"] = m.vector_in
        if self.use_recurrent:
            fetches["memory_out"] = m.memory_out
        if self.deterministic and not (m.is_continuous and not m.is_hybrid):
            fetches["probs"] = m.probs  # the most probable branch actions are picked from them
        return fetches

    def act(self, info: BrainInfo) -> PolicyOutput:
        """Act for every agent of the brain with one compiled call.

        Continuous actions get fresh N(0, 1) noise while training and act with the mean
        otherwise (as Unity's Internal brain does with ``epsilon`` left at 0). A ``deterministic``
        policy acts with the mean and each branch's most probable action, training or not, and
        stores those actions' log-probabilities. The stored fields
        are the actions, their log-probs, the values, the normalised states the networks saw,
        the camera frames and the memories the policy started from.
        """
        m = self.model
        training = bool(self.is_training)
        # The normaliser folds in the states while training; it returns None and runs after the action.
        targets = [m.update_normalization] if m.normalize and training else []
        memories = self._memories(info)
        out, action_masks = self.policy.act(info, self._acting_fetches, training and not self.deterministic,
                                            memories, targets)
        if self.deterministic:
            out["actions"], out["log_probs"] = self.policy.greedy(out["actions"], out.get("probs"), out["log_probs"])

        values = out["values"][:, 0]
        self.add_stat("value_estimate", mean_of(values))
        self.add_stat("entropy", mean_of(out["entropy"]))
        actions = out["actions"]
        fields = {
            "actions": actions if self.is_continuous or actions.shape[1] > 1 else actions[:, 0],
            "log_probs": out["log_probs"],
            "value_estimates": values,
        }
        for name in self.signal_names[1:]:
            fields[self.value_field(self.signal_names, name)] = out[f"values_{name}"][:, 0]
        if m.state_in is not None:
            fields["states"] = out.get("states", info.states)
        for k, observation in enumerate(info.observations):
            fields[f"observations{k}"] = observation
        if action_masks is not None:
            fields["action_masks"] = action_masks  # rows of the preallocated ones are only read
        if self.use_recurrent:
            fields["memory"] = memories
            self.policy.remember(info, out["memory_out"])
        return PolicyOutput(actions, fields, memories=out.get("memory_out"), values=values)

    def snapshot_actor(self, scope: str, brain: BrainParameters, rng: np.random.Generator) -> SnapshotActor:
        """An acting copy of this policy under ``scope`` (``trainers.trainer.snapshot_actor``): the same
        network, acting as this trainer acts (sampled, or the mean / most probable action when
        ``deterministic``), keeping its agents' memories when the environment keeps none."""
        with self.sess.graph.as_default(), tf.variable_scope(scope):
            model = create_agent_model(brain, **self.model_arguments(self._values))
        policy = PPOPolicy(self.sess, model, brain, rng,
                           keeps_memories=self.use_recurrent and not brain.memory_space_size)
        fetches = {"action": model.output, **({"memory_out": model.memory_out} if self.use_recurrent else {})}
        if self.deterministic and (model.is_hybrid or not model.is_continuous):
            fetches["probs"] = model.probs
        deterministic = self.deterministic

        def act(info: BrainInfo):
            memories = policy.memories(info) if self.use_recurrent else None
            out, _ = policy.act(info, fetches, sample=not deterministic, memories=memories)
            actions = out["action"]
            if deterministic:
                actions, _ = policy.greedy(actions, out.get("probs"))
            if self.use_recurrent:
                policy.remember(info, out["memory_out"])
            return actions, out.get("memory_out")

        outputs = [model.output] + ([model.memory_out] if self.use_recurrent else [])
        return SnapshotActor(outputs, act, policy.forget, policy)

    # ------------------------------------------------------------------ trajectories
    def bootstrap_values(self, info: BrainInfo, rows: np.ndarray):
        """V of the current state of the agents at ``rows`` (trajectories cut at time_horizon);
        ``{signal: V}`` when the brain has reward signals."""
        call = self.policy.values_call([self.model.values[name] for name in self.signal_names] or [self.model.value])
        values = call(*self.policy.inputs.values(info, rows, self._memories(info)))
        if self.signal_names:
            return {name: v[:, 0] for name, v in zip(self.signal_names, values)}
        return values[0][:, 0]

    def process_trajectory(self, trajectory: AgentBuffer, value_next) -> None:
        """GAE advantages and TD(lambda) returns (``advantages + value_estimates``); with reward
        signals, per signal (each its gamma), the advantages summed."""
        if self.signal_names:
            self.add_reward_signal_fields(trajectory, value_next, lambd=self.settings.lambd)
            return
        add_gae_fields(trajectory, value_next, gamma=self.settings.gamma, lambd=self.settings.lambd)

    # ------------------------------------------------------------------ behavioral cloning
    def cloned_policy(self) -> bc.ClonedPolicy:
        """The policy as behavioral cloning sees it: the mean in the environment's units (under the
        ``"unit"`` contract, ``clamp(mean, -3, 3) / 3`` as ``environment_actions`` sends a sample)."""
        m = self.model
        common = dict(state=m.state_in, observations=m.observation_in, variables=m.variables,
                      batch_size=m.batch_size, constant_feed={m.sequence_length: 1})
        if not m.is_continuous:
            return bc.ClonedPolicy(probs=m.probs, action_masks=getattr(m, "action_masks", None), **common)
        action = m.mu
        if self.brain.continuous_action_contract != "raw":
            action = tf.clip_by_value(action, -CONTINUOUS_ACTION_CLIP, CONTINUOUS_ACTION_CLIP) / CONTINUOUS_ACTION_CLIP
        return bc.ClonedPolicy(action=action, **common)

    def update_model(self) -> None:
        """The RL update, then behavioral cloning (hook: trainers/imitation/bc.py) when configured."""
        super().update_model()
        bc.update_behavioral_cloning(self)

    # ------------------------------------------------------------------ export
    def export_nodes(self) -> List[str]:
        nodes = ["action", "value_estimate", "action_probs"]
        if self.model.is_hybrid:  # the two parts of a hybrid action, for the ONNX outputs
            nodes += ["continuous_action", "discrete_action"]
        return nodes + (["recurrent_out"] if self.use_recurrent else [])


__all__ = ["PPOTrainer", "PPO_HYPERPARAMETERS"]
