"""Many brains in one run, end to end over real sockets: ghost self-play (Tennis), imitation
(3DBallIL), curriculum (Push), one scoped export, and the configuration errors that must stop a
run before it trains.

Each test runs ``learn.py`` (or the ``TrainerController`` it drives) in a scratch directory
against the built-in scenes. A few scene variants are needed that ``learn.py`` cannot ask for
(a teacher with broadcast off, a Heuristic ``TennisBrain``): they are made the way a user would
meet them, as a "Unity build" next to the working directory (``<Name>.x86_64``, which
``UnityEnvironment`` prefers over the built-in scenes) that starts the built-in scene with the
brain set that way.
"""
import json
import os
import re
import stat
import sys

import pytest

from tests.conftest import ROOT, academy_in_process, free_port, learn, learn_in_process, write

SHIPPED_CONFIG = os.path.join(ROOT, "trainer_configurations.yaml")
PUSH_CURRICULUM = os.path.join(ROOT, "curricula", "push.json")


def academy(*args, timeout=300):
    """Run ``python -m academy`` stand-alone; return (exit code, {brain: mean reward}, output)."""
    code, out = academy_in_process(*args, timeout=timeout)
    means = {m[0]: float(m[1]) for m in re.findall(r"^mean_reward (\S+) (-?\d+\.\d+)$", out, re.M)}
    return code, means, out


def fake_build(directory, name: str, *academy_args: str) -> str:
    """A "Unity build" ``<name>.x86_64`` that runs a built-in scene with ``academy_args``."""
    path = directory / f"{name}.x86_64"
    args = " ".join(academy_args)
    path.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m academy {args} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return name


def node_names(path: str):
    from trainers.export.frozen_graph import load_graph_def

    return {n.name for n in load_graph_def(path).node}


def checkpoint_state(model_dir) -> dict:
    """The training state saved beside the latest checkpoint of ``model_dir``."""
    from trainers.tf_utils import tf

    with open(tf.train.latest_checkpoint(str(model_dir)) + ".state.json") as f:
        return json.load(f)


def scalars(summary_dir, tag: str):
    """``(step, value)`` of every ``tag`` summary in the event files of ``summary_dir``, in file order."""
    from trainers.tf_utils import tf

    values = []
    for name in sorted(os.listdir(summary_dir)):
        for event in tf.train.summary_iterator(os.path.join(summary_dir, name)):
            values += [(event.step, v.simple_value) for v in event.summary.value if v.tag == tag]
    return values


def lesson_changes(output: str):
    return [int(n) for n in re.findall(r"Lesson changed\. Now in Lesson (\d+)", output)]


def mean_rewards(output: str, brain: str):
    return [(int(s), float(r)) for s, r in re.findall(rf"{brain}: Step: (\d+)\. Mean Reward: (-?\d+\.\d+)", output)]


def assert_stopped_before_training(code: int, output: str, cwd, message: str):
    """Exit status 1, the message on the console, and no training step, checkpoint or export."""
    assert code == 1, output
    assert re.search(message, output), output
    assert "Step:" not in output and "Saved the model" not in output, output
    assert not list(cwd.glob("models/*/*.bytes")) and not list(cwd.glob("models/*/checkpoint"))


# ------------------------------------------------------------------------------ configuration errors
def test_a_ghost_of_a_brain_that_is_not_external_stops_before_training(tmp_path):
    """The shipped ghost-TennisBrain block, in a build whose TennisBrain is a Heuristic brain."""
    build = fake_build(tmp_path, "TennisHeuristic", "Tennis", "--brain", "TennisBrain=heuristic")
    code, out = learn_in_process(tmp_path, build, "--train", "--trainer-config", SHIPPED_CONFIG)
    assert_stopped_before_training(
        code, out, tmp_path,
        r"TrainerConfigError: .*trainer_configurations.yaml: brain 'ghost-TennisBrain', key 'brain_to_copy': "
        r"the brain 'TennisBrain' is not External")


def test_an_imitation_of_a_teacher_that_does_not_broadcast_stops_before_training(tmp_path):
    """The shipped Student block, in a 3DBallIL build whose Teacher has broadcast off."""
    build = fake_build(tmp_path, "3DBallILSilent", "3DBallIL", "--no-broadcast", "Teacher")
    code, out = learn_in_process(tmp_path, build, "--train", "--trainer-config", SHIPPED_CONFIG)
    assert_stopped_before_training(
        code, out, tmp_path,
        r"TrainerConfigError: .*brain 'Student', key 'brain_to_imitate': the teacher 'Teacher' does not broadcast")


def test_a_curriculum_parameter_the_scene_lacks_stops_before_training(tmp_path):
    with open(PUSH_CURRICULUM) as f:
        curriculum = json.load(f)
    curriculum["parameters"]["wall_height"] = curriculum["parameters"].pop("goal_size")
    path = tmp_path / "wall.json"
    path.write_text(json.dumps(curriculum))
    code, out = learn_in_process(tmp_path, "Push", "--train", "--curriculum", str(path))
    assert_stopped_before_training(
        code, out, tmp_path,
        r"CurriculumError: The parameter wall_height in Curriculum .*wall.json is not present in the "
        r"Environment \(its reset parameters are: \['block_size', 'goal_size', 'x_variation'\]\)")


def test_the_shipped_files_are_consistent_with_the_scenes():
    """push.json names Push's reset parameters, with one value per lesson; the blocks pick the trainers."""
    from academy.envs.push import Push
    from runner.settings.trainer_config import load_trainer_config
    from trainers.trainer.registry import load_registry
    from unityagents.curriculum import Curriculum

    curriculum = Curriculum(PUSH_CURRICULUM, Push.default_reset_parameters)
    assert curriculum.max_lesson_number >= 3
    assert set(curriculum.data["parameters"]) == {"block_size", "goal_size", "x_variation"}
    config = load_trainer_config(SHIPPED_CONFIG, load_registry())
    kinds = {b: config.settings_for(b) for b in ("TennisBrain", "ghost-TennisBrain", "Student", "PushBrain")}
    assert {b: s.trainer_type for b, s in kinds.items()} == {
        "TennisBrain": "ppo", "ghost-TennisBrain": "ghost", "Student": "imitation", "PushBrain": "ppo"}
    assert kinds["ghost-TennisBrain"].parameters["brain_to_copy"] == "TennisBrain"
    assert kinds["Student"].parameters["brain_to_imitate"] == "Teacher"


# ------------------------------------------------------------------------------ Tennis: ghost self-play
TENNIS_SHORT = """
    TennisBrain:
        normalize: true
        batch_size: 256
        buffer_size: 1024
        hidden_units: 32
        max_steps: 4000
        summary_freq: 1000
    ghost-TennisBrain:
        is_ghost: true
        brain_to_copy: TennisBrain
        new_model_freq: 800
        max_num_models: 3
        summary_freq: 1000
"""


@pytest.fixture(scope="module")
def tennis_ghost_run(tmp_path_factory):
    """One TENNIS_SHORT run of the controller in this process (the learn.py path of a ghost run is
    ``test_num_envs``'s): its folder, its log, the controller, and the op count right after set-up."""
    import logging

    from runner.controller import TrainerController
    from runner.settings.trainer_config import load_trainer_config
    from trainers.trainer.registry import load_registry
    from unityagents import UnityEnvironment

    tmp_path = tmp_path_factory.mktemp("tennis")
    records = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    root = logging.getLogger()
    level = root.level
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(tmp_path)
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            config = load_trainer_config(write(tmp_path / "tennis.yaml", TENNIS_SHORT), load_registry())
            env = UnityEnvironment("Tennis", base_port=free_port(), seed=0)
            controller = TrainerController(env, config, env_name="Tennis", run_path="t", save_freq=200)
            after_setup = []
            build = controller._build

            def build_and_count():
                build()
                after_setup.append(len(controller.graph.get_operations()))

            monkeypatch.setattr(controller, "_build", build_and_count)
            controller.start_learning()
        finally:
            root.removeHandler(handler)
            root.setLevel(level)
    return tmp_path, "\n".join(records), controller, after_setup[0]


@pytest.mark.slow
def test_a_tennis_ghost_run_ends_at_max_steps_and_exports_only_the_learner(tennis_ghost_run):
    tmp_path, out, _, _ = tennis_ghost_run
    # 8 learner agents per environment step: 4000 agent steps are 500 environment steps.
    assert "Training finished after 500 environment steps" in out, out
    state = checkpoint_state(tmp_path / "models" / "t")
    assert state["trainers"]["TennisBrain"]["step"] == 4000
    assert state["trainers"]["ghost-TennisBrain"]["n_snapshots"] == 1 + 4000 // 800
    assert "Self-play: TennisBrain ELO" in out
    exported = tmp_path / "models" / "t" / "Tennis.bytes"
    nodes = node_names(str(exported))
    assert {"TennisBrain/action", "TennisBrain/state", "TennisBrain/value_estimate"} <= nodes
    assert not [n for n in nodes if n.startswith("ghost-TennisBrain")], sorted(nodes)
    assert re.search(r"List of nodes exported :\n\tTennisBrain/action\n", out), out
    # Unity's Internal brain runs the learner's scope in its scene; the ghost has none to run.
    code, means, text = academy("Tennis", "--brain", f"TennisBrain=internal:{exported}#TennisBrain", "--episodes", "8")
    assert code == 0 and "TennisBrain" in means, text
    code, _, text = academy("Tennis", "--brain", f"ghost-TennisBrain=internal:{exported}#ghost-TennisBrain")
    assert code != 0 and "the node ghost-TennisBrain/action could not be found" in text, text


@pytest.mark.slow
def test_the_graph_does_not_grow_while_the_ghost_snapshots_and_swaps(tennis_ghost_run):
    """The controller finalizes the graph after set-up: the op count then stays put, and any op
    creation during the loop would raise (the ghost's pool works with ops built once)."""
    from trainers.tf_utils import tf

    _, _, controller, after_setup = tennis_ghost_run
    ghost = controller.trainers["ghost-TennisBrain"]
    assert ghost.n_snapshots > ghost.max_num_models  # every slot was written, some twice
    # The ghost's console ETA counts down to its learner's end, not to the default block's max_steps.
    assert ghost.get_max_steps == controller.trainers["TennisBrain"].get_max_steps == 4000
    assert controller.graph.finalized
    assert len(controller.graph.get_operations()) == after_setup
    with pytest.raises(RuntimeError, match="finalized"):
        with controller.graph.as_default():
            tf.constant(0.0)


@pytest.mark.slow
def test_two_learners_share_one_export_with_a_scope_each(tmp_path):
    """Tennis with both sides trained by PPO: one .bytes, two scopes, each playable by the academy."""
    config = write(tmp_path / "two.yaml", """
        TennisBrain:
            batch_size: 256
            buffer_size: 1024
            hidden_units: 32
            max_steps: 2000
            summary_freq: 1000
        ghost-TennisBrain: TennisBrain
    """)
    code, out = learn(tmp_path, "Tennis", "--train", "--trainer-config", config, "--run-path", "two", timeout=120)
    assert code == 0, out
    assert re.search(r"List of available scopes :\n\tTennisBrain/\n\tghost-TennisBrain/\n", out), out
    exported = tmp_path / "models" / "two" / "Tennis.bytes"
    nodes = node_names(str(exported))
    for scope in ("TennisBrain", "ghost-TennisBrain"):
        assert {f"{scope}/action", f"{scope}/state", f"{scope}/value_estimate", f"{scope}/action_probs"} <= nodes
        assert os.path.isdir(tmp_path / "summaries" / f"two_{scope}")
    code, means, text = academy("Tennis", "--brain", f"TennisBrain=internal:{exported}#TennisBrain",
                                "--brain", f"ghost-TennisBrain=internal:{exported}#ghost-TennisBrain",
                                "--episodes", "8")
    assert code == 0 and set(means) == {"TennisBrain", "ghost-TennisBrain"}, text


# ------------------------------------------------------------------------------ Push: curriculum
PUSH_SHORT = """
    PushBrain:
        batch_size: 256
        buffer_size: 4096
        hidden_units: 32
        max_steps: {max_steps}
        summary_freq: 8000
"""


#: The JSON curriculum moves all its parameters together; each has its own tag, as in ML-Agents.
LESSON_TAG = "Environment/Lesson Number/goal_size"


@pytest.mark.slow
def test_push_lessons_advance_on_global_resets_and_load_keeps_the_lesson(tmp_path):
    """Push's Academy resets globally every 3000 decisions = 24000 agent steps of its 8 agents.

    Run 1 (48000 steps): the first evaluation (before the first reset) passes threshold -1 and the
    one at the reset after 24000 steps (progress 0.5) passes 0.25: lesson 2. Run 2 resumes with
    max_steps 72000, so its first evaluation sees progress 48000/72000 > 0.6 and moves to lesson
    3, which it can only reach from lesson 2 (a lost lesson would print "Lesson 1").
    """
    curriculum = tmp_path / "push.json"
    curriculum.write_text(json.dumps({
        "measure": "progress", "thresholds": [-1, 0.25, 0.6], "min_lesson_length": 0, "signal_smoothing": False,
        "parameters": {"goal_size": [3.0, 2.0, 1.5, 1.0], "block_size": [1.5, 1.3, 1.1, 1.0],
                       "x_variation": [1.5, 1.8, 2.1, 2.5]}}))
    args = ["Push", "--train", "--curriculum", str(curriculum), "--run-path", "p"]
    config = write(tmp_path / "a.yaml", PUSH_SHORT.format(max_steps=48000))
    code, out = learn(tmp_path, *args, "--trainer-config", config)
    assert code == 0, out
    assert lesson_changes(out) == [1, 2], out
    assert "Lesson changed. Now in Lesson 2 : goal_size -> 1.5, block_size -> 1.1, x_variation -> 2.1" in out
    assert checkpoint_state(tmp_path / "models" / "p")["curriculum"]["lesson_number"] == 2
    summaries = tmp_path / "summaries" / "p"
    assert {value for _, value in scalars(summaries, LESSON_TAG)} == {1.0, 2.0}

    code, out = learn(tmp_path, *args, "--load", "--trainer-config",
                      write(tmp_path / "b.yaml", PUSH_SHORT.format(max_steps=72000)))
    assert code == 0, out
    assert lesson_changes(out) == [3], out
    assert checkpoint_state(tmp_path / "models" / "p")["curriculum"]["lesson_number"] == 3
    resumed = [(step, value) for step, value in scalars(summaries, LESSON_TAG) if step > 48000]
    assert resumed and all(value == 3.0 for _, value in resumed), resumed


# ------------------------------------------------------------------------------ learning (slow)
@pytest.mark.slow
def test_3dball_student_reaches_70_percent_of_the_teacher_and_its_export_balances(tmp_path):
    code, out = learn(tmp_path, "3DBallIL", "--train", "--run-path", "il", "--trainer-config", SHIPPED_CONFIG,
                      timeout=240)
    assert code == 0, out
    teacher_line = r"Student: Step: \d+\. Imitating Teacher: teacher mean reward (-?\d+\.\d+)"
    teacher = [float(m) for m in re.findall(teacher_line, out)]
    student = mean_rewards(out, "Student")
    assert teacher and student, out
    assert student[-1][1] >= 0.7 * teacher[-1], out
    # One External brain: the export has no scope, and the academy's Internal brain balances with it.
    exported = tmp_path / "models" / "il" / "3DBallIL.bytes"
    assert "action" in node_names(str(exported))
    code, means, text = academy("3DBallIL", "--brain", f"Student=internal:{exported}", "--episodes", "24")
    assert code == 0 and means["Student"] >= 0.7 * means["Teacher"], text


@pytest.mark.slow
def test_shipped_push_curriculum_changes_lesson_three_times(tmp_path):
    """The shipped PushBrain block and curriculum, with max_steps cut from 2.4e5 to 1.26e5 (the lessons
    move on progress, steps done / max_steps, not on reward). Progress is checked at the first reset
    and at each global one (every 24000 agent steps), and a lesson is left at its second check at
    the soonest (min_lesson_length 1): lessons 1, 2 and 3 at 24000, 72000 and 120000 steps (progress
    0.19, 0.57 and 0.95 against the thresholds 0.15, 0.35 and 0.55); the run ends before a fourth."""
    import yaml

    with open(SHIPPED_CONFIG) as f:
        shipped = yaml.safe_load(f)
    shipped["PushBrain"]["max_steps"] = 126000
    config = tmp_path / "push.yaml"
    config.write_text(yaml.safe_dump(shipped))
    code, out = learn(tmp_path, "Push", "--train", "--curriculum", PUSH_CURRICULUM, "--run-path", "push",
                      "--trainer-config", str(config))
    assert code == 0, out
    changes = lesson_changes(out)
    assert changes[:3] == [1, 2, 3], out
    assert max(v for _, v in scalars(tmp_path / "summaries" / "push", LESSON_TAG)) == changes[-1]
