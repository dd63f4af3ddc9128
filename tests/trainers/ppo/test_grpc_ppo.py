"""PPO for what modern scenes need: several discrete branches and action masks.

Masked actions get probability 0 and are never sampled; log-probabilities and entropies add up
over the branches; API-2 discrete brains keep their graph (no mask input).
"""
import numpy as np

from trainers.ppo.models import create_agent_model
from trainers.tf_utils import tf
from unityagents.brain import BrainParameters


def brain(branches, masks=True, name="Crawler?team=0"):
    return BrainParameters(name, {"stateSize": 4, "actionSize": sum(branches), "actionSpaceType": 0,
                                  "stateSpaceType": 1, "actionBranches": list(branches), "actionMasks": masks})


def test_masked_actions_get_no_probability_and_are_never_sampled():
    with tf.Graph().as_default() as graph:
        model = create_agent_model(brain([3, 2]), h_size=16, num_layers=1)
        init = tf.global_variables_initializer()
        graph.finalize()
        with tf.Session(graph=graph) as sess:
            sess.run(init)
            n = 400
            state = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
            masks = np.ones((n, 5), np.float32)
            masks[:, 0] = 0.0   # branch 0: action 0 forbidden
            masks[:, 4] = 0.0   # branch 1: action 1 forbidden
            feed = {model.state_in: state, model.action_masks: masks, model.batch_size: n, model.sequence_length: 1}
            actions, probs, log_prob = sess.run([model.output, model.probs, model.log_prob], feed)
            assert actions.shape == (n, 2)
            assert set(actions[:, 0]) == {1, 2} and set(actions[:, 1]) == {0}
            assert np.all(probs[:, 0] == 0.0) and np.all(probs[:, 4] == 0.0)
            np.testing.assert_allclose(probs[:, :3].sum(axis=1), 1.0, rtol=1e-5)
            np.testing.assert_allclose(probs[:, 3:].sum(axis=1), 1.0, rtol=1e-5)
            # log pi(a) = log p0(a0) + log p1(a1), and p1(0) = 1 under the mask
            expected = np.log(probs[np.arange(n), actions[:, 0]]) + np.log(probs[np.arange(n), 3 + actions[:, 1]])
            np.testing.assert_allclose(log_prob, expected, rtol=1e-4, atol=1e-5)
            # the update's log-prob of given actions uses the same masks
            taken = np.tile([[2, 0]], (n, 1)).astype(np.int32)
            new = sess.run(model._new_log_prob, {**feed, model.taken_actions: taken})
            np.testing.assert_allclose(new, np.log(probs[:, 2]), rtol=1e-4, atol=1e-5)
            # without a mask fed, every action is allowed
            unmasked = sess.run(model.probs, {model.state_in: state, model.batch_size: n, model.sequence_length: 1})
            assert np.all(unmasked > 0.0)


def test_api2_discrete_brains_keep_their_graph():
    api2 = BrainParameters("BasicBrain", {"stateSize": 4, "actionSize": 3, "actionSpaceType": 0, "stateSpaceType": 1})
    assert api2.action_branches == [3] and not api2.uses_action_masks
    assert "actionBranches" not in api2.to_dict() and "actionMasks" not in api2.to_dict()
    with tf.Graph().as_default() as graph:
        model = create_agent_model(api2, h_size=16, num_layers=1)
        assert model.action_masks is None
        assert not [op for op in graph.get_operations() if "action_masks" in op.name]
        assert model.taken_actions.shape.as_list() == [None]
