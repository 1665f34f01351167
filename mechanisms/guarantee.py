"""The privacy guarantee a mechanism states about each of its releases.

A :class:`Guarantee` is plain data (like a dp-accounting ``DpEvent``): a
mechanism says what one release costs, an accountant decides what a sequence
of releases costs. Definitions follow docs/SPEC.md §0.1:

* ``"pure"``: P[M(x) in O] <= e^eps P[M(x') in O] for all inputs x, x'.
* ``"approx"``: P[M(x) in O] <= e^eps P[M(x') in O] + delta.
* ``"metric"``: P[M(x) in O] <= e^(eps d(x, x')) P[M(x') in O] (+ delta), for the
  metric ``metric`` on the input domain. On a domain of ``diameter`` D this is
  pure (eps * D)-LDP (Chatzikokolakis et al. 2013; Du et al. 2023, Fact 1).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

Notion = Literal["pure", "approx", "metric"]
NOTIONS: tuple[str, ...] = ("pure", "approx", "metric")
GRANULARITIES: tuple[str, ...] = ("word", "sentence", "document", "label", "user")
#: The mechanism families an accountant can compose exactly (``fl.accounting`` turns each into its
#: dp-accounting event): Laplace noise at scale Delta_1 / epsilon (a pure guarantee), Gaussian noise
#: (an (epsilon, delta) guarantee), and randomized response among ``buckets`` values (pure).
ACCOUNTING_KINDS: tuple[str, ...] = ("laplace", "gaussian", "randomized_response")


@dataclass(frozen=True)
class Guarantee:
    """What one release of a mechanism guarantees.

    Parameters
    ----------
    notion : {"pure", "approx", "metric"}
        The differential-privacy notion (see module docstring).
    epsilon : float
        Privacy parameter; ``math.inf`` means "no privacy" (only the ``none``
        mechanism states that).
    delta : float
        Failure probability of (eps, delta) guarantees; 0 for pure and pure-metric.
    metric : str or None
        Name of the input metric for ``"metric"`` guarantees (for example
        ``"angular"``), ``None`` otherwise.
    diameter : float or None
        Diameter of the input domain under ``metric``; needed to convert a metric
        guarantee into pure LDP. ``None`` or ``inf`` means unbounded.
    granularity : str
        The privacy unit: ``"word"``, ``"sentence"``, ``"document"``, ``"label"``
        or ``"user"``.
    accounting : str or None
        What the release is, for an accountant that composes it exactly: one of
        :data:`ACCOUNTING_KINDS`, declared by the mechanism; ``None`` (the default)
        composes the generic (eps, delta) pair. Not part of what the guarantee
        states (:meth:`to_dict` leaves it out; a charge carries it on the wire).
    buckets : int or None
        ``accounting = "randomized_response"``: the number of values the response
        chooses among (``None`` until known: :meth:`over`).
    """

    notion: Notion
    epsilon: float
    delta: float = 0.0
    metric: str | None = None
    diameter: float | None = None
    granularity: str = "sentence"
    accounting: str | None = None
    buckets: int | None = None

    def __post_init__(self) -> None:
        if self.notion not in NOTIONS:
            raise ValueError(f"unknown privacy notion {self.notion!r}; use one of {NOTIONS}")
        eps = float(self.epsilon)
        if math.isnan(eps) or eps < 0:
            raise ValueError(f"guarantee epsilon must be >= 0, got {self.epsilon!r}")
        if not 0.0 <= float(self.delta) <= 1.0:
            raise ValueError(f"guarantee delta must lie in [0, 1], got {self.delta!r}")
        if self.notion == "metric" and not self.metric:
            raise ValueError("a metric guarantee must name its metric")
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"unknown granularity {self.granularity!r}; use one of {GRANULARITIES}")
        if self.accounting is not None and self.accounting not in ACCOUNTING_KINDS:
            raise ValueError(f"unknown accounting kind {self.accounting!r}; use one of {ACCOUNTING_KINDS} or None")
        if self.buckets is not None and (isinstance(self.buckets, bool) or int(self.buckets) < 2):
            raise ValueError(f"randomized response needs buckets >= 2, got {self.buckets!r}")

    def over(self, values: int) -> Guarantee:
        """This guarantee for a release among ``values`` possible values: randomized response's exact
        account needs that count (a label's response is among the run's classes); other kinds, and a
        count already known, are unchanged."""
        if self.accounting == "randomized_response" and self.buckets is None:
            return replace(self, buckets=int(values))
        return self

    @property
    def is_private(self) -> bool:
        """True when the release is covered by a finite epsilon."""
        return math.isfinite(self.epsilon)

    @property
    def is_vacuous(self) -> bool:
        """True when delta is 1 (to 1e-9): the (eps, delta) inequality then holds for any mechanism."""
        return self.delta >= 1.0 - 1e-9

    def as_ldp(self) -> tuple[float, float]:
        """Return the (epsilon0, delta0) local-DP guarantee implied per release.

        Pure and approx guarantees are returned unchanged. A metric guarantee on a
        domain of diameter D gives epsilon * D (and infinity when the domain is
        unbounded, since no finite pure guarantee then follows).
        """
        if self.notion != "metric":
            return float(self.epsilon), float(self.delta)
        if self.diameter is None or not math.isfinite(self.diameter):
            return math.inf, float(self.delta)
        return float(self.epsilon) * float(self.diameter), float(self.delta)

    def describe(self) -> str:
        """One line a user can read, for logs and result files."""
        if not self.is_private:
            return f"no privacy ({self.granularity} released in the clear)"
        eps0, delta0 = self.as_ldp()
        if self.notion == "metric":
            text = (
                f"{self.epsilon:g}*d_{self.metric}-LDP per {self.granularity} "
                f"(pure {eps0:g}-LDP on a domain of diameter {self.diameter:g})"
            )
        elif self.notion == "approx":
            text = f"({self.epsilon:g}, {self.delta:g})-LDP per {self.granularity}"
        else:
            text = f"{self.epsilon:g}-LDP (pure) per {self.granularity}"
        if self.notion == "metric" and self.delta > 0:
            text += f", delta={delta0:g}"
        if self.is_vacuous:
            text += " -- VACUOUS (delta ~ 1: no guarantee)"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; infinite epsilon becomes ``None``."""
        out = asdict(self)
        del out["accounting"], out["buckets"]  # how it may be composed, not what it states (Charge.to_dict)
        out["epsilon"] = float(self.epsilon) if self.is_private else None
        if self.diameter is not None and not math.isfinite(self.diameter):
            out["diameter"] = None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Guarantee:
        """Inverse of :meth:`to_dict` (``epsilon=None`` means no privacy)."""
        eps = data.get("epsilon")
        return cls(
            notion=data["notion"],
            epsilon=math.inf if eps is None else float(eps),
            delta=float(data.get("delta", 0.0)),
            metric=data.get("metric") or None,
            diameter=None if data.get("diameter") is None else float(data["diameter"]),
            granularity=data.get("granularity", "sentence"),
            accounting=data.get("accounting") or None,
            buckets=None if data.get("buckets") is None else int(data["buckets"]),
        )


def compose_units(g: Guarantee, count: int, granularity: str) -> Guarantee:
    """Basic composition of ``count`` releases of ``g``, one per unit, as one guarantee (docs/SPEC.md §0.3).

    Used for a document of ``count`` words sanitized word by word, neighbouring
    documents having the same number of words:

    * metric eps*d per unit -> eps * sum_i d(u_i, u'_i) (metric ``<metric>_sum``,
      diameter ``count * D``);
    * pure eps -> ``count * eps``;
    * (eps, delta) -> (``count * eps``, ``min(1, count * delta)``): at 1 the
      approximate guarantee is vacuous and says so (``is_vacuous``).
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be an integer >= 0, got {count!r}")
    delta = min(1.0, count * g.delta)
    if g.notion == "metric":
        diameter = None if g.diameter is None else count * g.diameter
        return Guarantee(
            notion="metric",
            epsilon=g.epsilon,
            delta=delta,
            metric=f"{g.metric}_sum",
            diameter=diameter,
            granularity=granularity,
        )
    return Guarantee(notion=g.notion, epsilon=count * g.epsilon, delta=delta, granularity=granularity)


def no_privacy(granularity: str) -> Guarantee:
    """The guarantee of a release made in the clear."""
    return Guarantee(notion="pure", epsilon=math.inf, granularity=granularity)
