"""Curriculum: the seed's test values, plus every file error."""
import json
import os

import pytest

from unityagents import Curriculum, UnityEnvironmentException

SEED_CURRICULUM = {
    "measure": "reward",
    "thresholds": [10, 20, 50],
    "min_lesson_length": 3,
    "signal_smoothing": True,
    "parameters": {
        "param1": [0.7, 0.5, 0.3, 0.1],
        "param2": [100, 50, 20, 15],
        "param3": [0.2, 0.3, 0.7, 0.9],
    },
}


@pytest.fixture
def write(tmp_path):
    def _write(data, name="curriculum.json"):
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return str(path)
    return _write


def test_seed_curriculum_behavior(write):
    location = write(SEED_CURRICULUM)
    with pytest.raises(UnityEnvironmentException, match="param3 in Curriculum .* not present"):
        Curriculum(location, {"param1": 1, "param2": 1})
    curriculum = Curriculum(location, {"param1": 1, "param2": 1, "param3": 1})
    assert curriculum.get_lesson_number == 0
    curriculum.set_lesson_number(1)
    assert curriculum.get_lesson_number == 1
    curriculum.increment_lesson(10)
    assert curriculum.get_lesson_number == 1
    curriculum.increment_lesson(30)
    curriculum.increment_lesson(30)
    assert curriculum.get_lesson_number == 1
    assert curriculum.lesson_length == 3
    curriculum.increment_lesson(30)
    assert curriculum.get_config() == {"param1": 0.3, "param2": 20, "param3": 0.7}
    assert curriculum.get_config(0) == {"param1": 0.7, "param2": 100, "param3": 0.2}
    assert curriculum.lesson_length == 0
    assert curriculum.get_lesson_number == 2
    assert curriculum.lesson_number == 2


def test_smoothing_and_one_lesson_per_call(write):
    data = dict(SEED_CURRICULUM, min_lesson_length=0, signal_smoothing=False)
    curriculum = Curriculum(write(data), {"param1": 1, "param2": 1, "param3": 1})
    assert curriculum.increment_lesson(1000) is True
    assert curriculum.get_lesson_number == 1  # never more than one lesson per measurement
    curriculum.increment_lesson(1000)
    curriculum.increment_lesson(1000)
    curriculum.increment_lesson(1000)
    assert curriculum.get_lesson_number == 3  # clamped at the last lesson
    assert curriculum.get_config(99) == {"param1": 0.1, "param2": 15, "param3": 0.9}


def test_progress_none_and_no_curriculum():
    curriculum = Curriculum(None, {})
    assert curriculum.get_config() == {}
    assert curriculum.increment_lesson(5.0) is False
    curriculum.set_lesson_number(4)
    assert curriculum.get_lesson_number == 0


def test_state_round_trip(write):
    params = {"param1": 1, "param2": 1, "param3": 1}
    a = Curriculum(write(SEED_CURRICULUM), params)
    a.set_lesson_number(2)
    a.increment_lesson(3.0)
    b = Curriculum(write(SEED_CURRICULUM), params)
    b.set_state(a.get_state())
    assert (b.lesson_number, b.lesson_length, b.smoothing_value) == (2, 1, a.smoothing_value)


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.pop("thresholds"), "does not contain a thresholds field"),
    (lambda d: d.pop("measure"), "does not contain a measure field"),
    (lambda d: d.update(measure="speed"), "measure .* must be one of"),
    (lambda d: d.update(thresholds="high"), "thresholds .* must be a list of numbers"),
    (lambda d: d.update(min_lesson_length=-1), "min_lesson_length"),
    (lambda d: d.update(signal_smoothing="yes"), "signal_smoothing"),
    (lambda d: d["parameters"].update(param1=[1, 2]), "must have 4 values .* but 2 were found"),
    (lambda d: d["parameters"].update(param1=[1, 2, "x", 4]), "must be numbers"),
    (lambda d: d.update(parameters=[1]), "parameters .* must be an object"),
])
def test_inconsistent_curriculum(write, mutate, match):
    data = json.loads(json.dumps(SEED_CURRICULUM))
    mutate(data)
    with pytest.raises(UnityEnvironmentException, match=match):
        Curriculum(write(data), {"param1": 1, "param2": 1, "param3": 1})


def test_missing_and_unreadable_files(write, tmp_path):
    with pytest.raises(UnityEnvironmentException, match="could not be found"):
        Curriculum(str(tmp_path / "nope.json"), {})
    with pytest.raises(UnityEnvironmentException, match="error decoding"):
        Curriculum(write("{not json"), {})
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UnityEnvironmentException, match="error decoding"):
        Curriculum(str(binary), {})
    with pytest.raises(UnityEnvironmentException, match="must be a JSON object"):
        Curriculum(write("[1, 2]"), {})


def test_shipped_test_curriculum_is_the_seeds():
    with open(os.path.join(__file__.rsplit("/tests/", 1)[0], "curricula", "test.json")) as f:
        assert json.load(f) == SEED_CURRICULUM


# --- issue 13: every file problem is found before the environment is launched --------------------

from unityagents.curriculum import CurriculumError, load_curriculum_file  # noqa: E402

SEED_TEXT = json.dumps(SEED_CURRICULUM)
FILE_MISTAKES = [
    ("NaN threshold", SEED_TEXT.replace("[10, 20, 50]", "[10, NaN, 50]"), r"NaN is not a value a curriculum can use"),
    ("Infinity value", SEED_TEXT.replace("[0.7, 0.5, 0.3, 0.1]", "[0.7, Infinity, 0.3, 0.1]"),
     r"Infinity is not a value a curriculum can use; every number must be finite"),
    ("-Infinity value", SEED_TEXT.replace("[0.7, 0.5, 0.3, 0.1]", "[-Infinity, 0.5, 0.3, 0.1]"),
     r"-Infinity is not a value"),
    ("1e400 overflows", SEED_TEXT.replace("[0.2, 0.3, 0.7, 0.9]", "[0.2, 1e400, 0.7, 0.9]"), r"1e400 overflows to inf"),
    ("duplicate key", SEED_TEXT.replace('"measure": "reward"', '"measure": "reward", "measure": "progress"'),
     r"the key 'measure' is given twice in one object.*Remove one"),
    ("deep nesting", "[" * 100000 + "]" * 100000, r"nested too deeply"),
    ("unknown field (typo)", SEED_TEXT.replace('"signal_smoothing": true',
                                               '"signal_smoothing": true, "min_lesson_lenght": 3'),
     r"unknown field 'min_lesson_lenght'. Did you mean 'min_lesson_length'\?"),
    ("boolean min_lesson_length", SEED_TEXT.replace('"min_lesson_length": 3', '"min_lesson_length": true'),
     r"min_lesson_length .* must be a non-negative integer, not True"),
    ("float min_lesson_length", SEED_TEXT.replace('"min_lesson_length": 3', '"min_lesson_length": 2.5'),
     r"min_lesson_length .* must be a non-negative integer, not 2.5"),
    ("boolean threshold", SEED_TEXT.replace("[10, 20, 50]", "[10, true, 50]"),
     r"thresholds .* must be a list of numbers"),
    ("null parameter values", SEED_TEXT.replace("[100, 50, 20, 15]", "null"),
     r"param2 .* must have 4 values .* but None were found"),
    ("unreachable progress threshold",
     SEED_TEXT.replace('"reward"', '"progress"').replace("[10, 20, 50]", "[0.2, 0.5, 1.0]"),
     r"measure progress, .* never exceeds 1, so \[1.0\] can never be passed"),
    ("top level a string", '"lessons"', r"must be a JSON object .* not a str"),
    ("empty file", "", r"error decoding .* must be a JSON object"),
]


@pytest.mark.parametrize("what, text, match", FILE_MISTAKES, ids=[m[0] for m in FILE_MISTAKES])
def test_file_mistakes_are_found_without_an_environment(write, what, text, match):
    location = write(text)
    with pytest.raises(CurriculumError, match=match) as raised:
        Curriculum.validate_file(location)
    assert location in str(raised.value), "the message names the file"
    with pytest.raises(CurriculumError, match=match):  # and the environment's own check agrees
        Curriculum(location, {"param1": 1, "param2": 1, "param3": 1})


def test_validate_file_returns_the_lessons_and_leaves_names_to_the_scene(write):
    location = write(SEED_CURRICULUM)
    assert load_curriculum_file(location) == SEED_CURRICULUM
    with pytest.raises(CurriculumError, match=r"param3 in Curriculum .* not present.*Did you mean 'param_3'\?"):
        Curriculum(location, {"param1": 1, "param2": 1, "param_3": 1})
    assert issubclass(CurriculumError, UnityEnvironmentException)


def test_oversized_file_and_folder_are_refused_without_reading_them(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse: a 1 GiB file that costs no disk, and must not be read
    with pytest.raises(CurriculumError, match=r"big.json has 1073741824 bytes, more than the 1048576"):
        Curriculum.validate_file(str(big))
    with pytest.raises(CurriculumError, match=r"is a folder; --curriculum takes the path of a JSON file"):
        Curriculum.validate_file(str(tmp_path))


def test_shipped_curricula_validate():
    folder = os.path.join(__file__.rsplit("/tests/", 1)[0], "curricula")
    for name in sorted(os.listdir(folder)):
        assert load_curriculum_file(os.path.join(folder, name))["parameters"]
