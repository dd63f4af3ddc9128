"""The step types (``unityagents/base_env.py``) and the gRPC wire's decoding into them, in-process."""
from __future__ import annotations

import numpy as np
import pytest

from unityagents.base_env import (
    ActionSpec,
    ActionTuple,
    DecisionSteps,
    DimensionProperty,
    TerminalSteps,
    merge_steps,
)
from unityagents.brain import BrainParameters
from unityagents.exception import UnityActionException
from unityagents.wire.grpc_messages import new_behavior
from unityagents.wire.protos import communicator_objects_pb2 as pb


def _decisions(ids, offset=0.0):
    n = len(ids)
    vector = np.arange(n * 3, dtype=np.float32).reshape(n, 3) + offset
    camera = np.full((n, 2, 2, 1), offset, np.float32)
    masks = [np.zeros((n, 2), bool), np.ones((n, 3), bool)]
    return DecisionSteps([vector, camera], np.arange(n, dtype=np.float64) + offset, np.asarray(ids), masks)


def test_merge_keys_agents_by_environment_and_keeps_each_sensor_apart():
    a, b = _decisions([7, 8]), _decisions([7], offset=100.0)
    merged = DecisionSteps.merge([(0, a), (1, b)])
    assert merged.agent_id.tolist() == [(0, 7), (0, 8), (1, 7)]
    assert merged.agent_id_to_index[(1, 7)] == 2
    assert [o.shape for o in merged.obs] == [(3, 3), (3, 2, 2, 1)]  # one array per sensor, in sensor order
    np.testing.assert_array_equal(merged.obs[0][2], b.obs[0][0])
    np.testing.assert_array_equal(merged.obs[1][:2], a.obs[1])
    assert merged.reward.tolist() == [0.0, 1.0, 100.0]
    assert [m.shape for m in merged.action_mask] == [(3, 2), (3, 3)]
    assert merged.group_id.tolist() == [0, 0, 0]


def test_merge_of_terminal_steps_keeps_interrupted_and_skips_empty_environments():
    spec = BrainParameters("B", {"stateSize": 3, "actionSize": 2, "actionSpaceType": 1}).behavior_spec
    ended = TerminalSteps([np.ones((2, 3), np.float32)], np.asarray([1.0, -1.0]), np.asarray([True, False]),
                          np.asarray([4, 5]))
    decisions, terminals = merge_steps([(0, (DecisionSteps.empty(spec), TerminalSteps.empty(spec))),
                                        (1, (DecisionSteps.empty(spec), ended))])
    assert len(decisions) == 0 and decisions.obs[0].shape == (0, 3)
    assert terminals.agent_id.tolist() == [(1, 4), (1, 5)]
    assert terminals.interrupted.tolist() == [True, False]
    assert terminals.reward.tolist() == [1.0, -1.0]


def test_behavior_spec_lists_the_sensors_in_the_order_the_environment_reports_them():
    """A modern behaviour announces a camera between two vector sensors and a BufferSensor: the spec
    keeps that order, cameras channels last, and flags the variable-length one."""
    behavior = new_behavior("B?team=0", (2, (3,), ((4,), (1, 5, 6), (3, 2), (2,))), [],
                              [("near", 0), ("eyes", 0), ("buffer", 0), ("goal", 1)])
    spec = behavior.parameters.behavior_spec
    assert [o.name for o in spec.observation_specs] == ["near", "eyes", "buffer", "goal"]
    assert [o.shape for o in spec.observation_specs] == [(4,), (5, 6, 1), (3, 2), (2,)]
    assert [o.variable_length for o in spec.observation_specs] == [False, False, True, False]
    assert spec.observation_specs[2].dimension_property[0] == DimensionProperty.VARIABLE_SIZE
    assert spec.observation_specs[3].observation_type == 1
    assert spec.action_spec == ActionSpec(2, (3,))


def _agent(agent_id, values, done=False, interrupted=False, reward=0.0):
    info = pb.AgentInfoProto(id=agent_id, done=done, max_step_reached=interrupted, reward=reward)
    for shape, data in values:
        obs = info.observations.add()
        obs.shape.extend(shape)
        obs.float_data.data.extend(data)
    return info


def test_grpc_decodes_one_array_per_sensor_and_splits_decisions_from_terminals():
    """Two vector sensors stay two arrays (not one state); a done info is a terminal step with its last
    observation and its interrupted flag; an agent that also asks for its next decision is in both."""
    behavior = new_behavior("B?team=0", (1, (), ((2,), (3,))), [], [("a", 0), ("b", 0)])
    infos = [_agent(1, [((2,), [1, 2]), ((3,), [3, 4, 5])], reward=0.5),
             _agent(2, [((2,), [6, 7]), ((3,), [8, 9, 10])], done=True, interrupted=True, reward=2.0),
             _agent(2, [((2,), [0, 0]), ((3,), [0, 0, 1])], reward=0.25)]
    decisions, terminals = behavior.steps(infos, None)
    assert decisions.agent_id.tolist() == [1, 2]
    assert [o.shape for o in decisions.obs] == [(2, 2), (2, 3)]
    np.testing.assert_array_equal(decisions.obs[1], [[3, 4, 5], [0, 0, 1]])
    assert decisions.reward.tolist() == [0.5, 0.25]
    assert terminals.agent_id.tolist() == [2]
    np.testing.assert_array_equal(terminals.obs[0], [[6, 7]])
    assert terminals.interrupted.tolist() == [True] and terminals.reward.tolist() == [2.0]


def test_grpc_sends_an_action_tuple_row_per_deciding_agent():
    behavior = new_behavior("B?team=0", (1, (3,), ((2,),)), [], [("a", 0)])
    behavior.steps([_agent(5, [((2,), [1, 2])]), _agent(9, [((2,), [3, 4])])], None)
    message = pb.UnityInputProto()
    actions = message.rl_input.agent_actions
    behavior.encode_actions(ActionTuple([[0.5], [-0.5]], [[2], [0]]), actions)
    sent = actions["B?team=0"].value
    assert [list(a.continuous_actions) for a in sent] == [[0.5], [-0.5]]
    assert [list(a.discrete_actions) for a in sent] == [[2], [0]]
    assert behavior.last_actions[9].tolist() == [-0.5, 0.0]


def test_action_tuple_refuses_a_wrong_shape_naming_expected_and_arrived():
    spec = ActionSpec(2, (3, 2))
    with pytest.raises(UnityActionException) as e:
        spec.validate(ActionTuple(np.zeros((4, 1)), np.zeros((4, 2), np.int32)), 4, "Walker")
    text = str(e.value)
    assert "'Walker'" in text and "shape (4, 1)" in text and "expects (4, 2)" in text and "one row per" in text
    with pytest.raises(UnityActionException, match="got 2 continuous rows and 3 discrete rows"):
        ActionTuple(np.zeros((2, 2)), np.zeros((3, 1), np.int32))


def test_action_tuple_refuses_fractional_or_out_of_range_branch_indices():
    with pytest.raises(UnityActionException, match="whole branch indices"):
        ActionTuple(discrete=[[0.5]])
    spec = ActionSpec(0, (3,))
    with pytest.raises(UnityActionException, match=r"chose 3 on discrete branch 0, which has 3 actions.*0\.\.2"):
        spec.validate(ActionTuple(discrete=[[1], [3]]), 2, "Grid")
    with pytest.raises(UnityActionException, match="NaN or infinity"):
        ActionSpec(1).validate(ActionTuple([[np.nan]]), 1, "Ball")


def test_tuple_of_splits_rows_into_continuous_then_branch_indices():
    actions = ActionSpec(2, (3,)).tuple_of(np.asarray([[0.5, -1.0, 2.0], [0.0, 1.0, 0.0]], np.float32))
    assert actions.continuous.dtype == np.float32 and actions.continuous.tolist() == [[0.5, -1.0], [0.0, 1.0]]
    assert actions.discrete.dtype == np.int32 and actions.discrete.tolist() == [[2], [0]]
    assert len(actions.rows(1, 2)) == 1
    with pytest.raises(UnityActionException, match="expected rows of 3 values"):
        ActionSpec(2, (3,)).tuple_of(np.zeros((2, 2)))


def test_api2_maps_onto_one_state_sensor_after_its_cameras_and_a_done_agent_is_in_both():
    """API-2's state message: every agent decides; a done one is a terminal step too, with the
    observation sent with done and the step's reward (its decision step's reward is 0)."""
    from unityagents.wire.api2_messages import steps_of

    params = BrainParameters("Ball", {"stateSize": 2, "actionSize": 1, "actionSpaceType": 1, "memorySize": 1,
                                      "cameraResolutions": [{"width": 2, "height": 1, "blackAndWhite": True}]})
    msg = {"brain_name": "Ball", "agents": [4, 9], "states": [1, 2, 3, 4], "rewards": [0.1, -1.0],
           "dones": [False, True], "memories": [0.5, 0.25], "actions": [0.3, 0.7]}
    decisions, terminals = steps_of("Ball", params, msg, None, lambda k, res: np.full((1, 2, 1), 0.5, np.float32))
    assert [o.shape for o in decisions.obs] == [(2, 1, 2, 1), (2, 2)]  # the camera, then the state
    assert decisions.reward.tolist() == [0.1, 0.0] and decisions.memory.tolist() == [[0.5], [0.25]]
    assert terminals.agent_id.tolist() == [9] and terminals.reward.tolist() == [-1.0]
    assert terminals.interrupted.tolist() == [False]
    np.testing.assert_array_equal(terminals.obs[1], [[3, 4]])
    np.testing.assert_allclose(terminals.previous_action, [[0.7]])


@pytest.mark.parametrize("n_agents", [2, 12])  # 4 and 24 indices: checked in Python, then with numpy
def test_branch_indices_are_checked_on_every_branch_for_few_agents_and_many(n_agents):
    spec = ActionSpec(0, (3, 2))
    good = np.tile(np.asarray([[2, 1], [0, 0]], np.int32), (n_agents // 2, 1))
    assert spec.validate(ActionTuple(discrete=good), n_agents, "Grid").discrete is good
    for row, branch, value, pattern in [(n_agents - 1, 1, 2, r"row \d+ chose 2 on discrete branch 1, which has 2"),
                                        (0, 0, -1, r"row 0 chose -1 on discrete branch 0, which has 3")]:
        wrong = good.copy()
        wrong[row, branch] = value
        with pytest.raises(UnityActionException, match=pattern):
            spec.validate(ActionTuple(discrete=wrong), n_agents, "Grid")
