"""Composed per-user figures before/after mechanism-specific events: ``sanitas composition-table``.

Each row is one user's releases as a run's ledger records them (a Charge
per release, its guarantee carrying its mechanism's accounting kind), composed by ``fl.accounting.compose``
twice: with the generic (epsilon, delta) dominating pair of every release
("before": what the ledger did when charges carried no mechanism) and with the
mechanism's own dp-accounting event (``Charge.event``: ``LaplaceDpEvent``,
``GaussianDpEvent``, ``RandomizedResponseDpEvent``; "after"). Both are stated
at the same delta. Writes ``composition.csv`` and ``composition.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fl.accounting.analysis.composition import compose
from fl.accounting.charges import Charge
from mechanisms.guarantee import Guarantee
from simulations.outputs.writers import write_table

TARGET_DELTA = 1e-6


def _rr(epsilon: float, labels: int) -> Guarantee:
    return Guarantee("pure", epsilon, granularity="label", accounting="randomized_response", buckets=labels)


#: (row, per-release guarantee with its mechanism's accounting kind, releases)
ROWS: tuple[tuple[str, Guarantee, int], ...] = (
    (
        "word_laplace eps 1 per word, a 20-word document",
        Guarantee("pure", 1.0, granularity="word", accounting="laplace"),
        20,
    ),
    (
        "word_gaussian (1, 1e-5) per word, a 20-word document",
        Guarantee("approx", 1.0, delta=1e-5, granularity="word", accounting="gaussian"),
        20,
    ),
    ("gaussian (1, 1e-5) sentence release, 3 fresh rounds", Guarantee("approx", 1.0, 1e-5, accounting="gaussian"), 3),
    ("laplace eps 1 sentence release, 10 fresh rounds", Guarantee("pure", 1.0, accounting="laplace"), 10),
    ("rr eps 1 on 2 labels, 10 fresh rounds", _rr(1.0, 2), 10),
    ("rr eps 1 on 4 labels, 10 fresh rounds", _rr(1.0, 4), 10),
    ("rr eps 2 on 20 labels, 3 fresh rounds", _rr(2.0, 20), 3),
)
COLUMNS = (
    "row",
    "releases",
    "epsilon_basic",
    "delta",
    "before_epsilon",
    "before_accountant",
    "after_epsilon",
    "after_accountant",
)


def rows() -> list[dict[str, Any]]:
    out = []
    for name, guarantee, count in ROWS:
        charge = Charge(guarantee)
        eps, delta = guarantee.epsilon, guarantee.delta
        generic = compose([(eps, delta, count)], TARGET_DELTA)
        specific = compose([(eps, delta, count, charge.event)], TARGET_DELTA, delta_approx=generic.delta_approx)
        out.append(
            {
                "row": name,
                "releases": count,
                "epsilon_basic": round(generic.epsilon_basic, 6),
                "delta": generic.delta_approx,
                "before_epsilon": round(float(generic.epsilon_best_approx), 4),
                "before_accountant": generic.accountant,
                "after_epsilon": round(float(specific.epsilon_best_approx), 4),
                "after_accountant": specific.accountant,
            }
        )
    return out


def write(table: list[dict[str, Any]], out: Path, command: str) -> tuple[Path, Path]:
    return write_table(table, out, "composition", COLUMNS, command)
