"""simulations.analyses.privemb_errors: the --quick run on a tiny synthetic input, checked against theory.

The checks would fail on a wrong implementation:

* at huge epsilon PrivEmb's relative distance error is the pure Johnson-Lindenstrauss distortion of a
  Gaussian Phi with variance 1/m, E|chi_m / sqrt(m) - 1| (catches Phi with std 1/m, the TrLap bug, or a
  Phi of the wrong shape), and the full-dimensional baseline's error vanishes;
* with the noise turned far up the distance error is the noise's, E||kappa_i - kappa_j||, whose value an
  independent numpy Monte Carlo gives for radius Gamma(m, scale): (1+beta)/epsilon (paper), L/epsilon (exact),
  1/epsilon with m = d (full); catches a wrong radius law, scale or dimension;
* every error grows as epsilon falls.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulations import cli
from simulations.analyses import privemb_errors as pe
from simulations.analyses import privemb_report as pr

DIM, N_SIDE, SEEDS = 128, 30, (1, 2, 3)
EPS_HUGE, EPS_TINY = 1e8, 1e-3


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], object]:
    out = tmp_path_factory.mktemp("privemb_errors")
    argv = ["--out", str(out), "--quick", "--sources", "synthetic", "--synthetic-dim", str(DIM)]
    argv += ["--epsilons", f"{EPS_TINY:g},1,{EPS_HUGE:g}", "--betas", "0.5,0.9", "--n-side", str(N_SIDE)]
    argv += ["--seeds", ",".join(map(str, SEEDS))]
    assert cli.main(["privemb-errors", *argv]) == 0
    return pr.read_csv(out / "errors.csv"), out


def _row(rows: list[dict], mech: str, eps: float, beta: float | None = None) -> dict:
    hits = [
        r
        for r in rows
        if r["mechanism"] == mech and r["epsilon"] == eps and (beta is None or math.isclose(r["beta"], beta))
    ]
    assert len(hits) == 1, (mech, eps, beta, hits)
    return hits[0]


def test_outputs_written(quick_run: tuple[list[dict], object]) -> None:
    rows, out = quick_run
    assert (out / "errors.png").stat().st_size > 10_000
    text = (out / "errors.md").read_text(encoding="utf-8")
    assert "| ε | β | m |" in text and ("**holds**" in text or "**does not hold**" in text)
    assert {r["mechanism"] for r in rows} == set(pe.MECHANISMS)
    assert all(r["seeds"] == len(SEEDS) and r["n_pairs"] == N_SIDE**2 for r in rows)


@pytest.mark.parametrize("beta", [0.5, 0.9])
@pytest.mark.parametrize("mech", ["privemb-paper", "privemb-exact", "jl"])
def test_huge_epsilon_is_pure_jl_distortion(quick_run: tuple[list[dict], object], mech: str, beta: float) -> None:
    rows, _ = quick_run
    eps = math.inf if mech == "jl" else EPS_HUGE
    row = _row(rows, mech, eps, beta)
    m = int(row["m"])
    assert m == pe.paper_out_dim(DIM, beta, pe.DELTA)
    want = pe.jl_expected_rel_distortion(m)
    # The pairs share points, so count ~N_SIDE independent directions per seed (conservative), 4 sd.
    tol = 4 * pe.jl_rel_distortion_sd(m) / math.sqrt(len(SEEDS) * N_SIDE)
    assert abs(row["dist_rel_mean"] - want) < tol, (row["dist_rel_mean"], want, tol)
    assert tol < 0.5 * want  # the check is sharp: a Phi with variance 1/m^2 gives ~0.9, 1/d gives ~0.4


def test_huge_epsilon_full_dimensional_error_vanishes(quick_run: tuple[list[dict], object]) -> None:
    rows, _ = quick_run
    row = _row(rows, "full", EPS_HUGE)
    assert row["dist_abs_mean"] < 1e-5 and row["ip_abs_mean"] < 1e-5


def _noise_distance(m: int, scale: float, draws: int = 20_000) -> float:
    """E||kappa_1 - kappa_2|| for independent kappa = Gamma(m, scale) radius x uniform direction (numpy MC)."""
    rng = np.random.default_rng(12345)
    k = []
    for _ in range(2):
        u = rng.standard_normal((draws, m))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        k.append(u * rng.gamma(m, scale, size=(draws, 1)))
    return float(np.linalg.norm(k[0] - k[1], axis=1).mean())


@pytest.mark.parametrize(("mech", "beta"), [("full", None), ("privemb-paper", 0.5), ("privemb-exact", 0.9)])
def test_noise_dominated_error_matches_noise_law(
    quick_run: tuple[list[dict], object], mech: str, beta: float | None
) -> None:
    rows, _ = quick_run
    row = _row(rows, mech, EPS_TINY, beta)
    m = int(row["m"])
    if mech == "full":
        scale = 1 / EPS_TINY
        assert m == DIM
    elif mech == "privemb-paper":
        scale = (1 + beta) / EPS_TINY
    else:
        scale = row["lipschitz_mean"] / EPS_TINY
        assert row["lipschitz_mean"] > 1 + beta  # on the sphere L is Phi's spectral norm, ~1 + sqrt(d/m)
    assert math.isclose(row["noise_scale_mean"], scale, rel_tol=1e-9)
    want = _noise_distance(m, scale)
    # sd of one pair's noise distance ~ want * sqrt(3/(4m)) / ... ; 3 seeds x ~N_SIDE effective pairs, plus MC
    assert abs(row["dist_abs_mean"] / want - 1) < 0.03, (row["dist_abs_mean"], want)


@pytest.mark.parametrize("mech", ["full", "privemb-paper", "privemb-exact"])
def test_errors_grow_as_noise_grows(quick_run: tuple[list[dict], object], mech: str) -> None:
    rows, _ = quick_run
    for beta in [None] if mech == "full" else [0.5, 0.9]:
        for metric in ("dist_abs_mean", "ip_abs_mean"):
            vals = [_row(rows, mech, eps, beta)[metric] for eps in (EPS_HUGE, 1.0, EPS_TINY)]
            assert vals[0] < vals[1] < vals[2], (mech, beta, metric, vals)
            assert vals[2] > 100 * vals[1]  # epsilon / 1000: noise norm x 1000


def test_jl_expectation_matches_simulation() -> None:
    rng = np.random.default_rng(0)
    m = 43
    r = np.sqrt(rng.chisquare(m, size=200_000) / m)
    assert abs(np.abs(r - 1).mean() - pe.jl_expected_rel_distortion(m)) < 1e-3
    assert abs(np.abs(r - 1).std() - pe.jl_rel_distortion_sd(m)) < 1e-3
