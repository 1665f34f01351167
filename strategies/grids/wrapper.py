"""The base of Sanitas' grid wrappers (timing, lost nodes, dropped replies, the published encoder):
each holds a Flower grid and changes one call; every other call is the wrapped grid's."""

from __future__ import annotations

from typing import Any, cast

from flwr.serverapp import Grid


class GridWrapper:
    """A Flower grid around ``grid``: attribute lookups it does not define go to ``grid``."""

    def __init__(self, grid: Any) -> None:
        self._grid = grid

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)

    def as_grid(self) -> Grid:
        """This wrapper, typed as the Flower ``Grid`` it stands in for where a ``Grid`` is expected.

        A wrapper is a grid by duck typing, not by class: every call it does not define goes to the
        wrapped grid (``__getattr__``), so it does not subclass Flower's abstract ``Grid``."""
        return cast(Grid, self)
