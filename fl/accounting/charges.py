"""What one release costs, in the form that travels with it.

A :class:`Charge` is the guarantee of one release together with how it is
composed: ``units = None`` means the release is a single use of
``guarantee`` (a sentence release, a label, a whole document under
DeepCandidate/truncation whose guarantee already covers its k sentences);
``units = k`` means the release composes k independent uses of a per-unit
``guarantee`` (the k words of a word-level rewrite). The client's budget check
(:attr:`Charge.cost`) and the server's ledger (``PrivacyLedger.charge``) read
the same object, so the two can never disagree on what a release costs.

The guarantee carries what its mechanism declared about how to compose it (``Guarantee.accounting``
and, for randomized response, ``buckets``), so the ledger can compose the release with the
mechanism's own dp-accounting event (:attr:`Charge.event`); a guarantee without a kind composes as
the generic (eps, delta) pair. ``to_dict`` writes them beside the guarantee, only when set.

A reply carries a short list of distinct charges and, per row and channel, an
index into that list (a handful of distinct word or sentence counts per
reply, not one guarantee per row).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from dp_accounting.dp_event import DpEvent

from fl.accounting.analysis.composition import mechanism_event
from mechanisms.guarantee import Guarantee, compose_units


@dataclass(frozen=True)
class Charge:
    """The guarantee of one release: ``guarantee`` used once, or per unit over ``units`` units."""

    guarantee: Guarantee
    units: int | None = None

    def __post_init__(self) -> None:
        if self.units is not None and (isinstance(self.units, bool) or self.units < 0):
            raise ValueError(f"units must be None or an integer >= 0, got {self.units!r}")

    @property
    def num_buckets(self) -> int | None:
        """Randomized response: the number of values a release chooses among (``None``: unknown or not RR)."""
        return self.guarantee.buckets

    @property
    def event(self) -> DpEvent | None:
        """The dp-accounting event of one unit (``composition.mechanism_event``); ``None``: the generic pair."""
        return mechanism_event(self.guarantee)

    @property
    def cost(self) -> float:
        """Pure-LDP epsilon of the release (basic composition over units); 0 for zero units."""
        eps0 = self.guarantee.as_ldp()[0]
        if self.units is None:
            return eps0
        return 0.0 if self.units == 0 else self.units * eps0  # 0 * inf would be nan

    def release_guarantee(self, granularity: str = "document") -> Guarantee:
        """The release as one guarantee (units composed by basic composition)."""
        return self.guarantee if self.units is None else compose_units(self.guarantee, self.units, granularity)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"guarantee": self.guarantee.to_dict(), "units": self.units}
        if self.guarantee.accounting is not None:
            out["accounting"] = self.guarantee.accounting
        if self.guarantee.buckets is not None:
            out["buckets"] = self.guarantee.buckets
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Charge:
        units = data.get("units")
        kind = {k: data[k] for k in ("accounting", "buckets") if data.get(k) is not None}
        return cls(Guarantee.from_dict({**data["guarantee"], **kind}), None if units is None else int(units))


def index_charges(charges: list[Charge]) -> tuple[list[Charge], np.ndarray]:
    """Distinct charges (first-seen order) and each entry's index into them."""
    distinct: dict[Charge, int] = {}
    index = np.fromiter((distinct.setdefault(c, len(distinct)) for c in charges), dtype=np.int64, count=len(charges))
    return list(distinct), index


def costs(charges: list[Charge], index: np.ndarray) -> np.ndarray:
    """Per-row pure-LDP epsilon from a charge table and per-row indices (float64)."""
    table = np.array([c.cost for c in charges], dtype=np.float64) if charges else np.zeros(0)
    return table[np.asarray(index, dtype=np.int64)] if len(index) else np.zeros(0)
