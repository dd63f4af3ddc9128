"""The public Python API, both doors, pinned: every documented name, every documented signature,
and the flows a user's script runs through them (``docs/python-api.md``).

* The seed's door: ``from unityagents import UnityEnvironment, BrainInfo, BrainParameters,
  Curriculum``; ``reset``/``step`` return ``{brain name: BrainInfo}``; ``step`` takes plain arrays.
  The seed's trainer modules (``trainers.ppo_models``, ``trainers.buffer``, ...) under their names.
* mlagents_envs 1.1's low-level API: ``unityagents.environment``, ``unityagents.base_env``,
  ``unityagents.side_channels``, ``unityagents.exception``; ``behavior_specs``, ``get_steps``,
  ``set_actions``, ``set_action_for_agent``, ``step()``.

A change to any name or signature below fails here: such a change breaks users' scripts, so it
needs a new name beside the old one, not an edit of the table.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import os
import socket

import numpy as np
import pytest

from unityagents import UnityEnvironment


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ----------------------------------------------------------------------------------------- names
NAMES = {
    "unityagents": ["UnityEnvironment", "BrainInfo", "BrainParameters", "Curriculum", "UnityException",
                    "UnityEnvironmentException", "UnityActionException", "UnityTimeOutException",
                    "ActionSpec", "ActionTuple", "BehaviorSpec", "DecisionSteps", "ObservationSpec", "TerminalSteps"],
    "unityagents.environment": ["UnityEnvironment"],
    "unityagents.brain": ["BrainParameters"],
    "unityagents.brain_info": ["BrainInfo"],
    "unityagents.curriculum": ["Curriculum"],
    "unityagents.base_env": ["ActionSpec", "ActionTuple", "AgentId", "BaseEnv", "BehaviorName", "BehaviorSpec",
                             "DecisionStep", "DecisionSteps", "DimensionProperty", "GroupId", "ObservationSpec",
                             "ObservationType", "TerminalStep", "TerminalSteps"],
    "unityagents.side_channels": ["EngineConfig", "EngineConfigurationChannel", "EnvironmentParametersChannel",
                                  "IncomingMessage", "OutgoingMessage", "SideChannel"],
    "unityagents.exception": ["UnityException", "UnityEnvironmentException", "UnityActionException",
                              "UnityTimeOutException", "UnityCommunicationException",
                              "UnityCommunicatorStoppedException", "UnityObservationException",
                              "UnitySideChannelException", "UnityPolicyException", "UnityWorkerInUseException"],
    "trainers.ppo_models": ["create_agent_model", "PPOModel"],
    "trainers.buffer": ["Buffer", "BufferException"],
    "trainers.ppo_trainer": ["PPOTrainer"],
    "trainers.ghost_trainer": ["GhostTrainer"],
    "trainers.imitation_trainer": ["ImitationTrainer"],
    "trainers.trainer": ["Trainer", "UnityTrainerException"],
}


@pytest.mark.parametrize("module", sorted(NAMES))
def test_every_documented_name_imports(module):
    loaded = importlib.import_module(module)
    missing = [name for name in NAMES[module] if not hasattr(loaded, name)]
    assert not missing, f"{module} lost {missing}"


def test_every_exception_is_a_unity_exception_and_the_seed_hierarchy_holds():
    from unityagents import exception as e

    for name in NAMES["unityagents.exception"]:
        assert issubclass(getattr(e, name), e.UnityException), name
    from trainers.trainer import UnityTrainerException
    assert issubclass(UnityTrainerException, e.UnityException)
    assert e.UnityWorkerInUseException("taken", 3).worker_id == 3


# ------------------------------------------------------------------------------------ signatures
def _params(obj) -> list:
    """``name=default`` (``name`` when it has none; ``*`` before keyword-only ones) of a callable."""
    out, star = [], False
    for p in inspect.signature(obj).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.kind == p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        out.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return out


def _resolve(path: str):
    module, _, attribute = path.partition(":")
    obj = importlib.import_module(module)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


SIGNATURES = {
    # the seed's door (api2-facts §2, §6) and mlagents_envs' constructor keywords after it
    "unityagents:UnityEnvironment.__init__": [
        "file_name=None", "worker_id=0", "base_port=None", "curriculum=None", "seed=None", "timeout_wait=30.0",
        "start_timeout=60.0", "log_dir=None", "env_args=()", "protocol=None", "engine_config=None",
        "no_graphics=False", "side_channels=None", "*", "no_graphics_monitor=False", "additional_args=None",
        "log_folder=None", "num_areas=1"],
    "unityagents:UnityEnvironment.reset": ["train_mode=True", "config=None", "lesson=None"],
    "unityagents:UnityEnvironment.step": ["action=None", "memory=None", "value=None"],
    "unityagents:UnityEnvironment.close": [],
    "unityagents:BrainParameters.__init__": ["brain_name", "brain_param"],
    "unityagents:BrainInfo.__init__": [
        "observation", "state", "memory=None", "reward=None", "agents=None", "local_done=None", "action=None",
        "max_reached=None", "action_masks=None", "group_id=None", "group_rewards=None", "decision_requested=None",
        "terminal_info=None"],
    "unityagents:Curriculum.__init__": ["location", "default_reset_parameters"],
    "unityagents:Curriculum.increment_lesson": ["progress"],
    "unityagents:Curriculum.get_config": ["lesson=None"],
    "unityagents:Curriculum.set_lesson_number": ["value"],
    "trainers.ppo_models:create_agent_model": ["brain", "max_step=5000000.0"],
    "trainers.ppo_models:PPOModel.__init__": [
        "brain", "lr=0.0001", "h_size=128", "epsilon=0.2", "beta=0.001", "normalize=False", "use_recurrent=False",
        "num_layers=2", "m_size=None", "vf_coef=0.5", "max_grad_norm=0.5", "clip_value=True", "reward_signals=()",
        "vis_encode_type='simple'"],
    "trainers.buffer:Buffer.reset_update_buffer": [],
    "trainers.buffer:Buffer.reset_all": [],
    "trainers.buffer:Buffer.append_update_buffer": ["agent_id", "key_list=None", "batch_size=None",
                                                    "training_length=None"],
    "trainers.buffer:Buffer.append_all_agent_batch_to_update_buffer": ["key_list=None", "batch_size=None",
                                                                       "training_length=None"],
    # mlagents_envs 1.1's low-level API
    "unityagents.environment:UnityEnvironment.get_steps": ["behavior_name"],
    "unityagents.environment:UnityEnvironment.set_actions": ["behavior_name", "action"],
    "unityagents.environment:UnityEnvironment.set_action_for_agent": ["behavior_name", "agent_id", "action"],
    "unityagents.base_env:ActionTuple.__init__": ["continuous=None", "discrete=None"],
    "unityagents.base_env:ActionTuple.add_continuous": ["continuous"],
    "unityagents.base_env:ActionTuple.add_discrete": ["discrete"],
    "unityagents.base_env:ActionSpec.__init__": ["continuous_size", "discrete_branches=()"],
    "unityagents.base_env:ActionSpec.empty_action": ["n_agents"],
    "unityagents.base_env:ActionSpec.random_action": ["n_agents", "rng=None"],
    "unityagents.base_env:ActionSpec.create_continuous": ["continuous_size"],
    "unityagents.base_env:ActionSpec.create_discrete": ["discrete_branches"],
    "unityagents.base_env:ActionSpec.create_hybrid": ["continuous_size", "discrete_branches"],
    "unityagents.base_env:DecisionSteps.__init__": ["obs", "reward", "agent_id", "action_mask=None",
                                                    "group_id=None", "group_reward=None", "memory=None",
                                                    "previous_action=None"],
    "unityagents.base_env:TerminalSteps.__init__": ["obs", "reward", "interrupted", "agent_id", "group_id=None",
                                                    "group_reward=None", "previous_action=None"],
    "unityagents.base_env:DecisionSteps.empty": ["spec"],
    "unityagents.base_env:TerminalSteps.empty": ["spec"],
    "unityagents.side_channels:SideChannel.__init__": ["channel_id"],
    "unityagents.side_channels:SideChannel.queue_message_to_send": ["msg"],
    "unityagents.side_channels:SideChannel.on_message_received": ["msg"],
    "unityagents.side_channels:EngineConfigurationChannel.set_configuration_parameters": [
        "width=None", "height=None", "quality_level=None", "time_scale=None", "target_frame_rate=None",
        "capture_frame_rate=None"],
    "unityagents.side_channels:EngineConfigurationChannel.set_configuration": ["config"],
    "unityagents.side_channels:EnvironmentParametersChannel.set_float_parameter": ["key", "value"],
    "unityagents.side_channels:EnvironmentParametersChannel.set_uniform_sampler_parameters": [
        "key", "min_value", "max_value", "seed"],
    "unityagents.side_channels:EnvironmentParametersChannel.set_gaussian_sampler_parameters": [
        "key", "mean", "st_dev", "seed"],
    "unityagents.side_channels:EnvironmentParametersChannel.set_multirangeuniform_sampler_parameters": [
        "key", "intervals", "seed"],
}


@pytest.mark.parametrize("path", sorted(SIGNATURES))
def test_every_documented_signature_holds(path):
    assert _params(_resolve(path)) == SIGNATURES[path]


def test_the_seed_and_the_low_level_api_reach_the_same_classes():
    from unityagents import base_env, environment, exception, side_channels
    from unityagents.wire import side_channels as wire_channels

    assert environment.UnityEnvironment is UnityEnvironment
    assert issubclass(UnityEnvironment, base_env.BaseEnv)
    assert side_channels.SideChannel is wire_channels.SideChannel
    import unityagents
    assert unityagents.UnityActionException is exception.UnityActionException
    from trainers.trainer.brain_info import BrainInfo
    assert BrainInfo is unityagents.BrainInfo  # the trainers' batch is the door's, not a copy


# ------------------------------------------------------------------------- the seed's flow, both protocols
def _seed_action(brain, n, rng):
    """What a seed-era script sends: a continuous brain a [n, size] array, a discrete one an index per agent."""
    if brain.action_space_type == "continuous":
        return rng.uniform(-1, 1, (n, brain.action_space_size))
    return rng.integers(0, brain.action_space_size, n).tolist()


@pytest.mark.parametrize("protocol", ["api2", "grpc"])
@pytest.mark.parametrize("scene, steps", [("3DBall", 40), ("Basic", 12), ("GridWorld", 70)])
def test_a_seed_era_script_runs_on_built_in_scenes(scene, steps, protocol):
    rng = np.random.default_rng(0)
    env = UnityEnvironment(scene, base_port=free_port(), seed=0, protocol=protocol)
    try:
        assert env.protocol == protocol
        name = env.external_brain_names[0]  # the seed's names over API-2, Unity's behaviour names over gRPC
        brain = env.brains[name]
        assert env.number_external_brains == 1 and name in env.brain_names and env.academy_name
        assert f"Number of External Brains : {env.number_external_brains}" in str(env)
        info = env.reset(train_mode=True)[name]
        assert env.global_done is False
        saw_done = False
        for _ in range(steps):
            n = len(info.agents)
            assert isinstance(info.states, np.ndarray) and info.states.shape[0] == n
            assert len(info.observations) == brain.number_observations
            for camera, frames in zip(brain.camera_resolutions, info.observations):
                channels = 1 if camera.get("blackAndWhite") else 3
                assert frames.shape == (n, camera["height"], camera["width"], channels)
                assert frames.min() >= 0.0 and frames.max() <= 1.0
            assert len(info.rewards) == n and all(isinstance(r, float) for r in info.rewards)
            assert len(info.local_done) == n and all(isinstance(d, bool) for d in info.local_done)
            assert np.shape(info.previous_actions) == (n, brain.action_width)
            info = env.step(_seed_action(brain, n, rng))[name]
            saw_done |= any(info.local_done)
            if env.global_done:
                info = env.reset()[name]
        assert saw_done, f"no agent of {scene} finished an episode in {steps} random steps"
        if protocol == "api2" and brain.state_space_type == "continuous":
            assert info.states.shape == (len(info.agents), brain.state_space_size)
    finally:
        env.close()


# ------------------------------------------------------------------ the low-level API, both protocols
def _llapi_episodes(env, episodes: int):
    """The loop of ML-Agents' Python-API guide, as a user writes it: follow one agent per episode."""
    env.reset()
    behavior_name = list(env.behavior_specs)[0]
    spec = env.behavior_specs[behavior_name]
    totals, endings = [], []
    for _ in range(episodes):
        env.reset()
        decision_steps, terminal_steps = env.get_steps(behavior_name)
        tracked_agent = decision_steps.agent_id[0]
        done, episode_rewards = False, 0.0
        while not done:
            env.set_actions(behavior_name, spec.action_spec.random_action(len(decision_steps)))
            env.step()
            decision_steps, terminal_steps = env.get_steps(behavior_name)
            if tracked_agent in terminal_steps:
                episode_rewards += terminal_steps[tracked_agent].reward
                endings.append(terminal_steps[tracked_agent].reward)
                done = True
            elif tracked_agent in decision_steps:
                episode_rewards += decision_steps[tracked_agent].reward
        totals.append(episode_rewards)
    env.close()
    return behavior_name, spec, totals, endings


@pytest.mark.parametrize("protocol", ["api2", "grpc"])
def test_an_llapi_script_runs_on_both_protocols(protocol):
    from unityagents.environment import UnityEnvironment as Env

    env = Env(file_name="3DBall", seed=1, base_port=free_port(), protocol=protocol)
    name, spec, totals, endings = _llapi_episodes(env, 3)
    assert name in ("Ball3DBrain", "3DBall?team=0", "3DBall", "3DBall?team=0")
    assert spec.action_spec.continuous_size == 2 and spec.action_spec.is_continuous()
    assert spec.observation_specs[0].shape == (8,)
    assert len(totals) == 3 and all(np.isfinite(totals))
    assert all(r < 0 for r in endings), endings  # random actions drop the ball: the episode ends in a penalty


def test_side_channels_choose_the_modern_protocol_and_reach_the_scene():
    from unityagents.side_channels import EngineConfigurationChannel, EnvironmentParametersChannel

    engine = EngineConfigurationChannel()
    parameters = EnvironmentParametersChannel()
    env = UnityEnvironment("3DBall", base_port=free_port(), seed=0, side_channels=[engine, parameters])
    try:
        assert env.protocol == "grpc"
        engine.set_configuration_parameters(time_scale=2.0)
        parameters.set_float_parameter("scale", 1.5)
        env.reset()
        behavior = list(env.behavior_specs)[0]
        assert len(env.get_steps(behavior)[0]) == 12
    finally:
        env.close()


def test_discrete_actions_and_one_agent_at_a_time_over_the_low_level_api():
    from unityagents.base_env import ActionTuple

    env = UnityEnvironment("GridWorld", base_port=free_port(), seed=0, protocol="grpc")
    try:
        env.reset()
        name = list(env.behavior_specs)[0]
        spec = env.behavior_specs[name]
        assert spec.action_spec.discrete_branches == (4,)
        visual = [o for o in spec.observation_specs if len(o.shape) == 3]
        decisions, _ = env.get_steps(name)
        assert visual and decisions.obs[spec.observation_specs.index(visual[0])].shape == (1,) + visual[0].shape
        agent = list(decisions)[0]
        assert decisions[agent].action_mask is None or len(decisions[agent].action_mask) == 1
        env.set_action_for_agent(name, agent, ActionTuple(discrete=[[2]]))
        env.step()
        assert len(env.get_steps(name)[0]) + len(env.get_steps(name)[1]) >= 1
    finally:
        env.close()


@pytest.mark.parametrize("protocol", ["api2", "grpc"])
def test_each_door_has_its_camera_layout(protocol):
    """GridWorld's camera: the low-level API gives it channels first, as mlagents_envs does (spec
    ``(C, H, W)``, obs ``[n, C, H, W]``); the seed's ``BrainInfo.observations`` and the step types the
    trainers and bridges read (``reset_behaviors``/``step_behaviors``) keep ``[n, H, W, C]``; all
    three hold the same pixels, in [0, 1]."""
    from unityagents.base_env import ActionTuple, DimensionProperty

    env = UnityEnvironment("GridWorld", base_port=free_port(), seed=0, protocol=protocol)
    try:
        name = env.external_brain_names[0]
        camera = env.brains[name].camera_resolutions[0]
        h, w = camera["height"], camera["width"]
        c = 1 if camera.get("blackAndWhite") else 3
        assert (c, h, w) != (h, w, c)  # a layout swap shows in the shape
        specs = env.behavior_specs[name].observation_specs
        k = next(i for i, o in enumerate(specs) if len(o.shape) == 3)
        assert specs[k].shape == (c, h, w)
        assert specs[k].dimension_property == (
            DimensionProperty.NONE, DimensionProperty.TRANSLATIONAL_EQUIVARIANCE,
            DimensionProperty.TRANSLATIONAL_EQUIVARIANCE)
        info = env.reset()[name]
        for _answer in range(2):  # the reset's, then a step's
            decisions, _ = env.get_steps(name)
            n = len(decisions)
            seed_frames = info.observations[0]
            assert seed_frames.shape == (len(info.agents), h, w, c)
            assert 0.0 <= seed_frames.min() and seed_frames.max() <= 1.0 and seed_frames.max() > 0.0
            assert decisions.obs[k].shape == (n, c, h, w)
            np.testing.assert_array_equal(decisions.obs[k], np.moveaxis(seed_frames[:n], -1, 1))
            if n:
                assert decisions[decisions.agent_id[0]].obs[k].shape == (c, h, w)
            env.set_actions(name, ActionTuple(discrete=np.ones((n, 1), np.int32)))
            info = env.step()[name]
        internal, _ = env.reset_behaviors()[name]
        assert internal.obs[k].shape == (len(internal), h, w, c)
    finally:
        env.close()


# ------------------------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def ball():
    env = UnityEnvironment("3DBall", base_port=free_port(), seed=0, protocol="api2")
    yield env
    env.close()


def test_stepping_before_reset_is_the_seeds_error():
    from unityagents import UnityActionException, UnityEnvironmentException

    env = UnityEnvironment("Basic", base_port=free_port(), seed=0)
    try:
        with pytest.raises(UnityActionException, match="without first calling reset"):
            env.step([0])
        with pytest.raises(UnityActionException, match="without first calling reset"):
            env.step()
        with pytest.raises(UnityEnvironmentException, match="call reset"):
            env.get_steps("BasicBrain")
    finally:
        env.close()
    with pytest.raises(UnityEnvironmentException, match="No Unity environment is loaded"):
        env.reset()


@pytest.mark.parametrize("action, match", [
    (np.zeros((12, 3)), r"mismatch between the provided action.*expects 24 floats.*got 36"),
    (np.zeros(5), r"mismatch between the provided action.*got 5"),
    (["a", "b"], "must be numbers"),
    ({"NoSuchBrain": np.zeros((12, 2))}, "not a brain of this environment"),
])
def test_a_seed_action_of_the_wrong_size_or_type_is_a_unity_action_exception(ball, action, match):
    from unityagents import UnityActionException

    ball.reset()
    with pytest.raises(UnityActionException, match=match):
        ball.step(action)


def test_low_level_api_bad_input_names_what_was_expected(ball):
    from unityagents.base_env import ActionTuple
    from unityagents.exception import UnityActionException

    ball.reset()
    with pytest.raises(UnityActionException, match=r"'Nope'.*does not correspond.*Ball3DBrain"):
        ball.get_steps("Nope")
    with pytest.raises(UnityActionException, match=r"'Nope'.*does not correspond"):
        ball.set_actions("Nope", ActionTuple(np.zeros((12, 2))))
    with pytest.raises(UnityActionException, match=r"shape \(3, 2\).*expects \(12, 2\)"):
        ball.set_actions("Ball3DBrain", ActionTuple(np.zeros((3, 2))))
    with pytest.raises(UnityActionException, match="must be an ActionTuple"):
        ball.set_actions("Ball3DBrain", np.zeros((12, 2)))
    with pytest.raises(UnityActionException, match="whole branch indices"):
        ActionTuple(discrete=[[0.5]])
    with pytest.raises(UnityActionException, match="did not request a decision.*deciding agents are"):
        ball.set_action_for_agent("Ball3DBrain", 123456789, ActionTuple(np.zeros((1, 2))))
    with pytest.raises(UnityActionException, match=r"shape \(2, 2\).*expects \(1, 2\)"):
        ball.set_action_for_agent("Ball3DBrain", list(ball.get_steps("Ball3DBrain")[0])[0],
                                  ActionTuple(np.zeros((2, 2))))
    ball.set_actions("Ball3DBrain", ActionTuple(np.zeros((12, 2))))
    with pytest.raises(UnityActionException, match="one door per step"):
        ball.step(np.zeros((12, 2)))
    ball.step()  # the actions set above
    ball.step(ActionTuple(np.zeros((12, 2))))  # the original door takes the step types too
    with pytest.raises(UnityActionException, match=r"shape \(2, 2\).*expects \(12, 2\)"):
        ball.step({"Ball3DBrain": ActionTuple(np.zeros((2, 2)))})


def test_after_global_done_step_asks_for_a_reset(ball):
    from unityagents import UnityActionException

    ball.reset()
    ball.global_done = True  # what the last answer of an Academy whose episode ended sets
    try:
        with pytest.raises(UnityActionException, match="episode is completed"):
            ball.step(np.zeros((12, 2)))
    finally:
        ball.reset()


def test_a_positional_seed_in_the_curriculums_place_is_refused():
    with pytest.raises(TypeError, match="curriculum .*4th positional.*original.*seed=\\.\\.\\."):
        UnityEnvironment("3DBall", 0, free_port(), 42)


# ------------------------------------------------------- the seed's own assertions, in our words
def test_curriculum_lessons_advance_as_the_seed_says():
    """The seed's curriculum file (thresholds 10, 20, 50; at least 3 evaluations per lesson;
    smoothed reward): a lesson changes only after enough evaluations above its threshold, one
    lesson at a time, and ``get_config`` gives the current lesson's or a named lesson's values."""
    from unityagents import Curriculum, UnityEnvironmentException

    with pytest.raises(UnityEnvironmentException):
        Curriculum("curricula/test.json", {"param1": 1, "param2": 1})  # param3 is not a reset parameter
    curriculum = Curriculum("curricula/test.json", {"param1": 1, "param2": 1, "param3": 1})
    assert curriculum.get_lesson_number == 0
    curriculum.set_lesson_number(1)
    assert curriculum.get_lesson_number == 1
    curriculum.increment_lesson(10)
    assert curriculum.get_lesson_number == 1  # 0.75 * 10 is under lesson 1's threshold of 20
    curriculum.increment_lesson(30)
    curriculum.increment_lesson(30)
    assert curriculum.get_lesson_number == 1  # above it, but only 3 evaluations so far
    curriculum.increment_lesson(30)
    assert curriculum.get_lesson_number == 2
    assert curriculum.get_config() == {"param1": 0.3, "param2": 20, "param3": 0.7}
    assert curriculum.get_config(0) == {"param1": 0.7, "param2": 100, "param3": 0.2}


def test_buffer_keeps_the_seeds_semantics():
    """Agents' fields fill on first access; ``get_batch`` takes the last elements, or the last
    non-overlapping sequences, or overlapping windows; the update buffer gathers sequences."""
    from trainers.buffer import Buffer

    b = Buffer()
    for agent in range(4):
        for i in range(9):
            b[agent]["state"].append([100 * agent + 10 * i + k for k in (1, 2, 3)])
            b[agent]["action"].append([100 * agent + 10 * i + k for k in (4, 5)])
    np.testing.assert_array_equal(b[1]["state"].get_batch(batch_size=2, training_length=None, sequential=True),
                                  [[171, 172, 173], [181, 182, 183]])
    np.testing.assert_array_equal(b[2]["state"].get_batch(batch_size=2, training_length=3, sequential=True),
                                  [[[231, 232, 233], [241, 242, 243], [251, 252, 253]],
                                   [[261, 262, 263], [271, 272, 273], [281, 282, 283]]])
    np.testing.assert_array_equal(b[2]["state"].get_batch(batch_size=2, training_length=3, sequential=False),
                                  [[[251, 252, 253], [261, 262, 263], [271, 272, 273]],
                                   [[261, 262, 263], [271, 272, 273], [281, 282, 283]]])
    b[4].reset_agent()
    assert len(b[4]) == 0
    b.append_update_buffer(3, batch_size=None, training_length=2)
    b.append_update_buffer(2, batch_size=None, training_length=2)
    assert len(b.update_buffer["action"]) == 10
    assert np.array(b.update_buffer["action"]).shape == (10, 2, 2)


def _seed_brain(action_space_type: int, cameras: list):
    from unityagents import BrainParameters

    return BrainParameters("RealFakeBrain", {
        "stateSize": 3, "actionSize": 2, "memorySize": 0, "cameraResolutions": cameras,
        "actionDescriptions": ["", ""], "actionSpaceType": action_space_type, "stateSpaceType": 1})


@pytest.mark.parametrize("action_space_type, cameras", [
    (1, []),                                                        # continuous actions, a state
    (0, [{"width": 30, "height": 40, "blackAndWhite": False}]),     # discrete actions, a state and a camera
])
def test_the_seeds_ppo_model_feeds_run(action_space_type, cameras):
    """The seed's two model tests: build under a variable scope, initialise, run the seed's fetches
    on the seed's feeds (two agents; the continuous model's sampling noise, the camera's frames)."""
    from trainers.ppo_models import create_agent_model
    from trainers.tf_utils import tf

    graph = tf.Graph()
    with graph.as_default(), tf.Session(graph=graph) as sess:
        with tf.variable_scope("FakeGraphScope"):
            model = create_agent_model(_seed_brain(action_space_type, cameras), lr=3e-4, h_size=64, epsilon=0.2,
                                       beta=2.5e-3, max_step=1e6, normalize=False, use_recurrent=False,
                                       num_layers=2, m_size=None)
        sess.run(tf.global_variables_initializer())
        feed = {model.batch_size: 2, model.sequence_length: 1, model.state_in: np.array([[1, 2, 3], [3, 4, 5]])}
        if cameras:
            feed[model.observation_in[0]] = np.ones([2, 40, 30, 3])
        else:
            feed[model.epsilon] = np.random.randn(2, 2)
        output, probs, value, entropy, learning_rate = sess.run(
            [model.output, model.probs, model.value, model.entropy, model.learning_rate], feed_dict=feed)
        assert len(output) == 2 and np.all(np.isfinite(value)) and np.all(np.isfinite(entropy))
        assert np.isclose(learning_rate, 3e-4)
        if cameras:
            assert probs.shape == (2, 2) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)


def test_the_seeds_recurrent_model_has_its_memory_tensors():
    from trainers.ppo_models import create_agent_model
    from trainers.tf_utils import tf

    graph = tf.Graph()
    with graph.as_default(), tf.Session(graph=graph) as sess:
        model = create_agent_model(_seed_brain(1, []), use_recurrent=True, m_size=16)
        sess.run(tf.global_variables_initializer())
        memory = sess.run(model.memory_out, feed_dict={
            model.batch_size: 2, model.sequence_length: 1, model.state_in: np.ones((2, 3)),
            model.memory_in: np.zeros((2, 16))})
        assert memory.shape == (2, 16)


def test_learn_py_keeps_the_names_scripts_import_while_the_run_lives_in_runner():
    """``learn.RunOptions``, ``learn.run``, ``learn.train``, ``learn.shipped_file``... stay importable from
    learn.py, and are the runner's own objects (one run, whichever front end built its options)."""
    import learn
    import runner.options
    import runner.run

    for name in learn.__all__:
        assert hasattr(learn, name), name
    assert learn.RunOptions is runner.options.RunOptions and learn.shipped_file is runner.options.shipped_file
    assert learn.run is runner.run.run and learn.train is runner.run.train
    assert (learn.EXIT_SIGINT_SAVED, learn.EXIT_SIGINT_NOTHING_SAVED, learn.EXIT_SIGTERM) == (0, 130, 143)
    assert list(inspect.signature(learn.run).parameters) == ["make_options"]
    assert list(inspect.signature(learn.train).parameters) == ["opts"]
    fields = [f.name for f in dataclasses.fields(learn.RunOptions)]
    assert fields[:2] == ["env", "config"] and {"run_path", "train", "load", "num_envs", "paths"} <= set(fields)


# ------------------------------------------------------------------------------- the Trainer
#: ``Trainer``'s public members, by who holds them: the seed's trainers' interface, what the runner
#: calls besides, and what a plugin's trainer uses or overrides (docs/plugins.md). Anything else a
#: trainer needs stays the base's own (a leading underscore).
TRAINER_SEED = {"parameters", "graph_scope", "get_max_steps", "get_step", "get_last_reward", "increment_step",
                "update_last_reward", "take_action", "end_episode", "is_ready_update", "update_model",
                "write_summary", "write_tensorboard_text"}
TRAINER_RUNNER = {"close", "write_final_summary", "collection", "process_experience", "export_nodes", "state",
                  "experience_can_wait",
                  "is_learner", "stats_reporter", "check_parameters", "check_environment"}
TRAINER_PLUGIN = {"trainer_type", "hyperparameters", "settings", "setup", "build_scope", "add_stat"}


def test_the_trainer_has_the_members_its_callers_use_and_no_more():
    from trainers.trainer import Trainer

    public = {name for cls in Trainer.__mro__ if cls is not object for name in vars(cls) if not name.startswith("_")}
    assert public == TRAINER_SEED | TRAINER_RUNNER | TRAINER_PLUGIN, (
        f"added: {sorted(public - TRAINER_SEED - TRAINER_RUNNER - TRAINER_PLUGIN)}, "
        f"gone: {sorted(TRAINER_SEED | TRAINER_RUNNER | TRAINER_PLUGIN - public)}")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    documented = open(os.path.join(root, "docs", "plugins.md"), encoding="utf-8").read()
    spellings = ("`{}", "`self.{}", "{} = ")
    assert [name for name in sorted(TRAINER_PLUGIN) if not any(s.format(name) in documented for s in spellings)] == []
    called = set()
    for folder, _, files in os.walk(os.path.join(root, "runner")):
        for name in files:
            if name.endswith(".py"):
                tree = ast.parse(open(os.path.join(folder, name), encoding="utf-8").read())
                called |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert sorted(TRAINER_RUNNER - called) == []


def test_the_trainers_former_names_keep_working_with_a_deprecation():
    from runner.controller import still_trains
    from trainers.trainer import Trainer
    from trainers.trainer.trajectory import Episode
    from unityagents.brain import BrainParameters

    brain = BrainParameters("B", {"stateSize": 3, "actionSize": 2, "actionSpaceType": 1, "stateSpaceType": 1,
                                  "cameraResolutions": [], "actionDescriptions": []})
    trainer = Trainer(None, {"B": brain}, "B", {"max_steps": 10}, training=False)
    with pytest.deprecated_call(match="_saved_state"):
        saved = trainer.get_state()
    with pytest.deprecated_call(match="_restore_state"):
        trainer.set_state({**saved, "step": 4})
    assert trainer.state["step"] == 4 and trainer.get_step == 4
    trainer.state = {"step": 10, "last_reward": 1.5}
    assert (trainer.get_step, trainer.get_last_reward, still_trains(trainer)) == (10, 1.5, False)
    with pytest.deprecated_call(match="still_trains"):
        assert trainer.should_still_train is False
    with pytest.deprecated_call(match="_record_episodes"):
        trainer.record_episodes([Episode("a", 2.0, 7)])
    assert trainer.stats == {"cumulative_reward": [2.0], "episode_length": [7.0]}
    with pytest.deprecated_call(match="_environment_actions"):
        assert trainer.environment_actions(np.array([[0.5, 1.0]])).shape == (1, 2)
    assert not hasattr(trainer, "prepare_update") and not hasattr(trainer, "reset_request")  # optional hooks

    with pytest.deprecated_call(match="Counting.record_episodes overrides a helper now named _record_episodes"):
        class Counting(Trainer):
            def record_episodes(self, episodes):
                self.counted = len(list(episodes))

    counting = Counting(None, {"B": brain}, "B", {}, training=False)
    counting._record_episodes([Episode("a", 1.0, 1)] * 3)
    assert counting.counted == 3 and counting.stats == {}
