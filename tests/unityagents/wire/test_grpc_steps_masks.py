"""Decoding one behaviour's agent infos (``Behavior.steps``): the action masks split per branch, and the
rewards' finiteness check, for the deciding agents of a step where some episode also ended."""
import numpy as np
import pytest

from unityagents.exception import UnityMessageException
from unityagents.wire.grpc_messages import new_behavior
from unityagents.wire.protos import communicator_objects_pb2 as pb


def infos(masks, done, rewards=None):
    out = []
    for k, (mask, ended) in enumerate(zip(masks, done)):
        info = pb.AgentInfoProto(id=k, done=ended, reward=0.5 if rewards is None else rewards[k], action_mask=mask)
        info.observations.add(shape=[2], float_data=pb.ObservationProto.FloatData(data=[float(k), 1.0]))
        out.append(info)
    return out


def test_masks_come_per_branch_for_the_deciding_agents_only():
    behavior = new_behavior("Grid", (0, (3, 2), ((2,),)), ["", ""])
    F, T = False, True
    masks = [[F, T, F, T, F], [T, T, F, F, T], [F, F, T, F, F]]
    decisions, terminals = behavior.steps(infos(masks, [False, True, False]), None)
    first, second = decisions.action_mask
    assert first.tolist() == [[F, T, F], [F, F, T]] and second.tolist() == [[T, F], [F, F]]
    assert decisions.agent_id.tolist() == [0, 2] and terminals.agent_id.tolist() == [1]
    decisions, _ = behavior.steps(infos([[], [], []], [False] * 3), None)  # no mask sent: all allowed
    assert [m.shape for m in decisions.action_mask] == [(3, 3), (3, 2)]
    assert not any(m.any() for m in decisions.action_mask)


@pytest.mark.parametrize("reward", [np.nan, np.inf, -np.inf])
def test_a_reward_that_is_not_finite_is_refused(reward):
    behavior = new_behavior("Grid", (0, (3, 2), ((2,),)), ["", ""])
    with pytest.raises(UnityMessageException, match="agent 1, field reward"):
        behavior.steps(infos([[]] * 3, [False] * 3, rewards=[0.0, reward, 1.0]), None)
