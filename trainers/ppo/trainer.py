"""Proximal Policy Optimisation for one External brain, on ``trainers.trainer.bases.OnPolicyTrainer``.

The base collects per-agent trajectories (keeping the transition that starts from a done agent's
post-reset state: Unity resets done agents before sending their state, and the original trainer's
"skip if done" dropped each new episode's first transition), cuts them at done or ``time_horizon``
and calls the hooks below; PPO adds what is specific to it:

1. ``act``: one compiled call (``Session.make_callable``, feed list built once) acts for every
   agent of the brain (and, when training with ``normalize``, folds their states into the running
   normaliser in the same call);
2. ``bootstrap_values``: V of the current state of trajectories cut at ``time_horizon`` (one
   compiled call); ``process_trajectory``: GAE advantages and TD(lambda) returns;
3. ``update`` once the update buffer holds ``buffer_size`` steps: ``num_epoch`` shuffled passes
   over minibatches that together use every sample (whole sequences when recurrent). Each epoch
   permutes every field once; each minibatch is a contiguous slice (a view) of the permuted
   arrays, fed to one compiled call that takes the Adam step together with ``minibatch_extras``.

Why compiled calls and not the whole epoch inside the graph: a ``session.run`` of this graph
costs ~85 us of Python before any op runs and a compiled call ~25 us, against ~1-2 ms of work
in a 3DBall minibatch step (its matmuls: ~53 MFLOP forward and backward for 256 rows), so the
call overhead left is a few percent of the update; an in-graph loop would need a second copy of
every network (the acting graph reads placeholders, which the export contract fixes).

What the update sees is exactly what the policy saw when acting: the stored action, its stored
log-probability, the stored value, the stored normalised state, and for recurrent brains the
stored memory at the start of each sequence. So the first minibatch of each update has ratio 1.

Memories: an API-2 scene stores each agent's memory and sends it back; a modern-protocol
environment stores none, so this trainer keeps them per agent key (``_memories``), the way Unity's
inference carries an ONNX model's ``recurrent_out`` to its next ``recurrent_in``.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from trainers.buffer import AgentBuffer
from trainers.encoders import VISUAL_ENCODERS
from trainers.ghost.self_play import SELF_PLAY_PARAM, check_team_behaviour, validate_self_play
from trainers.imitation import bc
from trainers.ppo.models import PPOModel, create_agent_model, validate_memory_size
from trainers.reward_signals import REWARD_SIGNALS_PARAM, validate_reward_signals
from trainers.tf_utils import tf
from trainers.trainer.base import (
    Param,
    TrainerConfigError,
    UnityTrainerException,
    non_negative,
    positive,
    unit_interval,
)
from trainers.trainer.bases import (
    ON_POLICY_HYPERPARAMETERS,
    OnPolicyTrainer,
    PolicyOutput,
    add_gae_fields,
    discount_rewards,
    get_gae,
)
from unityagents.brain import CONTINUOUS_ACTION_CLIP, BrainInfo, BrainParameters


def _one_of(*options: str):
    return (lambda x: x in options, " or ".join(repr(o) for o in options))


#: Where Release 22's linear schedules end at ``max_steps`` (``ModelUtils.DecayedValue`` floors).
BETA_FLOOR, EPSILON_FLOOR = 1.0e-5, 0.1

PPO_HYPERPARAMETERS: Dict[str, Param] = {
    **ON_POLICY_HYPERPARAMETERS,  # max_steps, summary_freq, trainer, buffer_size, time_horizon, ...
    "batch_size": Param(int, 1024, check=(positive, "> 0"),
                        doc="samples per minibatch (sequences x sequence_length when recurrent)"),
    "beta": Param(float, 5.0e-3, check=(non_negative, ">= 0"),
                  doc="entropy bonus coefficient, for discrete and continuous actions"),
    "epsilon": Param(float, 0.2, check=(lambda x: 0.0 < x < 1.0, "in (0, 1)"),
                     doc="PPO clip range of the ratio (and of the value when clip_value)"),
    "gamma": Param(float, 0.99, check=(unit_interval, "in [0, 1]"), doc="discount factor"),
    "hidden_units": Param(int, 128, check=(positive, "> 0"), doc="units per hidden layer of the policy and value MLPs"),
    "lambd": Param(float, 0.95, check=(unit_interval, "in [0, 1]"),
                   doc="GAE lambda: bias (0) versus variance (1) of the advantages"),
    "learning_rate": Param(float, 3.0e-4, check=(positive, "> 0"), doc="Adam learning rate at step 0"),
    "learning_rate_schedule": Param(str, "linear", check=_one_of("linear", "constant"),
                                    doc="'linear' decays the learning rate to 0 at max_steps"),
    "beta_schedule": Param(str, "constant", check=_one_of("linear", "constant"),
                           doc=f"'linear' decays beta to {BETA_FLOOR} at max_steps (Release 22's run config "
                               "follows learning_rate_schedule when it is not given)"),
    "epsilon_schedule": Param(str, "constant", check=_one_of("linear", "constant"),
                              doc=f"'linear' decays epsilon to {EPSILON_FLOOR} at max_steps (as beta_schedule)"),
    "normalize": Param(bool, True, doc="normalise continuous states by running mean and variance"),
    "num_epoch": Param(int, 3, check=(positive, "> 0"), doc="passes over the update buffer per update"),
    "num_layers": Param(int, 2, check=(non_negative, ">= 0"), doc="hidden layers of the policy and value MLPs"),
    "sequence_length": Param(int, 32, check=(positive, "> 0"), doc="steps per training sequence when use_recurrent"),
    "use_recurrent": Param(bool, False,
                           doc="LSTM whose state round-trips through the brain's memory (memorySize: even, > 0)"),
    "memory_size": Param(int, 0, check=(lambda x: x >= 0 and x % 2 == 0, "even and >= 0"),
                         doc="LSTM memory floats per agent when use_recurrent; 0 takes the brain's memorySize "
                             "(API-2); modern-protocol brains need it (e.g. 128), their memories kept per agent here"),
    "max_grad_norm": Param(float, 0.5, check=(positive, "> 0"), doc="global norm the gradients are clipped to"),
    "vf_coef": Param(float, 0.5, check=(non_negative, ">= 0"), doc="weight of the value loss"),
    "clip_value": Param(bool, True, doc="clip the value loss around the old value predictions (PPO2)"),
    "vis_encode_type": Param(str, "simple", check=_one_of(*VISUAL_ENCODERS),
                             doc="camera encoder: simple (min 20x20), nature_cnn (36), resnet (15), match3 (5), "
                                 "fully_connected (1)"),
    "reward_signals": REWARD_SIGNALS_PARAM,
    "behavioral_cloning": bc.BEHAVIORAL_CLONING_PARAM,
    "self_play": SELF_PLAY_PARAM,
}


class ActingInputs:
    """The inputs of a PPO acting graph in one fixed order: the feed list of its compiled calls.

    The PPO trainer (acting, bootstrap values) and the ghost (acting with a snapshot) feed the
    same network the same way, so both build their feeds here: ``batch_size``,
    ``sequence_length`` (1), the state, each camera, and the memory when recurrent. The values
    are the info's arrays themselves, or their ``rows`` (one fancy index per input).
    """

    def __init__(self, model: PPOModel):
        self.model = model
        m = model
        self.placeholders: List[tf.Tensor] = (
            [m.batch_size, m.sequence_length]
            + ([m.state_in] if m.state_in is not None else [])
            + list(m.observation_in)
            + ([m.memory_in] if m.use_recurrent else [])
        )

    def values(self, info: BrainInfo, rows: Optional[np.ndarray] = None,
               memories: Optional[np.ndarray] = None) -> List[Any]:
        """The values of ``placeholders`` for the agents ``rows`` of ``info`` (all when None).

        :param memories: ``[len(info.agents), memorySize]``, required when recurrent.
        """
        m = self.model
        select = (lambda x: x) if rows is None else (lambda x: np.asarray(x)[rows])
        values: List[Any] = [len(info.agents) if rows is None else len(rows), 1]
        if m.state_in is not None:
            values.append(select(info.states))
        values += [select(observation) for observation in info.observations]
        if m.use_recurrent:
            values.append(select(memories))
        return values


class PPOTrainer(OnPolicyTrainer):
    """PPO for one brain: discrete or continuous actions and states, cameras, optional LSTM."""

    trainer_type = "ppo"
    hyperparameters = PPO_HYPERPARAMETERS
    #: A hybrid brain (continuous actions and discrete branches) gets one policy over both parts.
    supports_hybrid_actions = True

    def __init__(
        self,
        sess,
        brains: Mapping[str, BrainParameters],
        brain_name: str,
        trainer_parameters: Dict[str, Any],
        training: bool,
        seed: int = 0,
    ):
        super().__init__(sess, brains, brain_name, trainer_parameters, training, seed)
        self.use_recurrent = bool(self.hp["use_recurrent"])
        self.sequence_length = int(self.hp["sequence_length"]) if self.use_recurrent else 1
        # Reward signals (trainers.reward_signals): one value head each, then their own networks.
        signals = self.reward_signal_names()
        with self.build_scope():
            self.model = create_agent_model(self.brain, **self.model_arguments(self.hp), reward_signals=signals)
            self.signal_names = self.build_reward_signals()
            self.bc = bc.create_behavioral_cloning(self)  # behavioral cloning hook (trainers/imitation/bc.py)
        self.memory_size = self.model.m_size
        #: The environment keeps no memory (modern protocol: memorySize 0): agent key -> next memory.
        self._memories_here = self.use_recurrent and not self.brain.memory_space_size
        self._agent_memories: Dict[Any, np.ndarray] = {}
        # The fields each transition carries to the update buffer ('rewards' stays behind).
        self.update_fields = (
            (["states"] if self.model.state_in is not None else [])
            + [f"observations{k}" for k in range(len(self.model.observation_in))]
            + (["memory"] if self.use_recurrent else [])
            + ["actions", "log_probs", "value_estimates", "advantages", "discounted_returns", "masks"]
            + (["action_masks"] if getattr(self.model, "action_masks", None) is not None else [])
            + self.reward_signal_update_fields()
        )
        # Compiled calls (Session.make_callable), created on first use, once the graph is final.
        self.acting_inputs = ActingInputs(self.model)
        #: The compiled acting calls, one per value of ``is_training`` (which decides noise and statistics).
        self._act_calls: Dict[bool, Tuple[Callable[..., List[Any]], List[str]]] = {}
        self._value_call: Optional[Callable[..., List[Any]]] = None
        self._update_inputs: Optional[List[Tuple[tf.Tensor, str, bool]]] = None
        self._update_calls: Dict[Any, Callable[..., List[Any]]] = {}
        self._noise_buffers: Optional[Tuple[np.ndarray, np.ndarray]] = None
        self._ones: Optional[np.ndarray] = None

    @staticmethod
    def model_arguments(params: Mapping[str, Any]) -> Dict[str, Any]:
        """``create_agent_model`` keyword arguments for these hyperparameters (missing keys: defaults).

        The ghost trainer builds its acting copy of a PPO brain with exactly these, so the two
        networks always have the same variables.
        """
        def hp(key: str) -> Any:
            return params.get(key, PPO_HYPERPARAMETERS[key].default)

        return dict(
            lr=float(hp("learning_rate")), h_size=int(hp("hidden_units")), epsilon=float(hp("epsilon")),
            beta=float(hp("beta")), normalize=bool(hp("normalize")), use_recurrent=bool(hp("use_recurrent")),
            num_layers=int(hp("num_layers")), vf_coef=float(hp("vf_coef")),
            max_grad_norm=float(hp("max_grad_norm")), clip_value=bool(hp("clip_value")),
            m_size=int(hp("memory_size")) or None,
            vis_encode_type=str(hp("vis_encode_type")),
        )

    # ------------------------------------------------------------------ configuration checks
    @classmethod
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> None:
        """Settings that are each valid but cannot work together; the nested reward_signals block."""
        params["reward_signals"] = validate_reward_signals(brain_name, params.get("reward_signals"))
        params["behavioral_cloning"] = bc.validate_behavioral_cloning(brain_name, params.get("behavioral_cloning"))
        params["self_play"] = validate_self_play(  # team self-play (trainers/ghost/team_trainer.py)
            params.get("self_play"), lambda key: f"brain '{brain_name}', key 'self_play{'.' + key if key else ''}'")
        if params["batch_size"] > params["buffer_size"]:
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'batch_size': {params['batch_size']} is larger than buffer_size "
                f"{params['buffer_size']}, so no minibatch could ever be filled. "
                "Lower batch_size or raise buffer_size.")
        if params["memory_size"] and not params["use_recurrent"]:
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'memory_size': {params['memory_size']} sizes a memory, but use_recurrent "
                "is false, so the policy has none. Set use_recurrent: true, or remove memory_size.")
        if params["use_recurrent"] and params["sequence_length"] > params["batch_size"]:
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'sequence_length': {params['sequence_length']} is longer than "
                f"batch_size {params['batch_size']}; a minibatch must hold at least one whole sequence.")

    @classmethod
    def check_environment(cls, brain_name: str, params: Dict[str, Any],
                          brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        """A recurrent brain needs a usable memorySize from the scene; BC's and GAIL's demonstrations must fit it."""
        check_team_behaviour(brain_name, params, brains, external_brain_names)
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

    # ------------------------------------------------------------------ schedules
    def current_learning_rate(self) -> float:
        """The learning rate at the current agent step (linear: decays to 0 at ``max_steps``)."""
        lr = float(self.hp["learning_rate"])
        if self.hp["learning_rate_schedule"] == "linear":
            lr *= max(1.0 - self.step / self.get_max_steps, 0.0)
        return lr

    def _decayed(self, key: str, floor: float) -> float:
        """``key`` at the current agent step: constant, or linear from its value to ``floor`` at ``max_steps``."""
        value = float(self.hp[key])
        if self.hp[f"{key}_schedule"] != "linear":
            return value
        return (value - floor) * max(1.0 - self.step / self.get_max_steps, 0.0) + floor

    def current_beta(self) -> float:
        """The entropy coefficient at the current agent step (``beta_schedule``)."""
        return self._decayed("beta", BETA_FLOOR)

    def current_epsilon(self) -> float:
        """The clip range at the current agent step (``epsilon_schedule``)."""
        return self._decayed("epsilon", EPSILON_FLOOR)

    # ------------------------------------------------------------------ acting
    def _input_feed(self, info: BrainInfo, rows: Optional[np.ndarray] = None) -> Dict[tf.Tensor, Any]:
        """Feed for acting / evaluating on the agents ``rows`` of ``info`` (all when None)."""
        inputs = self.acting_inputs
        return dict(zip(inputs.placeholders, inputs.values(info, rows, self._memories(info) if self.use_recurrent
                                                            else None)))

    def _memories(self, info: BrainInfo) -> np.ndarray:
        """The memory each agent of ``info`` starts its decision from.

        An API-2 scene stores the memories and sends them back (``info.memories``; zeros on the very
        first step). A modern-protocol environment keeps none, so this trainer keeps them, per agent
        key (``(environment, agent)`` with several environments), as Unity's own inference does:
        zeros for an agent it has not seen and for one whose row starts a new episode (done and
        asking for its next decision); the memory the last decision returned otherwise, which is
        also the memory of a row that only reports its episode's end.
        """
        n, size = len(info.agents), self.model.m_size
        if self._memories_here:
            memories = np.zeros((n, size), dtype=np.float32)
            kept = self._agent_memories
            for r, agent in enumerate(info.agents):
                if info.local_done[r] and info.decision_requested[r]:
                    continue
                memory = kept.get(agent)
                if memory is not None:
                    memories[r] = memory
            return memories
        memories = info.memories
        if memories is None or np.size(memories) == 0:
            return np.zeros((n, size), dtype=np.float32)
        memories = np.asarray(memories, dtype=np.float32)
        if memories.shape != (n, size):
            raise UnityTrainerException(
                f"Brain '{self.brain_name}' expected memories of shape {(n, size)} (agents x memorySize) but the "
                f"environment sent {memories.shape}."
            )
        return memories

    def _remember(self, info: BrainInfo, memory_out: np.ndarray) -> None:
        """Keep each agent's next memory (modern protocol); forget those whose episode just ended."""
        kept = self._agent_memories
        for r, agent in enumerate(info.agents):
            if info.decision_requested[r]:
                kept[agent] = memory_out[r].copy()
            else:
                kept.pop(agent, None)

    def end_episode(self, agents=None) -> None:
        """The base's bookkeeping, and the kept memories of ``agents`` (None: all) are dropped."""
        if agents is None:
            self._agent_memories.clear()
        else:
            agents = list(agents)
            for agent in agents:
                self._agent_memories.pop(agent, None)
        super().end_episode(agents)

    def _act_program(self) -> Tuple[Callable[..., List[Any]], List[str]]:
        """The compiled acting call of this brain and the names of what it returns, in order.

        The feed list is the acting inputs, then the exploration noise (continuous, training)
        and the action masks (branched policies); built on first use, after the graph is final.
        """
        training = bool(self.is_training)
        if training not in self._act_calls:
            m = self.model
            feeds = list(self.acting_inputs.placeholders)
            if self.is_continuous and training:
                feeds.append(m.epsilon)
            if getattr(m, "action_masks", None) is not None:
                feeds.append(m.action_masks)
            fetches = {"actions": m.output, "log_probs": m.log_prob, "values": m.value, "entropy": m.entropy}
            for name in self.signal_names[1:]:
                fetches[f"values_{name}"] = m.values[name]
            if m.normalize:
                fetches["states"] = m.vector_in
            if self.use_recurrent:
                fetches["memory_out"] = m.memory_out
            names = list(fetches)
            targets = [fetches[k] for k in names]
            if m.normalize and training:
                targets.append(m.update_normalization)  # returns None; runs after the action is chosen
            self._act_calls[training] = (self.sess.make_callable(targets, feeds), names)
        return self._act_calls[training]

    def _noise(self, n: int) -> np.ndarray:
        """``[n, actionSize]`` N(0, 1) exploration noise in a preallocated float32 array."""
        shape = (n, self.brain.action_space_size)
        if self._noise_buffers is None or self._noise_buffers[0].shape[0] < n:
            self._noise_buffers = (np.empty(shape), np.empty(shape, np.float32))
        wide, narrow = self._noise_buffers[0][:n], self._noise_buffers[1][:n]
        self.rng.standard_normal(out=wide)  # float64 draws: the same stream as standard_normal(shape)
        np.copyto(narrow, wide)
        return narrow

    def _all_allowed(self, n: int) -> np.ndarray:
        """``[n, sum(branches)]`` ones: the action masks of a brain whose scene sent none."""
        width = int(sum(self.brain.action_branches))
        if self._ones is None or self._ones.shape[0] < n:
            self._ones = np.ones((n, width), np.float32)
        return self._ones[:n]

    def act(self, info: BrainInfo) -> PolicyOutput:
        """Act for every agent of the brain with one compiled call.

        Continuous actions get fresh N(0, 1) noise while training and act with the mean
        otherwise (as Unity's Internal brain does with ``epsilon`` left at 0). The stored fields
        are the actions, their log-probs, the values, the normalised states the networks saw,
        the camera frames and the memories the policy started from.
        """
        n = len(info.agents)
        m = self.model
        call, names = self._act_program()
        memories = self._memories(info) if self.use_recurrent else None
        values_in = self.acting_inputs.values(info, None, memories)
        if self.is_continuous and self.is_training:  # the same test as _act_program's
            values_in.append(self._noise(n))
        action_masks = None
        if getattr(m, "action_masks", None) is not None:  # modern-protocol discrete brains
            action_masks = (self._all_allowed(n) if info.action_masks is None
                            else np.asarray(info.action_masks, np.float32))
            values_in.append(action_masks)
        out = dict(zip(names, call(*values_in)))

        values = out["values"][:, 0]
        self.add_stat("value_estimate", float(np.mean(values)))
        self.add_stat("entropy", float(np.mean(out["entropy"])))
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
            if self._memories_here:
                self._remember(info, out["memory_out"])
        return PolicyOutput(actions, fields, memories=out.get("memory_out"), values=values)

    # ------------------------------------------------------------------ trajectories
    def bootstrap_values(self, info: BrainInfo, rows: np.ndarray):
        """V of the current state of the agents at ``rows`` (trajectories cut at time_horizon);
        ``{signal: V}`` when the brain has reward signals."""
        if self._value_call is None:
            fetches = [self.model.values[name] for name in self.signal_names] or [self.model.value]
            self._value_call = self.sess.make_callable(fetches, list(self.acting_inputs.placeholders))
        memories = self._memories(info) if self.use_recurrent else None
        values = self._value_call(*self.acting_inputs.values(info, rows, memories))
        if self.signal_names:
            return {name: v[:, 0] for name, v in zip(self.signal_names, values)}
        return values[0][:, 0]

    def process_trajectory(self, trajectory: AgentBuffer, value_next) -> None:
        """GAE advantages and TD(lambda) returns (``advantages + value_estimates``); with reward
        signals, per signal (each its gamma), the advantages summed."""
        if self.signal_names:
            self.add_reward_signal_fields(trajectory, value_next, lambd=float(self.hp["lambd"]))
            return
        add_gae_fields(trajectory, value_next, gamma=float(self.hp["gamma"]), lambd=float(self.hp["lambd"]))

    # ------------------------------------------------------------------ updating
    def update_arrays(self) -> Dict[str, np.ndarray]:
        """The update buffer as one array per field (plus ``initial_memory`` when recurrent)."""
        arrays = super().update_arrays()
        if self.use_recurrent:
            # Sequences are left-padded; each starts from the memory stored at its first real step.
            first_real = np.argmax(arrays["masks"] > 0, axis=1)
            arrays["initial_memory"] = arrays["memory"][np.arange(len(first_real)), first_real]
        return arrays

    def update_inputs(self) -> List[Tuple[tf.Tensor, str, bool]]:
        """What each minibatch feeds: ``(placeholder, field, per step)``, in the compiled call's order.

        ``per step`` fields are flattened from sequences to steps when recurrent; the others
        (the initial memory) have one row per sequence.
        """
        if self._update_inputs is None:
            m = self.model
            inputs = [(m.taken_actions, "actions", True), (m.old_log_probs, "log_probs", True),
                      (m.old_value, "value_estimates", True), (m.advantages, "advantages", True),
                      (m.returns, "discounted_returns", True), (m.masks, "masks", True)]
            if m.state_in is not None:
                # Normalised brains replay the normalised input they acted on, not today's statistics.
                inputs.append((m.vector_in if m.normalize else m.state_in, "states", True))
            inputs += [(placeholder, f"observations{k}", True) for k, placeholder in enumerate(m.observation_in)]
            if getattr(m, "action_masks", None) is not None:
                inputs.append((m.action_masks, "action_masks", True))
            if self.use_recurrent:
                inputs.append((m.memory_in, "initial_memory", False))
            for name in self.signal_names[1:]:
                inputs.append((m.signal_returns[name], self.returns_field(self.signal_names, name), True))
                inputs.append((m.signal_old_values[name], self.value_field(self.signal_names, name), True))
            self._update_inputs = inputs
        return self._update_inputs

    def _scalar_inputs(self) -> List[tf.Tensor]:
        """The scalars fed with every minibatch, before the ``update_inputs``."""
        m = self.model
        return [m.batch_size, m.sequence_length, m.learning_rate, m.clip_epsilon, m.beta]

    def minibatch_feed(self, arrays: Mapping[str, np.ndarray], rows: np.ndarray,
                       learning_rate: float) -> Dict[tf.Tensor, Any]:
        """The feed of one minibatch as a dict: ``rows`` index samples (sequences when recurrent)."""
        scalars = [len(rows), self.sequence_length, learning_rate, self.current_epsilon(), self.current_beta()]
        feed: Dict[tf.Tensor, Any] = dict(zip(self._scalar_inputs(), scalars))
        for placeholder, key, per_step in self.update_inputs():
            feed[placeholder] = self._flat(arrays[key][rows]) if per_step else arrays[key][rows]
        return feed

    def minibatch_extras(self, minibatch: Mapping[str, np.ndarray]
                         ) -> Tuple[Dict[tf.Tensor, Any], List[Any], List[str]]:
        """``(feed, fetches, metric names)`` run with the policy's step on each minibatch, in the same call.

        The one place for anything else that trains on the update's minibatches (the reward
        signals' networks today): ``minibatch`` holds the fields of ``minibatch_fields`` for the
        minibatch's rows (flat steps); the first ``len(names)`` fetches are metrics, averaged
        over the update and recorded under those names; the rest are ops.
        """
        if not self.reward_signals:
            return {}, [], []
        return self.reward_signal_update(minibatch)

    def minibatch_fields(self, batch: Mapping[str, np.ndarray]) -> List[str]:
        """The fields ``minibatch_extras`` reads from each minibatch."""
        if not self.reward_signals:
            return []
        return [key for key in batch if key.startswith("signal_")] + ["actions", "masks"]

    def _update_call(self, extra_feeds: Sequence[tf.Tensor], extra_fetches: Sequence[Any]) -> Callable[..., List[Any]]:
        """The compiled minibatch step for this set of extra feeds and fetches (cached: one per set)."""
        key = (tuple(id(t) for t in extra_feeds), tuple(id(t) for t in extra_fetches))
        call = self._update_calls.get(key)
        if call is None:
            m = self.model
            fetches = [m.policy_loss, m.value_loss, m.mean_entropy, m.approx_kl, m.clip_fraction]
            feeds = self._scalar_inputs() + [placeholder for placeholder, _, _ in self.update_inputs()]
            call = self.sess.make_callable(fetches + list(extra_fetches) + [m.update_batch],
                                           feeds + list(extra_feeds))
            self._update_calls[key] = call
        return call

    def update(self, batch: Dict[str, np.ndarray]) -> None:
        """``num_epoch`` shuffled passes over the update buffer (the base empties it afterwards).

        Each epoch permutes every field once; its minibatches are then contiguous slices (views)
        of the permuted arrays, each fed to one compiled call that runs the PPO step and
        ``minibatch_extras``. The minibatches are those of ``np.array_split`` over the epoch's
        permutation, so the samples of each step do not depend on how they are fed.
        """
        n = len(batch["actions"])
        per_batch = max(int(self.hp["batch_size"]) // self.sequence_length, 1)
        n_batches = max(math.ceil(n / per_batch), 1)
        learning_rate = self.current_learning_rate()
        epsilon, beta = self.current_epsilon(), self.current_beta()
        scalars = [self.sequence_length, learning_rate, epsilon, beta]
        inputs = self.update_inputs()
        extra_fields = self.minibatch_fields(batch)
        sizes = [len(part) for part in np.array_split(np.arange(n), n_batches)]
        bounds = np.cumsum([0] + sizes)
        metrics: List[List[float]] = []
        extra_metrics: List[List[float]] = []
        extra_names: List[str] = []
        for _ in range(int(self.hp["num_epoch"])):
            permutation = self.rng.permutation(n)
            shuffled = [batch[key][permutation] for _, key, _ in inputs]
            shuffled_extra = {key: batch[key][permutation] for key in extra_fields}
            for start, end in zip(bounds[:-1], bounds[1:]):
                values = [self._flat(a[start:end]) if per_step else a[start:end]
                          for a, (_, _, per_step) in zip(shuffled, inputs)]
                extra_feed, extra_fetches, extra_names = self.minibatch_extras(
                    {key: self._flat(a[start:end]) for key, a in shuffled_extra.items()})
                call = self._update_call(list(extra_feed), extra_fetches)
                out = call(int(end - start), *scalars, *values, *extra_feed.values())
                metrics.append(out[:5])
                if extra_names:
                    extra_metrics.append(out[5:5 + len(extra_names)])
        if extra_metrics:
            for name, value in zip(extra_names, np.mean(extra_metrics, axis=0)):
                self.add_signal_stat(name, value)
        for key, value in zip(("policy_loss", "value_loss", "policy_entropy", "approx_kl", "clip_fraction"),
                              np.mean(metrics, axis=0)):
            self.add_stat(key, value)
        self.add_stat("learning_rate", learning_rate)
        self.add_stat("epsilon", epsilon)
        self.add_stat("beta", beta)

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

    def _flat(self, batch: np.ndarray) -> np.ndarray:
        """``[sequences, T, ...] -> [sequences*T, ...]`` when recurrent; unchanged otherwise."""
        return batch.reshape((-1,) + batch.shape[2:]) if self.use_recurrent else batch

    # ------------------------------------------------------------------ export
    def export_nodes(self) -> List[str]:
        nodes = ["action", "value_estimate", "action_probs"]
        if self.model.is_hybrid:  # the two parts of a hybrid action, for the ONNX outputs
            nodes += ["continuous_action", "discrete_action"]
        return nodes + (["recurrent_out"] if self.use_recurrent else [])


__all__ = ["ActingInputs", "PPOTrainer", "PPO_HYPERPARAMETERS", "discount_rewards", "get_gae"]
