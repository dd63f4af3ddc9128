"""The agent processor (``runner/agent_processor.py``): steps in, the trainers' batch out, in-process."""
from __future__ import annotations

import numpy as np

from runner.agent_processor import AgentProcessor, brain_info
from unityagents.base_env import DecisionSteps, TerminalSteps, merge_steps
from unityagents.brain import BrainParameters

#: A modern-protocol brain: two vector sensors (2 and 3 floats) and one discrete branch of 3.
BRAIN = BrainParameters("B", {
    "stateSize": 5, "actionSize": 3, "actionSpaceType": 0, "actionBranches": [3], "actionMasks": True,
    "sensors": [{"name": "a", "shape": [2], "offset": 0}, {"name": "b", "shape": [3], "offset": 2}]})


def _steps(deciding, ended, interrupted=(), offset=0.0):
    """Decision steps of ``deciding`` (reward 0.25 each) and terminal steps of ``ended`` (reward 1)."""
    n, m = len(deciding), len(ended)
    decisions = DecisionSteps(
        [np.full((n, 2), 1.0 + offset, np.float32), np.full((n, 3), 2.0 + offset, np.float32)],
        np.full(n, 0.25), np.asarray(deciding, np.int64), [np.zeros((n, 3), bool)])
    terminals = TerminalSteps(
        [np.full((m, 2), -1.0, np.float32), np.full((m, 3), -2.0, np.float32)], np.ones(m),
        np.asarray([a in interrupted for a in ended], bool), np.asarray(ended, np.int64))
    return decisions, terminals


def test_vector_sensors_are_joined_in_sensor_order_into_the_state():
    decisions, terminals = _steps([1, 2], [])
    decisions.obs[1][1] = [7, 8, 9]
    info = brain_info(BRAIN, (decisions, terminals))
    np.testing.assert_array_equal(info.states, [[1, 1, 2, 2, 2], [1, 1, 7, 8, 9]])
    assert info.agents == [1, 2] and info.local_done == [False, False] and info.terminal_info is None
    np.testing.assert_array_equal(info.action_masks, np.ones((2, 3)))


def test_an_agent_in_both_is_one_done_row_with_both_rewards_and_its_last_observation_kept():
    info = brain_info(BRAIN, _steps([1, 2], [2], interrupted=[2]))
    assert info.agents == [1, 2]
    assert info.rewards == [0.25, 1.25] and info.local_done == [False, True] and info.max_reached == [False, True]
    np.testing.assert_array_equal(info.states[1], [1, 1, 2, 2, 2])  # the next episode's first observation
    np.testing.assert_array_equal(info.terminal_info.states, [[-1, -1, -2, -2, -2]])  # the ended one's last
    assert info.decision_requested == [True, True]


def test_agents_that_only_ended_follow_the_deciding_ones_and_take_no_action():
    info = brain_info(BRAIN, _steps([1], [3]))
    assert info.agents == [1, 3] and info.decision_requested == [True, False] and info.local_done == [False, True]
    assert info.rewards == [0.25, 1.0]
    np.testing.assert_array_equal(info.states[1], [-1, -1, -2, -2, -2])
    actions, _, _ = AgentProcessor({"B": BRAIN}).decisions({"B": info}, {"B": np.asarray([[2], [1]])}, {}, {})
    assert actions["B"].discrete.tolist() == [[2]]  # only the deciding row is sent


def test_rows_of_merged_environments_stay_grouped_by_environment():
    """Each environment's deciding rows, then its rows that only ended: the controller splits the
    trainers' outputs per environment by this order."""
    merged = merge_steps([(0, _steps([1], [5])), (1, _steps([1, 2], [], offset=10.0))])
    info = brain_info(BRAIN, merged)
    assert info.agents == [(0, 1), (0, 5), (1, 1), (1, 2)]
    assert info.decision_requested == [True, False, True, True]
    np.testing.assert_array_equal(info.states[:, 0], [1, -1, 11, 11])


def test_without_last_observations_the_terminal_steps_only_close_episodes():
    """API-2's terminal steps repeat the observation sent with done: no terminal info is made of them."""
    info = brain_info(BRAIN, _steps([1, 2], [2]), last_observation=False)
    assert info.local_done == [False, True] and info.terminal_info is None
