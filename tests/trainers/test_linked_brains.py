"""What of a step each trainer is handed: its own brain's batch and those it declares as links."""
import pytest

from runner.controller import TrainerController, brains_read
from trainers.ghost.trainer import GhostTrainer
from trainers.imitation.trainer import ImitationTrainer
from trainers.trainer.base import Trainer, UnityTrainerException


class Linked:
    def __init__(self, *links):
        self.linked_brains = links


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
    assert Trainer.linked_brains.fget(Linked()) == ()
    ghost = GhostTrainer.__new__(GhostTrainer)
    ghost.copied_name = "Learner"
    student = ImitationTrainer.__new__(ImitationTrainer)
    student.teacher_name = "Teacher"
    assert ghost.linked_brains == ("Learner",)
    assert student.linked_brains == ("Teacher",)
