"""The base of scenes made of independent areas whose agents play each episode together."""
from __future__ import annotations

import numpy as np

from academy.scene import Scene


class AreaScene(Scene):
    """``areas`` independent areas of ``members`` agents each: in every brain, rows
    ``a * members`` to ``(a + 1) * members - 1`` play in area ``a``.

    An area's episode ends as a whole (``step`` sets ``ended[area]``, and the area's agents are
    done); the area restarts when the first of its agents resets (the other brains' and members'
    resets that follow find it playing again), and an Academy reset ends every area's episode.
    """

    def __init__(self, seed: int, areas: int, members: int) -> None:
        super().__init__(seed)
        #: The area of each agent row.
        self.area = np.arange(areas * members) // members
        #: Per area: its episode has ended, so the next reset of one of its agents restarts it.
        self.ended = np.ones(areas, dtype=bool)

    def academy_reset(self) -> None:
        self.ended[:] = True

    def restart_areas(self, index: np.ndarray) -> np.ndarray:
        """The areas (sorted) of the agent rows ``index`` whose episode has ended, marked as playing
        again; ``reset_agents`` puts them back in their start state."""
        areas = np.unique(self.area[index])
        areas = areas[self.ended[areas]]
        self.ended[areas] = False
        return areas
