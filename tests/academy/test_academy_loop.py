"""The Academy loop's Unity semantics (``academy/academy.py``'s docstring) on a tiny scene built here.

``Counter`` has one brain whose agents add their action to a counter each frame, are rewarded with
the action, and are done by the scene when the counter reaches a limit. Everything it does is
visible, so each rule of the loop can be checked by arithmetic.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest

import academy
from academy.academy import Academy
from academy.brain import BrainConfig
from academy.checks import ActionError
from academy.scene import BrainSpec, Scene


class Counter(Scene):
    academy_name = "CounterAcademy"
    brains = (BrainSpec(name="Count", n_agents=3, state_size=1, action_size=1, memory_size=2, max_step=4),)
    default_reset_parameters = {"limit": 100.0}

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.count = np.zeros(3)
        self.resets = 0

    def reset_agents(self, brain, index):
        self.count[index] = 0.0
        self.resets += len(index)

    def step(self, actions):
        self.count = self.count + actions["Count"][:, 0]
        return {"Count": (actions["Count"][:, 0].copy(), self.count >= self.params["limit"])}

    def states(self, brain):
        return self.count[:, None].copy()

    def heuristic(self, brain):
        return np.ones((3, 1))


def make(scene_cls=Counter, **configs) -> Academy:
    academy_ = Academy(scene_cls(), configs)
    academy_.reset()
    return academy_


def step(academy_: Academy, actions) -> tuple[dict, bool]:
    academy_.set_external_actions({"action": {"Count": list(actions)}})
    academy_.decide()
    academy_.advance()
    sent = []
    done = academy_.finish_step(lambda brain: sent.append(academy_.state_message(brain)))
    return sent[0], done


def test_importing_academy_is_cheap():
    import subprocess
    import sys

    code = "import academy, sys; print(sorted(m for m in ('numpy', 'PIL', 'tensorflow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert academy.SCENES[:5] == ("3DBall", "3DBallHard", "3DBallIL", "Basic", "GridWorld")


def test_unknown_scene_lists_the_scenes():
    with pytest.raises(ValueError, match="built-in scenes are: 3DBall, "):
        academy.load_scene("Pong")


def test_agent_is_done_after_max_step_plus_one_steps():
    a = make()
    dones = [step(a, [0, 0, 0])[0]["dones"] for _ in range(5)]
    assert dones == [[False] * 3] * 4 + [[True] * 3]
    assert a.brains[0].steps.tolist() == [0, 0, 0], "reset zeroes the step counter"


def test_done_message_has_terminal_reward_post_reset_state_then_clears():
    a = make()
    a.scene.params["limit"] = 3.0
    message, _ = step(a, [1, 2, 3])
    assert message["dones"] == [False, False, True]
    assert message["rewards"] == [1.0, 2.0, 3.0]
    assert message["states"] == [1.0, 2.0, 0.0], "the done agent was reset before its state was sent"
    message, _ = step(a, [0, 0, 0])
    assert message["dones"] == [False] * 3 and message["rewards"] == [0.0] * 3


def test_frame_skip_repeats_the_action_and_sums_rewards():
    class Skipping(Counter):
        frame_to_skip = 2

    a = make(Skipping)
    message, _ = step(a, [1, 2, 0])
    assert message["states"] == [3.0, 6.0, 0.0]
    assert message["rewards"] == [3.0, 6.0, 0.0]
    assert a.current_step == 3
    assert a.brains[0].steps.tolist() == [3, 3, 3], "an agent steps every frame, as AgentStep does"


def test_no_reward_after_done_within_skipped_frames():
    class Skipping(Counter):
        frame_to_skip = 3

    a = make(Skipping)
    a.scene.params["limit"] = 2.0
    message, _ = step(a, [2, 1, 0])
    assert message["rewards"] == [2.0, 2.0, 0.0], "agent 0 was done after its first frame"
    assert message["dones"] == [True, True, False]


def test_academy_max_steps_is_a_global_done_that_ends_every_agent():
    class Timed(Counter):
        max_steps = 3

    a = make(Timed)
    results = [step(a, [0, 0, 0]) for _ in range(3)]
    assert [done for _, done in results] == [False, False, True]
    assert results[-1][0]["dones"] == [True] * 3


def test_memory_round_trips_and_is_zeroed_on_agent_reset():
    a = make()
    a.scene.params["limit"] = 1.0
    a.set_external_actions({"action": {"Count": [0, 0, 1]}, "memory": {"Count": [1, 2, 3, 4, 5, 6]},
                            "value": {"Count": [0.1, 0.2, 0.3]}})
    a.advance()
    sent = []
    a.finish_step(lambda b: sent.append(a.state_message(b)))
    assert sent[0]["memories"] == [1, 2, 3, 4, 0, 0]
    assert a.brains[0].value.tolist() == [0.1, 0.2, 0.3]


@pytest.mark.parametrize("message, error", [
    ({"action": {}}, "no action for External brain 'Count'"),
    ({"action": {"Count": [1, 2]}}, "action has 2 floats, expected 3"),
    ({"action": {"Count": [1, 2, 3]}, "memory": {"Count": [0] * 5}}, "memory has 5 floats, expected 6"),
    ({"action": {"Count": [1, 2, 3]}, "value": {"Count": [0]}}, "value has 1 floats, expected 3"),
])
def test_bad_action_messages_are_rejected_with_the_expected_size(message, error):
    with pytest.raises(ActionError, match=error):
        make().set_external_actions(message)


def test_reset_parameters_merge_and_bad_ones_are_logged(caplog):
    a = make()
    with caplog.at_level(logging.ERROR, logger="academy"):
        a.reset(train_mode=False, parameters={"limit": 7, "nope": 1, "limit2": 3})
        a.reset(parameters={"limit": "high"})
    assert a.scene.params == {"limit": 7.0}
    assert a.train_mode is False
    assert "'nope' is not a parameter of CounterAcademy" in caplog.text
    assert "'limit' must be a number" in caplog.text


def test_agent_ids_are_stable_distinct_ints():
    a = make()
    first = step(a, [0, 0, 0])[0]["agents"]
    a.reset()
    assert step(a, [0, 0, 0])[0]["agents"] == first
    assert len(set(first)) == 3 and all(isinstance(i, int) for i in first)


def test_heuristic_override_of_an_external_brain_unsubscribes_nothing_but_externals():
    a = make(Counter, Count=BrainConfig("heuristic", broadcast=False))
    assert a.subscribed == []
    assert a.academy_parameters()["brainNames"] == []
    a.decide()
    assert a.brains[0].action.tolist() == [[1.0]] * 3


def test_unknown_brain_override_is_an_error():
    with pytest.raises(ValueError, match=r"unknown brain\(s\) \['Nope'\]"):
        Academy(Counter(), {"Nope": BrainConfig("heuristic")})


def test_standalone_mean_reward_counts_first_episodes_in_completion_order():
    class Short(Counter):
        brains = (BrainSpec(name="Count", n_agents=3, state_size=1, action_size=1, max_step=1),)

    assert Academy(Short()).run_episodes(4) == {"Count": 2.0}
