"""Draw the built-in scenes for docs/environments.md, as PNGs under docs/images/.

Each scene is made by the academy (``academy.load_scene``), reset, and played for a few frames by its own
scripted heuristic, so the picture shows a scene in play. A scene with a camera is drawn by the academy
itself (``Scene.render``, what the agent sees); a scene without one is drawn from its state by a small
drawing here (``TOP_DOWN``, one agent's area); a variant of a drawn scene is not drawn again (``SAME_AS``),
and a scene with neither is listed as not drawn.

    python scripts/render_scenes.py [--out docs/images] [--frames 2] [--scale 2]
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Dict, List

import numpy as np
from PIL import Image, ImageDraw

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


FLOOR, WALL, AGENT, GOAL, BAD, THING = (235, 235, 235), (120, 120, 120), (40, 90, 200), (60, 170, 60), \
    (200, 60, 60), (210, 150, 60)


def canvas(width: int, height: int):
    image = Image.new("RGB", (width, height), FLOOR)
    return image, ImageDraw.Draw(image)


def dot(draw, x: float, y: float, r: float, colour) -> None:
    draw.ellipse([x - r, y - r, x + r, y + r], fill=colour)


def ball3d(scene) -> np.ndarray:
    """Platform 0 from above (darker where it tilts down) and its ball."""
    from academy.envs import ball3d as b

    image, draw = canvas(84, 84)
    scale = 30 / b.HALF
    shade = int(200 - 2 * float(np.abs(scene.tilt[0]).sum()))
    draw.rectangle([12, 12, 72, 72], fill=(shade, shade, 230), outline=WALL)
    dot(draw, 42 + scale * scene.pos[0, 0], 42 - scale * scene.pos[0, 2], 5, BAD)
    return np.asarray(image)


def basic(scene) -> np.ndarray:
    """The line of 20 cells: the small goal, the large goal, the agent."""
    from academy.envs import basic as b

    image, draw = canvas(b.CELLS * 8, 16)
    for cell in range(b.CELLS):
        colour = GOAL if cell in (b.SMALL_GOAL, b.LARGE_GOAL) else FLOOR
        draw.rectangle([cell * 8, 0, cell * 8 + 7, 15], fill=colour, outline=WALL)
    dot(draw, scene.position[0] * 8 + 4, 8, 3, AGENT)
    return np.asarray(image)


def hallway(scene) -> np.ndarray:
    """Corridor 0 from above: the cue cells (red: go left, blue-green: go right), the two goals at the top."""
    from academy.envs import hallway as h

    image, draw = canvas(60, (h.LENGTH + 2) * 10)
    top = 10
    draw.rectangle([0, 0, 59, 9], fill=WALL)
    draw.rectangle([0, 0, 9, 9], fill=GOAL)
    draw.rectangle([50, 0, 59, 9], fill=GOAL)
    draw.rectangle([0, top, 59, 10 * (h.LENGTH + 1)], fill=WALL)
    for cell in range(h.LENGTH + 1):
        y = top + (h.LENGTH - cell) * 10
        colour = (BAD if scene.cue[0] == 0 else (60, 170, 170)) if cell < h.CUE_CELLS else FLOOR
        draw.rectangle([25, y, 34, y + 9], fill=colour)
    draw.rectangle([0, top, 59, top + 9], fill=FLOOR)
    dot(draw, 30, top + (h.LENGTH - int(scene.z[0])) * 10 + 5, 4, AGENT)
    return np.asarray(image)


def push(scene) -> np.ndarray:
    """Area 0 from above: the goal pad, the block, the agent."""
    from academy.envs import push as p

    image, draw = canvas(96, 96)
    scale = 96 / (2 * p.AREA)

    def at(xz):
        return 48 + scale * xz[0], 48 - scale * xz[1]

    x, y = at(scene.goal[0])
    draw.rectangle([x - 8, y - 8, x + 8, y + 8], fill=GOAL)
    x, y = at(scene.block[0])
    draw.rectangle([x - 5, y - 5, x + 5, y + 5], fill=THING)
    dot(draw, *at(scene.agent[0]), 3, AGENT)
    return np.asarray(image)


def interact(scene) -> np.ndarray:
    """Agent 0 and its button."""
    image, draw = canvas(84, 84)
    scale = 84 / 4.5

    def at(xz):
        return 42 + scale * xz[0], 42 - scale * xz[1]

    dot(draw, *at(scene.button[0]), 5, BAD)
    dot(draw, *at(scene.position[0]), 4, AGENT)
    return np.asarray(image)


def tennis(scene) -> np.ndarray:
    """Court 0 from the side: the net, the two players, the ball."""
    from academy.envs import tennis as t

    image, draw = canvas(128, 64)
    scale = 128 / (2 * t.HALF)
    ground = 56
    draw.line([0, ground, 127, ground], fill=WALL, width=2)
    draw.rectangle([63, ground - scale * t.NET, 64, ground], fill=WALL)
    for side, colour in ((0, AGENT), (1, THING)):
        x, y = scene.pos[side, 0]
        draw.rectangle([64 + scale * x - 2, ground - scale * y - 10, 64 + scale * x + 2, ground - scale * y],
                       fill=colour)
    dot(draw, 64 + scale * scene.ball[0, 0], ground - scale * scene.ball[0, 1], 2, GOAL)
    return np.asarray(image)


def soccer(scene) -> np.ndarray:
    """Area 0: the line of cells between the goals, the blue pair above, the purple pair below, the ball."""
    from academy.envs import soccer as s

    cells = s.WIDTH + 2
    image, draw = canvas(cells * 12, 36)
    for cell in range(cells):
        colour = WALL if cell in (0, cells - 1) else FLOOR
        draw.rectangle([cell * 12, 0, cell * 12 + 11, 35], fill=colour, outline=(200, 200, 200))
    for team, y, colour in ((0, 6, AGENT), (1, 30, (140, 60, 170))):
        for member in range(s.MEMBERS):
            dot(draw, (1 + scene.pos[team, 0, member]) * 12 + 4 + 4 * member, y, 3, colour)
    dot(draw, (1 + scene.ball[0]) * 12 + 6, 18, 3, GOAL)
    return np.asarray(image)


def sorter(scene) -> np.ndarray:
    """Agent 0's 5x5 grid: its numbered tiles (darker: visit first) and the agent."""
    from academy.envs import sorter as s

    image, draw = canvas(s.GRID * 16, s.GRID * 16)
    for k in range(int(scene.count[0])):
        x, z = scene.tiles[0, k]
        shade = 90 + 30 * k
        colour = (200, 200, 200) if k < scene.visited[0] else (shade, shade // 2, 20)
        draw.rectangle([x * 16 + 2, z * 16 + 2, x * 16 + 13, z * 16 + 13], fill=colour)
    x, z = scene.position[0]
    dot(draw, x * 16 + 8, z * 16 + 8, 4, AGENT)
    return np.asarray(image)


#: Scenes without a camera, drawn from their state (agent 0's area).
TOP_DOWN: Dict[str, Callable] = {
    "3DBall": ball3d, "Basic": basic, "Hallway": hallway, "Push": push, "Interact": interact, "Tennis": tennis,
    "Pyramids": pyramids, "Soccer": soccer, "Sorter": sorter,
}
#: Scenes drawn as another is (the same area and state): not drawn again.
SAME_AS = {"3DBallHard": "3DBall", "3DBallIL": "3DBall", "SorterFlat": "Sorter"}


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
        if name in SAME_AS:
            print(f"{name}: drawn as {SAME_AS[name]}")
            continue
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
