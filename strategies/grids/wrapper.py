"""The base of Sanitas' grid wrappers (timing, lost nodes, dropped replies, the published encoder):
each holds a Flower grid and changes one call; every other call is the wrapped grid's."""

from __future__ import annotations

from typing import Any


class GridWrapper:
    """A Flower grid around ``grid``: attribute lookups it does not define go to ``grid``."""

    def __init__(self, grid: Any) -> None:
        self._grid = grid

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)
