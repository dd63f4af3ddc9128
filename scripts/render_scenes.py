"""Draw the built-in scenes for docs/environments.md, as PNGs under docs/images/.

Each scene is made by the academy (``academy.load_scene``), reset, and played for a few frames by its own
scripted heuristic, so the picture shows a scene in play. A scene with a camera is drawn by the academy
itself (``Scene.render``, what the agent sees); a scene without one is drawn top-down from its state by
a small drawing here (``TOP_DOWN``); the others are listed as not drawn.

    python scripts/render_scenes.py [--out docs/images] [--frames 2] [--scale 2]
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Dict, List

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from academy import SCENES, load_scene  # noqa: E402


def pyramids(scene) -> np.ndarray:
    """Agent 0's room from above: walls grey, switch red (green when on), bricks sand, gold yellow, agent blue
    with its heading as a lighter cell in front."""
    from academy.envs import pyramids as p

    colours = {p.EMPTY: (235, 235, 235), p.SWITCH: (200, 60, 60), p.BRICK: (210, 180, 120), p.GOLD: (240, 200, 30)}
    room = np.full((p.ROOM + 2, p.ROOM + 2, 3), 120, dtype=np.uint8)
    for code, colour in colours.items():
        room[1:-1, 1:-1][scene.cells[0] == code] = colour
    if scene.switch_on[0]:
        x, z = scene.switch[0]
        room[1 + x, 1 + z] = (60, 170, 60)
    x, z = scene.position[0]
    room[1 + x, 1 + z] = (40, 90, 200)
    dx, dz = p.HEADINGS[scene.heading[0]]
    if 0 <= x + dx < p.ROOM and 0 <= z + dz < p.ROOM and scene.cells[0, x + dx, z + dz] == p.EMPTY:
        room[1 + x + dx, 1 + z + dz] = (150, 180, 235)
    return np.ascontiguousarray(room.transpose(1, 0, 2)[::-1])  # +z up, +x right


#: Scenes without a camera, drawn from their state (agent 0's area).
TOP_DOWN: Dict[str, Callable] = {"Pyramids": pyramids}


def play(name: str, frames: int, seed: int):
    scene = load_scene(name)(seed=seed)
    scene.academy_reset()
    for brain in scene.brains:
        scene.reset_agents(brain.name, np.arange(brain.n_agents))
    for _ in range(frames):
        scene.step({b.name: scene.heuristic(b.name) for b in scene.brains})
    return scene


def picture(name: str, frames: int, seed: int):
    """The scene's picture (uint8 RGB), or None when it has neither a camera nor a drawing."""
    scene = play(name, frames, seed)
    for brain in scene.brains:
        if getattr(brain, "cameras", ()):
            return np.asarray(scene.render(brain.name, 0))[0]
    return TOP_DOWN[name](scene) if name in TOP_DOWN else None


def main(argv: List[str] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join("docs", "images"))
    p.add_argument("--frames", type=int, default=2, help="heuristic frames played before the picture")
    p.add_argument("--scale", type=int, default=2, help="pixels per rendered pixel (nearest neighbour)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name in SCENES:
        image = picture(name, args.frames, args.seed)
        if image is None:
            print(f"{name}: no camera and no top-down drawing; not drawn")
            continue
        scale = args.scale * max(1, 84 // max(image.shape[:2]))
        out = os.path.join(args.out, f"scene-{name}.png")
        Image.fromarray(image).resize((image.shape[1] * scale, image.shape[0] * scale), Image.NEAREST).save(
            out, optimize=True)
        print(f"{name}: {out} ({os.path.getsize(out):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
