"""scripts/render_scenes.py draws every built-in scene it knows, and each picture docs/environments.md shows
is one it writes."""
from __future__ import annotations

import importlib.util
import os
import re

import numpy as np
from PIL import Image

from academy import SCENES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_script():
    spec = importlib.util.spec_from_file_location("render_scenes", os.path.join(ROOT, "scripts", "render_scenes.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_drawing_is_a_picture_of_its_scene_and_the_docs_show_what_it_writes(tmp_path, capsys):
    script = load_script()
    assert set(script.TOP_DOWN) | set(script.SAME_AS) <= set(SCENES)
    assert script.main(["--out", str(tmp_path), "--frames", "2"]) == 0
    written = {f[len("scene-"):-len(".png")] for f in os.listdir(tmp_path)}
    assert written == {n for n in SCENES if n not in script.SAME_AS and (n in script.TOP_DOWN or n == "GridWorld")}
    for name in written:
        pixels = np.asarray(Image.open(tmp_path / f"scene-{name}.png").convert("RGB"))
        assert pixels.shape[0] >= 16 and len(np.unique(pixels.reshape(-1, 3), axis=0)) >= 3, name  # not blank
    shown = set(re.findall(r"images/scene-([\w]+)\.png", open(os.path.join(ROOT, "docs", "environments.md")).read()))
    assert shown == written
