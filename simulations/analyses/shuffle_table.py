"""Shuffled figures of a sentence-level run, by every bound Sanitas has: ``sanitas shuffle-table``.

For each sentence epsilon1 of a Purkayastha run (pure epsilon0 = pi epsilon1 per
report) and n reports shuffled together, one row gives the central epsilon at
``delta`` of

* one round, worst case (any two inputs): Feldman-McMillan-Talwar's numerical
  bound, the variation-ratio bound with general parameters, and with
  Purkayastha's own beta (the antipodal pair's total variation);
* one round, neighbours at distance d01: the metric form of the variation-ratio
  bound (p = e^{epsilon1 d01}, q = e^{epsilon1 pi}), d01 being the MEDIAN angle
  between two users' mechanism inputs (M1 output, unit-normalised) of the
  config's data: what a typical pair of users gets, not every pair (FMT has no
  metric form);
* ``rounds`` fresh-noise rounds composed: advanced composition of the rounds'
  figures (what runs printed before) against the PLD of the shuffled pairs
  (``fl.accounting.compose_shuffled_pld``, what runs print now).

Writes ``NAME.csv`` and ``NAME.md`` under ``--out``. Sanitas has no shuffler:
these are what-if figures, not a run's guarantee.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from fl.accounting import compose_shuffled, compose_shuffled_pld, mechanism_amplification, shuffle_bound
from fl.accounting.analysis.variation_ratio import general_ldp, metric_ldp, purkayastha
from simulations.outputs.writers import write_table

COLUMNS = (
    "config",
    "map",
    "n",
    "delta",
    "epsilon1",
    "epsilon0",
    "fmt_worst",
    "vr_worst",
    "vr_purkayastha_beta",
    "median_angle_d01",
    "vr_metric_at_d01",
    "rounds",
    "composed_advanced",
    "composed_pld",
)


def median_angle(config: str | Path, pool: int = 2000, seed: int = 0) -> tuple[float, str, int]:
    """Median angle (radians) between two distinct users' Purkayastha inputs on node 0 of a run of ``config``.

    Returns (median, a description of the map, the number of pairs).
    """
    from simulations.analyses.audit_run import mechanism_inputs, node_zero_and_map
    from simulations.runtime.api import resolve_config

    cfg = resolve_config(config, {})
    real, matrix = node_zero_and_map(cfg)
    emb = real.train_emb
    take = torch.randperm(emb.shape[0], generator=torch.Generator().manual_seed(seed))[: min(pool, emb.shape[0])]
    z = mechanism_inputs(emb[take], matrix)
    cos = (z @ z.T).clamp(-1.0, 1.0)
    iu = torch.triu_indices(z.shape[0], z.shape[0], offset=1)
    angles = torch.arccos(cos[iu[0], iu[1]])
    return float(angles.median()), f"{cfg['map-in']} M1, m' = {z.shape[1]}", int(angles.numel())


def rows_for(
    config: str, epsilons: list[float], n: int, delta: float, rounds: int, d01: float, map_name: str
) -> list[dict[str, Any]]:
    """One row per epsilon1 (see the module docstring)."""
    out = []
    for eps1 in epsilons:
        eps0 = math.pi * eps1
        fmt = shuffle_bound(eps0, n, delta, method="numerical").epsilon
        vr = mechanism_amplification(general_ldp(eps0), n, delta).epsilon_vr
        vr_mech = mechanism_amplification(purkayastha(eps1, _dim(map_name)), n, delta).epsilon_vr
        metric = mechanism_amplification(metric_ldp(eps1, d01, math.pi), n, delta).epsilon_vr
        # before: each round's (eps, delta/(2 rounds)) figure, advanced composition with slack delta/2
        per_round = mechanism_amplification(general_ldp(eps0), n, delta / (2 * rounds)).epsilon
        before, _ = compose_shuffled([per_round] * rounds, delta / (2 * rounds), delta / 2)
        after = compose_shuffled_pld([(eps0, n)] * rounds, delta)
        out.append(
            {
                "config": config,
                "map": map_name,
                "n": n,
                "delta": delta,
                "epsilon1": eps1,
                "epsilon0": round(eps0, 4),
                "fmt_worst": _r(fmt),
                "vr_worst": _r(vr),
                "vr_purkayastha_beta": _r(vr_mech),
                "median_angle_d01": round(d01, 4),
                "vr_metric_at_d01": _r(metric),
                "rounds": rounds,
                "composed_advanced": _r(before),
                "composed_pld": _r(after),
            }
        )
    return out


def _dim(map_name: str) -> int:
    return int(map_name.rsplit("=", 1)[1])


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def write(rows: list[dict[str, Any]], out: Path, name: str, command: str = "") -> tuple[Path, Path]:
    """``NAME.csv`` (every column) and ``NAME.md`` (the command, then the same table in Markdown)."""
    return write_table(rows, out, name, COLUMNS, command)
