"""Buffer semantics: the seed's test values, padding, overlap, shuffling and errors."""
import numpy as np
import pytest

from trainers.buffer import AgentBuffer, AgentBufferField, Buffer, BufferException
from unityagents.exception import UnityException


def filled_buffer() -> Buffer:
    """The seed's fixture: 4 agents x 9 steps, state 3 floats and action 2 floats per step."""
    b = Buffer()
    for agent in range(4):
        for i in range(9):
            base = 100 * agent + 10 * i
            b[agent]["state"].append([base + 1, base + 2, base + 3])
            b[agent]["action"].append([base + 4, base + 5])
    return b


def test_seed_buffer_values():
    b = filled_buffer()
    a = b[1]["state"].get_batch(batch_size=2, training_length=None, sequential=True)
    np.testing.assert_array_equal(a, np.array([[171, 172, 173], [181, 182, 183]]))
    a = b[2]["state"].get_batch(batch_size=2, training_length=3, sequential=True)
    np.testing.assert_array_equal(a, np.array([
        [[231, 232, 233], [241, 242, 243], [251, 252, 253]],
        [[261, 262, 263], [271, 272, 273], [281, 282, 283]],
    ]))
    a = b[2]["state"].get_batch(batch_size=2, training_length=3, sequential=False)
    np.testing.assert_array_equal(a, np.array([
        [[251, 252, 253], [261, 262, 263], [271, 272, 273]],
        [[261, 262, 263], [271, 272, 273], [281, 282, 283]],
    ]))
    b[4].reset_agent()
    assert len(b[4]) == 0
    b.append_update_buffer(3, batch_size=None, training_length=2)
    b.append_update_buffer(2, batch_size=None, training_length=2)
    assert len(b.update_buffer["action"]) == 10
    assert np.array(b.update_buffer["action"]).shape == (10, 2, 2)


def test_sequences_pad_the_first_sequence_on_the_left():
    field = AgentBufferField()
    field.extend([1, 2, 3, 4, 5])
    np.testing.assert_array_equal(field.get_batch(training_length=2), [[0, 1], [2, 3], [4, 5]])
    # Only the last sequences are returned when fewer are asked for: no padding then.
    np.testing.assert_array_equal(field.get_batch(batch_size=2, training_length=2), [[2, 3], [4, 5]])
    np.testing.assert_array_equal(field.get_batch(training_length=5), [[1, 2, 3, 4, 5]])
    np.testing.assert_array_equal(field.get_batch(training_length=7), [[0, 0, 1, 2, 3, 4, 5]])
    assert field.get_batch(training_length=2, batch_size=0).shape == (0, 2)


def test_padding_has_the_shape_and_zero_of_the_elements():
    field = AgentBufferField()
    for i in range(3):
        field.append(np.full((2, 2), i + 1.0))
    batch = field.get_batch(training_length=2)
    assert batch.shape == (2, 2, 2, 2)
    np.testing.assert_array_equal(batch[0, 0], np.zeros((2, 2)))
    np.testing.assert_array_equal(batch[0, 1], np.ones((2, 2)))


def test_overlapping_windows():
    field = AgentBufferField()
    field.extend([1, 2, 3, 4, 5])
    np.testing.assert_array_equal(
        field.get_batch(training_length=2, sequential=False), [[1, 2], [2, 3], [3, 4], [4, 5]]
    )
    np.testing.assert_array_equal(field.get_batch(batch_size=1, training_length=5, sequential=False), [[1, 2, 3, 4, 5]])


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(batch_size=6), ["6", "5"]),
        (dict(batch_size=4, training_length=2), ["4", "3"]),
        (dict(batch_size=5, training_length=2, sequential=False), ["5", "4"]),
    ],
)
def test_asking_for_too_much_says_what_exists(kwargs, words):
    field = AgentBufferField()
    field.extend([1, 2, 3, 4, 5])
    with pytest.raises(BufferException) as error:
        field.get_batch(**kwargs)
    for word in words:
        assert word in str(error.value)
    assert isinstance(error.value, UnityException)


def test_field_set_extend_reset():
    field = AgentBufferField()
    field.extend(np.arange(6).reshape(3, 2))
    assert len(field) == 3
    field.set([[7, 8]])
    np.testing.assert_array_equal(field.get_batch(), [[7, 8]])
    field.reset_field()
    assert len(field) == 0


def test_missing_fields_and_agents_are_created_on_access():
    b = Buffer()
    assert isinstance(b["agent-7"], AgentBuffer)
    assert isinstance(b["agent-7"]["anything"], AgentBufferField)
    # The seed's nested names keep working.
    assert Buffer.AgentBuffer is AgentBuffer and Buffer.AgentBuffer.AgentBufferField is AgentBufferField


def test_shuffle_keeps_fields_aligned():
    agent = AgentBuffer()
    agent["x"].extend(np.arange(50))
    agent["y"].extend(np.arange(50) * 10)
    agent.shuffle(rng=np.random.default_rng(0))
    x, y = np.array(agent["x"]), np.array(agent["y"])
    assert not np.array_equal(x, np.arange(50))
    np.testing.assert_array_equal(y, x * 10)
    np.testing.assert_array_equal(np.sort(x), np.arange(50))


def test_shuffle_and_append_refuse_fields_of_different_lengths():
    b = Buffer()
    b[0]["x"].extend([1, 2, 3])
    b[0]["y"].extend([1, 2])
    assert not b[0].check_length(["x", "y"])
    assert not b[0].check_length(["x", "missing"])
    assert b[0].check_length(["x"])
    with pytest.raises(BufferException, match="different lengths"):
        b[0].shuffle()
    with pytest.raises(BufferException) as error:
        b.append_update_buffer(0)
    assert "'x': 3" in str(error.value) and "'y': 2" in str(error.value) and "agent 0" in str(error.value)


def test_append_all_and_resets():
    b = filled_buffer()
    b.append_all_agent_batch_to_update_buffer(key_list=["state"])
    assert np.array(b.update_buffer["state"]).shape == (36, 3)
    assert "action" not in b.update_buffer
    b.reset_update_buffer()
    assert len(b.update_buffer["state"]) == 0 and len(b[0]["state"]) == 9
    b.append_update_buffer(0, training_length=4)
    assert np.array(b.update_buffer["state"]).shape == (3, 4, 3)
    b.reset_all()
    assert len(b.update_buffer["state"]) == 0
    assert all(len(field) == 0 for agent in b.values() for field in agent.values())


def test_a_distinct_sample_uses_each_held_row_at_most_once_and_says_when_too_few_are_held():
    from trainers.buffer import ReplayBuffer
    from trainers.trainer.base import UnityTrainerException

    replay = ReplayBuffer(8)
    replay.add({"x": np.arange(6)})
    rng = np.random.default_rng(0)
    for _ in range(50):
        drawn = replay.sample(6, rng, distinct=True)["x"]
        assert sorted(drawn) == [0, 1, 2, 3, 4, 5]  # every held row once, none of the 2 empty rows
    with pytest.raises(UnityTrainerException, match="7 distinct transitions from a buffer holding 6"):
        replay.sample(7, rng, distinct=True)
