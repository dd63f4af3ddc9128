"""What of a step each trainer is handed: its own brain's batch and those it declares as links."""
import pytest

from runner.controller import TrainerController, brains_read
from trainers.ghost.trainer import GhostTrainer
from trainers.imitation.trainer import ImitationTrainer
from trainers.trainer.base import Trainer, UnityTrainerException
from trainers.trainer.trajectory import Collection


class Linked:
    def __init__(self, *links):
        self.collection = Collection(linked_brains=links)


SCENE = {"Student": object(), "Teacher": object(), "Bystander": object()}


def test_each_trainer_reads_its_own_brain_then_its_links_and_nothing_else():
    reads = brains_read({"Student": Linked("Teacher"), "Teacher": Linked(), "Bystander": Linked()}, SCENE)
    assert reads == {"Student": ("Student", "Teacher"), "Teacher": ("Teacher",), "Bystander": ("Bystander",)}

    controller = TrainerController.__new__(TrainerController)  # only the view, no environment
    controller._reads = reads
    step = {"Student": "s", "Teacher": "t", "Bystander": "b"}
    assert controller._view("Student", step) == {"Student": "s", "Teacher": "t"}
    assert controller._view("Bystander", step) == {"Bystander": "b"}


def test_a_link_to_a_brain_the_scene_lacks_is_refused_before_the_first_step():
    with pytest.raises(UnityTrainerException, match=r"'Student'.*\['Teacher2'\].*'Bystander'"):
        brains_read({"Student": Linked("Teacher2")}, SCENE)


def test_the_ghost_links_the_brain_it_copies_and_the_imitator_its_teacher():
    assert Trainer.collection.fget(Linked()) == Collection()
    ghost = GhostTrainer.__new__(GhostTrainer)
    ghost.copied_name = "Learner"
    student = ImitationTrainer.__new__(ImitationTrainer)
    student.teacher_name = "Teacher"
    assert ghost.collection == Collection(linked_brains=("Learner",))
    assert student.collection == Collection(linked_brains=("Teacher",))


@pytest.mark.parametrize("declared", ["linked_brains", "trajectory_horizon", "step_fields"])
def test_a_trainer_declaring_what_the_collector_keeps_outside_its_collection_is_refused_in_one_line(declared):
    with pytest.raises(TypeError) as refused:
        type("OldPlugin", (Trainer,), {declared: property(lambda self: ())})
    message = str(refused.value)
    assert "\n" not in message and f"OldPlugin defines {declared}" in message
    assert "Collection(linked_brains=..., horizon=..., step_fields=...)" in message


def test_an_on_policy_trainer_still_adds_step_fields_through_its_collection():
    from trainers.trainer.on_policy import OnPolicyTrainer

    def fields(self, before, after):
        return {"raw": (before, "current")}

    WithFields = type("WithFields", (OnPolicyTrainer,), {"step_fields": fields})
    trainer = WithFields.__new__(WithFields)
    trainer._settings = type("S", (), {"time_horizon": 7})()
    wants = trainer.collection
    assert wants.horizon == 7 and wants.step_fields("b", "a") == {"raw": ("b", "current")}
