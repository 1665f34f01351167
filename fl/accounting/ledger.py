"""Per-user privacy ledger (basic composition), accounting v1.

Events in, numbers out: every release of a user (training or evaluation) is
recorded with its :class:`~mechanisms.guarantee.Guarantee`; the ledger keeps,
per user and channel, the running sums that basic composition gives
(spec §0.3): metric epsilons add (in the mechanism's own metric), pure-LDP
equivalents ``Guarantee.as_ldp()`` add, deltas add. A re-sent cached release is
not an event: it costs nothing. Users of different populations (training and
test users) are different people; parallel composition applies across users.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from mechanisms.guarantee import Guarantee

CHANNELS = ("embedding", "label")


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


class PrivacyLedger:
    """Cumulative per-user spend for named populations of users.

    Parameters
    ----------
    populations : dict[str, int]
        Population name (for example ``"train"``, ``"test"``) -> number of users.
    """

    def __init__(self, populations: dict[str, int]) -> None:
        self._eps_metric = {p: {c: np.zeros(n) for c in CHANNELS} for p, n in populations.items()}
        self._eps_ldp = {p: {c: np.zeros(n) for c in CHANNELS} for p, n in populations.items()}
        self._delta = {p: {c: np.zeros(n) for c in CHANNELS} for p, n in populations.items()}
        self._releases = {p: np.zeros(n, dtype=np.int64) for p, n in populations.items()}
        self.metrics: dict[str, str] = {}
        self.events = 0

    def record(self, population: str, user_ids: Iterable[int], guarantee: Guarantee, channel: str) -> None:
        """Add one release per entry of ``user_ids`` (repeats = several releases)."""
        if channel not in CHANNELS:
            raise ValueError(f"unknown channel {channel!r}")
        ids = np.asarray(list(user_ids) if not isinstance(user_ids, np.ndarray) else user_ids, dtype=np.int64)
        if ids.size == 0:
            return
        eps0, delta0 = guarantee.as_ldp()
        metric_eps = guarantee.epsilon if guarantee.notion == "metric" else eps0
        np.add.at(self._eps_metric[population][channel], ids, metric_eps)
        np.add.at(self._eps_ldp[population][channel], ids, eps0)
        np.add.at(self._delta[population][channel], ids, delta0)
        if channel == "embedding":
            np.add.at(self._releases[population], ids, 1)
            self.events += int(ids.size)
        if guarantee.notion == "metric":
            self.metrics[channel] = guarantee.metric or ""

    def _all(self, table: dict[str, dict[str, np.ndarray]], channel: str) -> np.ndarray:
        return np.concatenate([table[p][channel] for p in table]) if table else np.zeros(0)

    def snapshot(self) -> dict[str, object]:
        """Max (and median) cumulative per-user spend over every user seen so far.

        Infinite values (a channel released in the clear) are reported as
        ``None`` together with ``*_protected: False``: no finite epsilon is
        ever printed for an unprotected channel.
        """
        releases = np.concatenate([r for r in self._releases.values()])
        seen = releases > 0
        emb_metric = self._all(self._eps_metric, "embedding")
        emb_ldp = self._all(self._eps_ldp, "embedding")
        label = self._all(self._eps_ldp, "label")
        delta = self._all(self._delta, "embedding") + self._all(self._delta, "label")
        total = emb_ldp + label

        def stat(values: np.ndarray, fn) -> float | None:
            return _finite_or_none(float(fn(values))) if values.size else 0.0

        return {
            "releases": int(self.events),
            "users_released": int(seen.sum()),
            "max_releases_per_user": int(releases.max()) if releases.size else 0,
            "epsilon_metric": stat(emb_metric, np.max),
            "metric": self.metrics.get("embedding"),
            "epsilon_ldp": stat(emb_ldp, np.max),
            "epsilon_ldp_median": stat(emb_ldp[seen], np.median) if seen.any() else 0.0,
            "epsilon_label": stat(label, np.max),
            "epsilon_total": stat(total, np.max),
            "delta_total": float(delta.max()) if delta.size else 0.0,
            "embedding_protected": bool(np.isfinite(emb_ldp).all()),
            "label_protected": bool(np.isfinite(label).all()),
        }
