"""A grid that shows a strategy only some of the nodes (the ones holding training users)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from strategies.grids.wrapper import GridWrapper


class NodeSubset(GridWrapper):
    """``grid`` whose ``get_node_ids`` lists ``nodes`` only (those of them still connected): a Flower strategy
    asked to sample nodes samples among these."""

    def __init__(self, grid: Any, nodes: Iterable[int]) -> None:
        super().__init__(grid)
        self._nodes = sorted(int(n) for n in nodes)

    def get_node_ids(self) -> list[int]:
        connected = set(self._grid.get_node_ids())
        return [n for n in self._nodes if n in connected]
