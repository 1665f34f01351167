"""Evaluation in the central modes: the nodes' confusion counts, summed into the run's scores."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import Message

from fl.maps.pipeline import scores


def sum_confusions(
    replies: Iterable[Message], num_classes: int, key: str = "confusion"
) -> tuple[dict[str, float], np.ndarray]:
    """Scores and the summed confusion counts ``key`` of central-mode evaluate replies (a failed reply stops
    the run; replies without ``key`` add nothing, and scores of no counts are NaN)."""
    k = num_classes
    conf = np.zeros((k, k), dtype=np.int64)
    for reply in replies:
        if reply.has_error():
            raise RuntimeError(f"a node failed during evaluate: {reply.error.reason}")
        if key in reply.content["metrics"]:
            conf += np.asarray(reply.content["metrics"][key], dtype=np.int64).reshape(k, k)
    return scores(conf), conf
