"""Distance and inner-product errors of PrivEmb against full-dimensional noise (a re-runnable
reproduction of Feyisetan & Kasiviswanathan, TrustNLP 2021, §5.1-5.2, Figs. 1-2, with Props. 7-8).

Usage::

    sanitas privemb-errors --out docs/results/feyisetan2021-errors [--seeds 1,2,3] [--quick]

writes ``errors.csv`` (mean and sd over seeds per source, mechanism, epsilon, beta), ``errors.md``
(the tables and the paper's claims next to ours) and ``errors.png`` (error against beta, one line per
epsilon and mechanism, error bars = sd over seeds) into ``--out`` (:mod:`simulations.analyses.privemb_report`).

**The paper's experiment** (§5.1, §5.2). 100 word vectors are sampled from the vocabulary and each is
paired with each of another 100 sampled word vectors; these 100 x 100 pairs stay fixed across runs.
For every pair the paper reports ``||w_i - w_j|| - ||x_i - x_j||`` (Fig. 1; Prop. 7 bounds its
absolute value) and ``|<w_i, w_j> - <x_i, x_j>|`` (Fig. 2; Prop. 8), where x are the clean d-dim
vectors and w the released ones, at epsilon in {1, 2, 5} and beta in [0.5, 0.7] (we run 0.5..0.9).
The released PrivEmb vectors live in R^m and are compared with the clean vectors in R^d directly,
as in the paper (no map back). Embeddings: GloVe and fastText, d = 300, delta = 1e-6,
omega = sqrt(log d). Baseline M1 (Feyisetan et al. 2020): ``v = x + N``, N in R^d with density
proportional to exp(-epsilon ||z||) (no nearest-word step in these two experiments).

**Errors reported** (each a mean over the fixed pairs, then mean +- sd over seeds):

* ``dist_abs`` = mean |‖w_i − w_j‖ − ‖x_i − x_j‖|  (the paper's distance error, absolute);
* ``dist_rel`` = mean |‖w_i − w_j‖ − ‖x_i − x_j‖| / ‖x_i − x_j‖;
* ``dist_signed`` = mean (‖w_i − w_j‖ − ‖x_i − x_j‖)  (Fig. 1's difference without the absolute value);
* ``ip_abs`` = mean |⟨w_i, w_j⟩ − ⟨x_i, x_j⟩|  (the paper's inner-product error);
* ``ip_rel`` = mean |⟨w_i, w_j⟩ − ⟨x_i, x_j⟩| / (‖x_i‖ ‖x_j‖)  (Corollary 2's normalisation).

**Mechanisms** (Sanitas's classes; no sampler is re-implemented here):

* ``privemb-paper``: :class:`mechanisms.PrivEmb` with ``variant="paper"``: m from the paper's formula
  (:func:`mechanisms.privemb.paper_out_dim`, C = 1, omega = sqrt(ln d), delta = 1e-6; docs/SPEC.md §6),
  noise radius Gamma(m, (1 + beta) / epsilon): the paper's (epsilon, delta) calibration;
* ``privemb-exact``: the same m and the same public Phi, ``variant="exact"``: radius Gamma(m, L / epsilon)
  with L the realised Lipschitz constant of Phi on the input domain (pure epsilon * d_2, delta = 0; Sanitas's
  default and docs/SPEC.md §6's recommendation);
* ``full``: M1, the full-dimensional noise with the same metric notion (epsilon * d_2 in R^d, radius
  Gamma(d, 1 / epsilon)): :meth:`mechanisms.CMP.perturb` (CMP's ``x + Z`` before its nearest-word step) for
  word vectors, :class:`mechanisms.PlanarLaplace` with ``normalize_output=False`` (``x/|x| + Z``) for unit
  sentence embeddings;
* ``jl``: the noiseless projection Phi x (``PrivEmb.clean``), the pure Johnson-Lindenstrauss distortion that
  PrivEmb's error tends to as epsilon grows (reported with epsilon = inf).

**Sources** (``--sources``):

* ``glove`` (the paper's setting: word vectors, GloVe): GloVe 6B **50d** (the only GloVe Sanitas ships,
  ``mechanisms.words.load_glove``), raw vectors as in the paper, words drawn from the ``--vocab`` most frequent
  words, which are also the public domain on which PrivEmb's L is measured (PrivEmb's inputs must be points
  of it). At d = 50 the paper's formula gives m = 129, 90, 66, 50, 40 for beta = 0.5..0.9: the "reduction"
  *expands* the vectors for beta <= 0.8, a regime the paper (d = 300: m = 149..46) never ran.
* ``sentences``: the frozen default encoder's (all-MiniLM-L6-v2, d = 384) unit-norm sentence embeddings of the
  sst2 validation sentences, through Sanitas's embedding cache (``fl.encoding.encoder.embed_texts``). The
  paper says the mechanism applies to sentence embeddings too, and d = 384 puts m (151, 105, 77, 59, 46) in
  the paper's m << d regime: its dimension counterpart.
* ``synthetic``: points uniform on the unit sphere of R^``--synthetic-dim`` (for tests).

Seeds: the pairs are fixed (``--pair-seed``); a seed draws the public Phi (``projection_seed = seed``) and the
noise (a fresh generator per seed, mechanism, epsilon and beta), so the sd covers both the projection and
the noise. The paper's Props. 7 and 8 (with probability 1 - delta, all pairs within a bound) are checked
for ``privemb-paper`` at delta = 1e-6, n = the number of points.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mechanisms import CMP, PlanarLaplace, PrivEmb, check_epsilon
from mechanisms.privemb import paper_out_dim
from simulations.analyses.privemb_grid import BETAS, DELTA, EPSILONS, SOURCES  # noqa: F401 - the grid, here too

MECHANISMS: tuple[str, ...] = ("privemb-paper", "privemb-exact", "full", "jl")
PRIVEMB = ("privemb-paper", "privemb-exact")
METRICS: tuple[str, ...] = ("dist_abs", "dist_rel", "dist_signed", "ip_abs", "ip_rel")
LABELS = {
    "privemb-paper": "PrivEmb, paper scale (1+β)/ε",
    "privemb-exact": "PrivEmb, exact scale L/ε",
    "full": "full-d noise (M1)",
    "jl": "projection only (ε = ∞)",
}


# ------------------------------------------------------------------------------------------ sources
@dataclass
class Source:
    """The fixed points of one source: rows ``[:n]`` are paired with rows ``[n:]`` (n x n pairs).

    ``x`` is what every mechanism sees (float64); ``domain`` is PrivEmb's public input domain
    (``None``: the unit sphere, inputs unit-norm); ``full(epsilon, generator)`` releases ``x``
    through the full-dimensional baseline.
    """

    name: str
    description: str
    x: torch.Tensor
    n: int
    domain: torch.Tensor | None
    full: Callable[[float, torch.Generator], torch.Tensor]

    @property
    def d(self) -> int:
        return int(self.x.shape[1])


def _pick(count: int, total: int, pair_seed: int) -> np.ndarray:
    if count > total:
        raise ValueError(f"need {count} distinct points, the source has {total}")
    return np.random.default_rng(pair_seed).choice(total, size=count, replace=False)


def _unit_source(name: str, description: str, x: torch.Tensor, n: int) -> Source:
    x = x.to(torch.float64)
    x = x / x.norm(dim=1, keepdim=True)  # exactly what the sphere-domain mechanisms use

    def full(epsilon: float, generator: torch.Generator) -> torch.Tensor:
        return PlanarLaplace(epsilon, normalize_output=False).sanitize(x, generator)

    return Source(name, description, x, n, None, full)


def glove_source(n: int, vocab: int, pair_seed: int) -> Source:
    from mechanisms.words.vocab import load_glove

    space = load_glove(vocab)
    domain = space.vectors[: space.num_words].to(torch.float64)
    ids = torch.as_tensor(_pick(2 * n, space.num_words, pair_seed), dtype=torch.int64)

    def full(epsilon: float, generator: torch.Generator) -> torch.Tensor:
        return CMP(epsilon, space=space).perturb(ids, generator)  # phi(w) + Z, before the nearest-word step

    desc = (
        f"GloVe 6B 50d word vectors (raw, not normalised), {2 * n} distinct words drawn from the {space.num_words} "
        f"most frequent; PrivEmb's public domain = those {space.num_words} words"
    )
    return Source("glove", desc, domain[ids].clone(), n, domain, full)


def sentence_source(n: int, dataset: str, data_dir: str, pair_seed: int) -> Source:
    from fl import config as config_mod
    from fl.data import datasets as data
    from fl.encoding.encoder import embed_texts

    cfg = config_mod.resolve({"dataset": dataset, "data-dir": data_dir})
    ds = data.load(cfg.data, cfg.users, cfg.release.level)
    texts = sorted({str(t) for t in ds.test["text"] if str(t).strip()})
    chosen = [texts[i] for i in _pick(2 * n, len(texts), pair_seed)]
    emb = embed_texts(chosen, cfg.encoder, "cpu", progress=False)
    desc = (
        f"{cfg['encoder']} sentence embeddings (d = {emb.shape[1]}, unit norm) of {2 * n} distinct {dataset} "
        f"test sentences; PrivEmb's domain = the unit sphere"
    )
    return _unit_source("sentences", desc, torch.as_tensor(np.asarray(emb)), n)


def synthetic_source(n: int, dim: int, pair_seed: int) -> Source:
    gen = torch.Generator().manual_seed(int(pair_seed))
    x = torch.randn(2 * n, dim, generator=gen, dtype=torch.float64)
    return _unit_source("synthetic", f"{2 * n} points uniform on the unit sphere of R^{dim}", x, n)


# ------------------------------------------------------------------------------------------ errors
def pair_errors(w: torch.Tensor, x: torch.Tensor, n: int) -> dict[str, float]:
    """The paper's errors over the n x n pairs (rows ``[:n]`` against rows ``[n:]``), all at once."""
    w, x = w.to(torch.float64), x.to(torch.float64)
    exact = "donot_use_mm_for_euclid_dist"
    dist_w = torch.cdist(w[:n], w[n:], compute_mode=exact)
    dist_x = torch.cdist(x[:n], x[n:], compute_mode=exact)
    dd = dist_w - dist_x
    di = w[:n] @ w[n:].T - x[:n] @ x[n:].T
    norms = x[:n].norm(dim=1)[:, None] * x[n:].norm(dim=1)[None, :]
    return {
        "dist_abs": float(dd.abs().mean()),
        "dist_rel": float((dd.abs() / dist_x).mean()),
        "dist_signed": float(dd.mean()),
        "ip_abs": float(di.abs().mean()),
        "ip_rel": float((di.abs() / norms).mean()),
        "dist_max": float(dd.abs().max()),
        "ip_max": float(di.abs().max()),
    }


def jl_expected_rel_distortion(m: int) -> float:
    """E|‖Φv‖/‖v‖ − 1| for Φ with i.i.d. N(0, 1/m) entries and a fixed v: E|χ_m/√m − 1| (exact, by quadrature)."""
    from scipy import integrate, stats

    chi = stats.chi(m)
    root = math.sqrt(m)
    lo, hi = chi.ppf(1e-15), chi.isf(1e-15)
    value, _ = integrate.quad(lambda r: abs(r / root - 1.0) * chi.pdf(r), lo, hi, points=[root], limit=200)
    return float(value)


def jl_rel_distortion_sd(m: int) -> float:
    """sd of |χ_m/√m − 1| (one pair), for tolerances: sqrt(E(χ_m/√m − 1)² − (E|χ_m/√m − 1|)²)."""
    from scipy import special

    mean_chi = math.sqrt(2.0) * math.exp(special.gammaln((m + 1) / 2) - special.gammaln(m / 2))
    second = 2.0 - 2.0 * mean_chi / math.sqrt(m)  # E(χ/√m − 1)² = 1 − 2 E χ/√m + 1
    return math.sqrt(max(second - jl_expected_rel_distortion(m) ** 2, 0.0))


def noise_predictions(m: int, scale: float) -> dict[str, float]:
    """The errors when the noise dominates (x negligible): E‖κ_i − κ_j‖ ≈ scale·√(2m(m+1)) and
    E|⟨κ_i, κ_j⟩| ≈ E‖κ‖² E|cos| = scale²·m(m+1)·√(2/(πm)), κ of radius Gamma(m, scale)."""
    return {
        "dist_noise_pred": scale * math.sqrt(2.0 * m * (m + 1)),
        "ip_noise_pred": scale**2 * m * (m + 1) * math.sqrt(2.0 / (math.pi * m)),
    }


def prop7_bound(beta: float, tau: float, m: int, n_points: int, epsilon: float, delta: float = DELTA) -> float:
    """Prop. 7: |‖w_i − w_j‖ − ‖x_i − x_j‖| <= 2 beta tau + 4 m ln(2 n m / delta) / epsilon (prob. >= 1 - delta)."""
    return 2 * beta * tau + 4 * m * math.log(2 * n_points * m / delta) / epsilon


def prop8_bound(beta: float, tau: float, m: int, n_points: int, epsilon: float, delta: float = DELTA) -> float:
    """Prop. 8: |⟨w_i, w_j⟩ − ⟨x_i, x_j⟩| <= beta tau^2 + 8 tau m l / epsilon + (2 m l)^2 / epsilon^2,
    l = ln(2 n m / delta) (prob. >= 1 - delta)."""
    log = math.log(2 * n_points * m / delta)
    return beta * tau**2 + 8 * tau * m * log / epsilon + (2 * m * log) ** 2 / epsilon**2


# ------------------------------------------------------------------------------------------ running
def _generator(*key: int) -> torch.Generator:
    """An independent, reproducible noise stream per (seed, mechanism, epsilon, beta) cell."""
    state = np.random.SeedSequence([int(k) for k in key]).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


def _at_epsilon(base: PrivEmb, epsilon: float) -> PrivEmb:
    """``base`` re-targeted to ``epsilon``: a shallow copy sharing Phi, its measured L and the domain.

    Only ``epsilon`` differs between the instances of one (variant, beta, seed); the O(N^2) search for L
    on a finite domain runs in the constructor, once per Phi instead of once per epsilon. The copy's noise
    scale is checked against the formula of its variant.
    """
    mech = copy.copy(base)
    mech.epsilon = check_epsilon(epsilon)
    want = (1.0 + mech.beta) / epsilon if mech.variant == "paper" else mech.lipschitz / epsilon
    if not math.isclose(mech.noise_scale, want, rel_tol=1e-12):
        raise RuntimeError(f"PrivEmb noise scale {mech.noise_scale} is not {want}: re-check _at_epsilon")
    return mech


def run_source(
    src: Source, epsilons: Sequence[float], betas: Sequence[float], seeds: Sequence[int], log: Callable[[str], None]
) -> list[dict[str, Any]]:
    """Per-seed rows: one per (mechanism, epsilon, beta, seed); ``full`` has beta = NaN, ``jl`` epsilon = inf."""
    rows: list[dict[str, Any]] = []
    d, n_points = src.d, src.x.shape[0]
    tau = float(src.x.norm(dim=1).max())
    src_key = SOURCES.index(src.name)

    def add(mech: str, eps: float, beta: float, seed: int, m: int, scale: float, lip: float, w: torch.Tensor) -> None:
        errs = pair_errors(w, src.x, src.n)
        row = {"mechanism": mech, "epsilon": eps, "beta": beta, "seed": seed, "m": m, "noise_scale": scale}
        row |= {"lipschitz": lip, "tau": tau, **errs, **noise_predictions(m, scale)}
        # The metric epsilon the release attains for this Phi (PrivEmb.guarantee's formula, without its
        # O(N^2) diameter): the paper scale (1 + beta)/epsilon covers only Lipschitz constants <= 1 + beta.
        row["epsilon_attained"] = eps * max(1.0, lip / (1.0 + beta)) if mech == "privemb-paper" else eps
        if mech == "privemb-paper":
            row["prop7_bound"] = prop7_bound(beta, tau, m, n_points, eps)
            row["prop8_bound"] = prop8_bound(beta, tau, m, n_points, eps)
        rows.append(row)

    for seed in seeds:
        for ei, eps in enumerate(epsilons):
            w = src.full(eps, _generator(seed, src_key, 0, ei, 0))
            add("full", eps, math.nan, seed, d, 1.0 / eps, 1.0, w)
        for bi, beta in enumerate(betas):
            t0 = time.perf_counter()
            m = paper_out_dim(d, beta, DELTA)
            common = {"beta": beta, "delta": DELTA, "projection_seed": seed, "input_dim": d, "domain": src.domain}
            bases = {
                "privemb-paper": PrivEmb(epsilons[0], variant="paper", **common),
                "privemb-exact": PrivEmb(epsilons[0], out_dim=m, variant="exact", **common),
            }
            for base in bases.values():
                assert base.phi.shape == (m, d)
            paper = bases["privemb-paper"]
            add("jl", math.inf, beta, seed, m, 0.0, paper.lipschitz, paper.clean(src.x))
            for mi, (mech, base) in enumerate(bases.items(), start=1):
                for ei, eps in enumerate(epsilons):
                    priv = _at_epsilon(base, eps)
                    w = priv.sanitize(src.x, _generator(seed, src_key, mi, ei, bi + 1))
                    add(mech, eps, beta, seed, m, priv.noise_scale, priv.lipschitz, w)
            log(
                f"  {src.name} seed {seed} beta {beta:g}: m = {m}, L = {paper.lipschitz:.3f} "
                f"({time.perf_counter() - t0:.1f} s)"
            )
    for row in rows:
        row |= {"source": src.name, "d": d, "n_pairs": src.n * src.n}
    return rows


def aggregate(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and sd (over seeds) per (source, mechanism, epsilon, beta)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        beta_key = None if math.isnan(r["beta"]) else r["beta"]  # NaN (the full-d rows) never equals itself
        groups.setdefault((r["source"], r["mechanism"], r["epsilon"], beta_key), []).append(r)
    out = []
    for (source, mech, eps, _), rs in groups.items():
        beta = rs[0]["beta"]
        agg: dict[str, Any] = {"source": source, "d": rs[0]["d"], "n_pairs": rs[0]["n_pairs"], "mechanism": mech}
        agg |= {"epsilon": eps, "beta": beta, "m": rs[0]["m"], "seeds": len(rs)}
        for key in ("noise_scale", "lipschitz", "epsilon_attained", "dist_noise_pred", "ip_noise_pred"):
            agg[f"{key}_mean"] = statistics.fmean(r[key] for r in rs)
        agg["noise_norm_mean"] = agg["m"] * agg["noise_scale_mean"]  # E||kappa|| = m * scale
        for metric in METRICS:
            vals = [r[metric] for r in rs]
            agg[f"{metric}_mean"] = statistics.fmean(vals)
            agg[f"{metric}_sd"] = statistics.stdev(vals) if len(vals) > 1 else math.nan
        agg["jl_theory_rel"] = jl_expected_rel_distortion(agg["m"]) if mech != "full" else math.nan
        agg["dist_max"] = max(r["dist_max"] for r in rs)
        agg["ip_max"] = max(r["ip_max"] for r in rs)
        agg["prop7_bound"] = rs[0].get("prop7_bound", math.nan)
        agg["prop8_bound"] = rs[0].get("prop8_bound", math.nan)
        out.append(agg)
    order = {m: i for i, m in enumerate(MECHANISMS)}
    out.sort(key=lambda a: (SOURCES.index(a["source"]), order[a["mechanism"]], a["epsilon"], _nan_last(a["beta"])))
    return out


def _nan_last(v: float) -> float:
    return math.inf if math.isnan(v) else v


# ------------------------------------------------------------------------------------------ claims
def cell_of(aggs: Sequence[dict[str, Any]], source: str, mech: str, eps: float, beta: float | None) -> dict[str, Any]:
    for a in aggs:
        if a["source"] == source and a["mechanism"] == mech and a["epsilon"] == eps:
            if mech == "full" or a["beta"] == beta:
                return a
    raise KeyError((source, mech, eps, beta))


def _verdict(ok: int, total: int) -> str:
    return "holds" if ok == total else "does not hold"


def evaluate_claims(
    aggs: Sequence[dict[str, Any]], sources: Sequence[str], epsilons: Sequence[float], betas: Sequence[float]
) -> list[dict[str, str]]:
    """The paper's qualitative claims (§5.1, §5.2; Props. 7, 8), tested cell by cell on the means."""
    claims = []
    eps_sorted = sorted(epsilons)

    def mean(src: str, mech: str, eps: float, beta: float | None, metric: str) -> float:
        return cell_of(aggs, src, mech, eps, beta)[f"{metric}_mean"]

    for src in sources:
        for mech in PRIVEMB:
            for metric, sec, what in (("dist_abs", "§5.1", "distance"), ("ip_abs", "§5.2", "inner-product")):
                cells = [(e, b) for e in epsilons for b in betas]
                better = [
                    (e, b) for e, b in cells if mean(src, mech, e, b, metric) < mean(src, "full", e, None, metric)
                ]
                worse = [f"ε={e:g}/β={b:g}" for e, b in cells if (e, b) not in better]
                claims.append(
                    {
                        "claim": f"{sec}: PrivEmb's {what} error is below M1's in every condition",
                        "source": src,
                        "mechanism": mech,
                        "test": f"mean {metric}: PrivEmb < full-d in {len(better)}/{len(cells)} (ε, β) cells",
                        "detail": ""
                        if not worse
                        else "fails at " + ", ".join(worse[:8]) + (" ..." if len(worse) > 8 else ""),
                        "verdict": _verdict(len(better), len(cells)),
                    }
                )
            for metric, sec in (("dist_abs", "§5.1"), ("ip_abs", "§5.2")):
                mono = 0
                for e in epsilons:
                    vals = [mean(src, mech, e, b, metric) for b in sorted(betas)]
                    mono += all(a > b for a, b in zip(vals, vals[1:], strict=False))
                claims.append(
                    {
                        "claim": f"{sec}: for a given ε, PrivEmb's error decreases as β increases",
                        "source": src,
                        "mechanism": mech,
                        "test": f"mean {metric} strictly decreasing over β = "
                        f"{', '.join(f'{b:g}' for b in sorted(betas))} at {mono}/{len(epsilons)} ε",
                        "detail": "",
                        "verdict": _verdict(mono, len(epsilons)),
                    }
                )
            gap_ok = 0
            for e in epsilons:
                gaps = [mean(src, "full", e, None, "ip_abs") - mean(src, mech, e, b, "ip_abs") for b in sorted(betas)]
                gap_ok += all(a < b for a, b in zip(gaps, gaps[1:], strict=False))
            claims.append(
                {
                    "claim": "§5.2: the inner-product gap M1 − PrivEmb grows with β",
                    "source": src,
                    "mechanism": mech,
                    "test": f"ip_abs(full) − ip_abs(PrivEmb) strictly increasing in β at {gap_ok}/{len(epsilons)} ε",
                    "detail": "",
                    "verdict": _verdict(gap_ok, len(epsilons)),
                }
            )
        for mech in ("full", *PRIVEMB):
            ok, total = 0, 0
            for metric in ("dist_abs", "ip_abs"):
                for b in [None] if mech == "full" else sorted(betas):
                    vals = [mean(src, mech, e, b, metric) for e in eps_sorted]
                    ok += all(a > c for a, c in zip(vals, vals[1:], strict=False))
                    total += 1
            claims.append(
                {
                    "claim": "§5.1/§5.2: for both mechanisms the errors decrease as ε increases",
                    "source": src,
                    "mechanism": mech,
                    "test": f"dist_abs and ip_abs strictly decreasing in ε in {ok}/{total} series",
                    "detail": "",
                    "verdict": _verdict(ok, total),
                }
            )
        for metric, bound, prop in (("dist_max", "prop7_bound", "Prop. 7"), ("ip_max", "prop8_bound", "Prop. 8")):
            cells = [cell_of(aggs, src, "privemb-paper", e, b) for e in epsilons for b in betas]
            ok = sum(c[metric] <= c[bound] for c in cells)
            tightest = max(c[metric] / c[bound] for c in cells)
            claims.append(
                {
                    "claim": f"{prop}: every pair's error is within the bound (prob. ≥ 1 − δ, δ = 1e-6)",
                    "source": src,
                    "mechanism": "privemb-paper",
                    "test": f"max over pairs and seeds ≤ bound in {ok}/{len(cells)} cells",
                    "detail": f"largest max/bound = {tightest:.3g} (the bound is loose)",
                    "verdict": _verdict(ok, len(cells)),
                }
            )
    return claims


def parse_floats(text: str) -> list[float]:
    return [float(t) for t in text.split(",") if t.strip()]
