"""The server of a ``sanitas compare`` local point whose recipe fell back to the public-only model.

``fl.maps.recipes.choose`` holds every class-means candidate against the public-only models on the same public
hold-outs; where none beats them at a point's whole-record epsilon on the seed's public draw, the recipe is a
*fallback* (:class:`simulations.drivers.compare_recipes.Recipe`), and the point's run names this server
(``strategy = FALLBACK_STRATEGY``, a ``ReleaseTraining`` subclass: ``strategies.loading``). Everything else in the
run is as the recipe says: the users release at the recipe's share and map-dim, cohort by cohort, and the
accounting wrapper charges each release to its user's ledger as in any local run, so the point's guarantee is the
one it states. The server sets every release aside: each fit is the class-means model of the public statistics
alone in the round's map (:func:`fl.maps.class_means.fit` of no release), which is the run's own public-only
class-means model (``ServerMap.setup_public_only``). So a recipe that collapses when emulated on public data
ships no collapsed model, and the round record says the releases were set aside
(``train_info["public_only_fallback"]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from strategies.local.release_training import ReleaseTraining

#: The ``strategy`` value of a fallback point's run (short: it is part of the run's name, a file name).
FALLBACK_STRATEGY = "simulations.drivers.compare_fallback:PublicOnly"


class PublicOnly(ReleaseTraining):
    """``ReleaseTraining`` that asks and charges the users as configured and fits on none of their releases: the
    public-only class-means model (``server-model = "class-means"`` only)."""

    def __init__(self, cfg: Mapping[str, Any], timeout: float = 3600.0) -> None:
        super().__init__(cfg, timeout)
        if not self.class_means:
            raise ValueError(
                'the public-only fallback ships the public class-means model: it needs server-model = "class-means"'
            )

    def fit_class_means(self, x: np.ndarray, y: np.ndarray) -> float:
        """The class-means fit of no release (the public statistics' discriminant in this round's map); the
        releases received are counted in the round record, never read."""
        loss = super().fit_class_means(x[:0], y[:0])
        self.train_info["public_only_fallback"] = {"releases_set_aside": int(len(y))}
        return loss
