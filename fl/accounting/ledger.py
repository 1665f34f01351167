"""Per-user privacy ledger.

Events in, numbers out: every release of a user (training or evaluation) is
recorded with its :class:`~mechanisms.guarantee.Guarantee`; the ledger keeps,
per user and channel, the running sums that basic composition gives
(docs/SPEC.md §0.3): metric epsilons add (in the mechanism's own metric),
pure-LDP equivalents ``Guarantee.as_ldp()`` add, deltas add. It also counts each
user's releases per kind of guarantee, so the most exposed user's releases can
be composed more tightly (advanced composition, PLD; ``composition.py``, which
reports such a figure only when it is finite and below basic composition, and
otherwise ``None`` with the reason in ``epsilon_<method>_note``). A re-sent
cached release is not an event: it costs nothing. A release whose guarantee
carries its mechanism's accounting kind (``Guarantee.accounting``) is counted under
the dp-accounting event that describes it exactly (``composition.mechanism_event``:
Laplace, Gaussian, randomized response), so that PLD composes that mechanism's
own privacy loss distribution; without a kind the generic (eps, delta) pair is
composed (each figure names its
accountant). Users of different
populations (training and test users) are different people; parallel
composition applies across users.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from fl.accounting.analysis.composition import compose_worst, mechanism_event
from mechanisms.guarantee import Guarantee

CHANNELS = ("embedding", "label")


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _jsonable(value: object) -> object:
    return _finite_or_none(value) if isinstance(value, float) else value


class PrivacyLedger:
    """Cumulative per-user spend for named populations of users.

    Parameters
    ----------
    populations : dict[str, int]
        Population name (for example ``"train"``, ``"test"``) -> number of users.
    """

    def __init__(self, populations: dict[str, int], target_delta: float = 1e-6) -> None:
        self.target_delta = float(target_delta)
        self._sizes = dict(populations)
        # (population, channel, (eps0, delta0), event or None) -> per-user release counts
        self._counts: dict[tuple[str, str, tuple[float, float], object], np.ndarray] = {}
        self._eps_metric = {p: {c: np.zeros(n) for c in CHANNELS} for p, n in populations.items()}
        self._eps_ldp = {p: {c: np.zeros(n) for c in CHANNELS} for p, n in populations.items()}
        self._delta = {p: {c: np.zeros(n) for c in CHANNELS} for p, n in populations.items()}
        self._releases = {p: np.zeros(n, dtype=np.int64) for p, n in populations.items()}
        self.metrics: dict[str, str] = {}
        self.events = 0

    def record(
        self,
        population: str,
        user_ids: Iterable[int],
        guarantee: Guarantee,
        channel: str,
        units: Iterable[int] | None = None,
    ) -> None:
        """Add one release per entry of ``user_ids`` (repeats = several releases).

        ``units`` (one count per entry) says how many independent releases of
        ``guarantee`` each release composes: the words of a word-level rewrite,
        each sanitized with its own noise. The spend and the composition counts
        grow by ``units`` (basic composition over the words, and PLD/advanced
        composition over all of a user's words), the release count by one.
        In a metric guarantee composed over words the metric becomes the sum of
        the per-word distances (``<metric>_sum``) and its epsilon is not multiplied.

        The kind the guarantee's mechanism declared (``Guarantee.accounting``, and
        ``buckets`` for randomized response) lets the composition use the
        mechanism's own dp-accounting event (``composition.mechanism_event``);
        without one the generic (eps, delta) pair is composed. The
        basic-composition sums do not depend on it.
        """
        if channel not in CHANNELS:
            raise ValueError(f"unknown channel {channel!r}")
        ids = np.asarray(list(user_ids) if not isinstance(user_ids, np.ndarray) else user_ids, dtype=np.int64)
        if ids.size == 0:
            return
        if units is None:
            k = np.ones(ids.size, dtype=np.int64)
        else:
            k = np.asarray(list(units) if not isinstance(units, np.ndarray) else units, dtype=np.int64)
            if k.shape != ids.shape or (k < 0).any():
                raise ValueError(f"units must be one count >= 0 per release, got shape {k.shape} for {ids.size}")
        eps0, delta0 = guarantee.as_ldp()
        key = (population, channel, (float(eps0), float(delta0)), mechanism_event(guarantee))
        if key not in self._counts:
            self._counts[key] = np.zeros(self._sizes[population], dtype=np.int64)
        np.add.at(self._counts[key], ids, k)
        # A release of zero units costs nothing whatever the per-unit epsilon (and 0 * inf is nan).
        some = k > 0
        per_unit = np.where(some, eps0, 0.0)
        metric_eps = np.where(some, guarantee.epsilon, 0.0) if guarantee.notion == "metric" else per_unit * k
        np.add.at(self._eps_metric[population][channel], ids, metric_eps)
        np.add.at(self._eps_ldp[population][channel], ids, per_unit * k)
        np.add.at(self._delta[population][channel], ids, np.minimum(1.0, delta0 * k))
        if channel == "embedding":
            np.add.at(self._releases[population], ids, 1)
            self.events += int(ids.size)
        if guarantee.notion == "metric":
            self.metrics[channel] = (guarantee.metric or "") + ("_sum" if units is not None else "")

    def _all(self, table: dict[str, dict[str, np.ndarray]], channel: str) -> np.ndarray:
        return np.concatenate([table[p][channel] for p in table]) if table else np.zeros(0)

    def max_releases_per_user(self) -> int:
        """The most fresh embedding releases any one user has made."""
        return max((int(r.max()) for r in self._releases.values() if r.size), default=0)

    def spent(self, population: str, user_ids: np.ndarray) -> np.ndarray:
        """Cumulative pure-LDP epsilon (embedding + label) of the given users."""
        ids = np.asarray(user_ids, dtype=np.int64)
        return self._eps_ldp[population]["embedding"][ids] + self._eps_ldp[population]["label"][ids]

    def worst_user_composition(self, channels: tuple[str, ...] = CHANNELS) -> dict[str, object]:
        """Tighter-than-basic composition that holds for every user (``composition.compose_worst``).

        Users of different populations are different people, so their release
        profiles are pooled; the figures are maxima over all of them.
        ``epsilon_advanced`` / ``epsilon_pld`` are numbers only when finite and
        strictly below ``epsilon_basic``; otherwise ``None``, and
        ``epsilon_advanced_note`` / ``epsilon_pld_note`` say why (both keys are
        always present, ``None`` next to a number). ``accountant`` and
        ``epsilon_pld_accountant`` name the accountants (``compose_worst``).
        Infinite values (a channel in the clear) are ``None``: the result is plain JSON.
        """
        keys = [key for key in self._counts if key[1] in channels]
        kinds = list(dict.fromkeys((*pair, event) for _, _, pair, event in keys))
        blocks = {pop: np.zeros((size, len(kinds)), dtype=np.int64) for pop, size in self._sizes.items()}
        for key in keys:  # the same (eps, delta, event) in two channels: one kind, counts added
            pop, _, pair, event = key
            blocks[pop][:, kinds.index((*pair, event))] += self._counts[key]
        counts = np.concatenate(list(blocks.values())) if blocks else np.zeros((0, len(kinds)), dtype=np.int64)
        out = compose_worst(kinds, counts, self.target_delta)
        return {k: _jsonable(v) for k, v in out.items()}

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
        delta = np.minimum(1.0, self._all(self._delta, "embedding") + self._all(self._delta, "label"))
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
            # Every user's releases composed, maximum over users: basic (pure), and
            # advanced composition and PLD at delta_approx where they beat basic
            # (else None + *_note); epsilon_best_approx is the best of them.
            "composition_embedding": self.worst_user_composition(("embedding",)),
            "composition_total": self.worst_user_composition(),
        }
