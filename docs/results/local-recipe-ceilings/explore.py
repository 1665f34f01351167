"""Which local-DP recipe is held back by its noise and which by its recipe: each candidate's noise-free ceiling
beside its accuracy at a whole-record pure epsilon, on the run's own data, paired per seed.

    SANITAS_DATA_DIR=../shared/data python docs/results/local-recipe-ceilings/explore.py [CONFIG] [--seeds 1,2,3,4,5]
        [--out docs/results/local-recipe-ceilings/sst2-public200]

For one config (default simulations/experiments/sst2_public.toml: SST-2, 200 public texts, phrase users) and each
seed, on the seed's own draw (its public split, private users and test users, embedded through the run's cache),
every figure is an accuracy on the clean test inputs (on-device inference):

* ``public LR``: the public logistic regression (fl.maps.public_model), the line the gains are taken over;
  ``public class-means m'``: the class-means server model fitted on the public documents alone in the public
  projection of dimension m' (fl.maps.class_means.fit with no releases); the strongest of these is the line;
* ``class-means m'``: the shipped recipe (fl.maps.class_means.fit: PrivUnit (unbiased) of n(M1 x), the label by
  K-ary randomized response, debiased class means combined with the public ones, the linear discriminant under
  the public Ledoit-Wolf covariance) at the budget split of the configs (sentence 0.65 of the whole record),
  with its noise-free ceiling (the same fit on clean rows and true labels) and its oracle ceiling (the same
  means under the private users' own within-class covariance: not private, what the covariance costs);
* ``class-means m', covariance from the releases``: the within-class covariance debiased from the releases'
  second moments (E[z z^T | u] = a u u^T + b I, PrivUnit.second_moment_law) and shrunk toward the public one by
  its known noise (fl.maps.class_means.release_covariance) instead of the public one;
* ``LDP-SGD m'``: one pass of local-DP gradient descent over disjoint cohorts (each user in one cohort, releasing
  once, at the whole-record epsilon: the softmax gradient of its clean row and true label at the model the
  server shipped, norm <= 1, released as PrivUnit of +-g/|g| with P(+) = (1 + |g|) / 2, unbiased for g), from the
  public logistic regression in the projection, each step preconditioned by the public Hessian (Ledoit-Wolf);
  with its noise-free ceiling (the same steps on exact gradients);
* ``two cohorts m' -> mB``: an interactive protocol over two disjoint halves of the users, each releasing once
  at the whole-record epsilon (the same split as class-means): the first half releases in the public projection
  of dimension m' and the server fits the class-means model on those releases; the second half releases in a
  projection of dimension mB built from that fit (its discriminant direction in the encoder's space, the public
  logistic regression's direction, the top principal directions of the public embeddings), and the server fits
  class means there with the within-class covariance debiased from the second half's releases (a dimension
  small enough for the debiasing to be accurate); with its noise-free ceiling (clean rows, true labels, the
  private within-class covariance of the second half);
* ``private LR``: the logistic regression on every private user's clean embedding and true label (no noise, no
  projection): what the private data holds.

No privacy is spent by this script (a measurement of recipes, not a private run) and nothing is chosen on the
test users: every row of every grid is printed. Writes ``rows.csv`` (one row per seed and recipe) and
``table.md`` (mean +- sd over seeds, the gain over the strongest public-only model paired per seed, and a
one-sided paired t-test of that gain).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from fl import config as config_mod
from fl.data import datasets as data
from fl.encoding.encoder import embed_texts
from fl.maps import class_means as cm
from fl.maps.public_model import fit_public_model, projection_map
from mechanisms.privunit import PrivUnit
from simulations.runtime.overrides import load_with_overrides

EPSILONS = (3.14, 6.28, 12.6)
SENTENCE_SHARE = 4.082 / 6.28  # the configs' split of the whole record (label: the rest)
DIMS = (16, 32, 64, 128)
SGD_DIMS = (32, 64)
SGD_COHORTS = (4, 8)
SGD_RATE = 1.0
TWO_STAGE = ((64, 8), (64, 16), (16, 16), (32, 32))  # (m' of the first cohort, mB of the second)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _privunit(rows: np.ndarray, eps: float, gen: torch.Generator) -> np.ndarray:
    mech = PrivUnit(eps, input_dim=rows.shape[1], unbiased=True)
    return mech.sanitize(torch.as_tensor(rows, dtype=torch.float64), generator=gen).numpy()


def _rr(y: np.ndarray, eps: float, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """K-ary randomized response of labels ``y`` and its transition matrix R[j, l] = P(l | j)."""
    keep = math.exp(eps) / (math.exp(eps) + k - 1)
    other = (y + rng.integers(1, k, size=len(y))) % k
    transition = np.full((k, k), (1 - keep) / (k - 1))
    np.fill_diagonal(transition, keep)
    return np.where(rng.random(len(y)) < keep, y, other), transition


def _accuracy(w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    return float(((x @ w.T + b).argmax(axis=1) == y).mean())


def _with_covariance(stats_: cm.PublicStatistics, covariance: np.ndarray) -> cm.PublicStatistics:
    return cm.PublicStatistics(stats_.means, stats_.mean_variance, covariance, stats_.priors)


def _within(u: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    centred = u - np.stack([u[y == j].mean(axis=0) for j in range(k)])[y]
    return centred.T @ centred / len(u)


def _softmax(t: np.ndarray) -> np.ndarray:
    t = t - t.max(axis=1, keepdims=True)
    e = np.exp(t)
    return e / e.sum(axis=1, keepdims=True)


def _features(u: np.ndarray) -> np.ndarray:
    return np.hstack([u, np.ones((len(u), 1))]) / math.sqrt(2.0)  # norm 1: the bias as a coordinate


def _ldp_gradients(g: np.ndarray, eps: float, gen: torch.Generator, rng: np.random.Generator) -> np.ndarray:
    """Unbiased eps-LDP releases of rows ``g`` (norm <= 1): PrivUnit of s g/|g|, s = +1 with probability
    (1 + |g|) / 2, else -1 (E = |g| g/|g| / m * m = g); a zero row releases PrivUnit of a uniform direction."""
    r = np.linalg.norm(g, axis=1, keepdims=True)
    direction = rng.standard_normal(g.shape)
    direction = np.where(r > 1e-12, g / np.maximum(r, 1e-12), _unit(direction))
    sign = np.where(rng.random(len(g)) < (1 + np.minimum(r[:, 0], 1.0)) / 2, 1.0, -1.0)
    return _privunit(direction * sign[:, None], eps, gen)


def _ldp_sgd(
    f: np.ndarray,
    y: np.ndarray,
    start: np.ndarray,
    hessian: np.ndarray,
    cohorts: int,
    eps: float | None,
    gen: torch.Generator,
    rng: np.random.Generator,
) -> np.ndarray:
    """One pass over ``cohorts`` disjoint cohorts: W <- W - rate mean(release of g) H^-1, g the softmax gradient
    (softmax(W f) - e_y) f^T of the free rows 1..K-1 (row 0 stays 0: the softmax ignores a common shift), scaled
    to norm <= 1 (by 1 for two classes, sqrt(2) for more) and scaled back after averaging."""
    k = start.shape[0]
    scale = 1.0 if k == 2 else math.sqrt(2.0)
    w = start - start[:1]
    order = rng.permutation(len(y))
    inverse = np.linalg.inv(hessian)
    for idx in np.array_split(order, cohorts):
        fi = f[idx]
        residual = _softmax(fi @ w.T)
        residual[np.arange(len(idx)), y[idx]] -= 1.0
        g = (residual[:, 1:, None] * fi[:, None, :]).reshape(len(idx), -1) / scale
        mean = (g if eps is None else _ldp_gradients(g, eps, gen, rng)).mean(axis=0) * scale
        w[1:] -= SGD_RATE * mean.reshape(k - 1, -1) @ inverse
    return w


def _two_cohorts(
    xq: np.ndarray,
    yq: np.ndarray,
    xp: np.ndarray,
    yp: np.ndarray,
    public: object,
    dims: tuple[int, int],
    eps: float | None,
    gen: torch.Generator,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The two-cohort protocol (module docstring): returns the second projection M_B [d + 1, mB] and the fitted
    model W [K, mB], b [K] on n(x M_B); ``eps`` None: no noise (clean rows, true labels)."""
    k = int(yq.max()) + 1
    first, second = np.array_split(rng.permutation(len(yq)), 2)

    def project(x: np.ndarray, matrix: np.ndarray) -> np.ndarray:
        return _unit(x @ matrix[:-1] + matrix[-1])

    def released(u: np.ndarray, y: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        if eps is None:
            return u, y, np.eye(k), 1.0
        sentence = SENTENCE_SHARE * eps
        labels, transition = _rr(y, eps - sentence, k, rng)
        second_moment = 1.0 / PrivUnit(sentence, input_dim=dim, unbiased=True).m ** 2
        return _privunit(u, sentence, gen), labels, transition, second_moment

    m_a, m_b = dims
    matrix_a = projection_map(xp, public, m_a).numpy()  # type: ignore[arg-type]
    fit_a = cm.fit(
        *released(project(xq[first], matrix_a), yq[first], m_a), cm.public_statistics(project(xp, matrix_a), yp, k)
    )
    directions = matrix_a[:-1] @ (fit_a.weight[1:] - fit_a.weight[:1]).T  # the first fit's discriminant, in x-space
    logit = public.weight[:, 1:] - public.weight[:, :1]  # type: ignore[attr-defined]
    centre = xp.mean(axis=0)
    _, _, vt = np.linalg.svd(xp - centre, full_matrices=False)
    basis, _ = np.linalg.qr(np.column_stack([directions, logit, vt.T])[:, :m_b])
    matrix_b = np.vstack([basis, -(centre @ basis)[None, :]])
    ub = project(xq[second], matrix_b)
    z, labels, transition, second_moment = released(ub, yq[second], m_b)
    pub_b = cm.public_statistics(project(xp, matrix_b), yp, k)
    if eps is None:
        final = cm.fit(z, labels, transition, second_moment, _with_covariance(pub_b, _within(ub, yq[second], k)))
    else:
        law = PrivUnit(SENTENCE_SHARE * eps, input_dim=m_b, unbiased=True).second_moment_law(m_b)
        final = cm.fit(z, labels, transition, second_moment, pub_b, covariance_law=law)
    return matrix_b, final.weight, final.bias


def _one_seed(config: str, seed: int) -> list[dict[str, object]]:
    from sklearn.covariance import ledoit_wolf
    from sklearn.linear_model import LogisticRegression

    cfg = config_mod.resolve({**load_with_overrides(config, []), "seed": seed})
    ds = data.load(cfg.data, cfg.users, cfg.release.level)
    assert isinstance(ds, data.TextDataset) and ds.public is not None
    k = ds.num_classes

    def embed(texts: list[str]) -> np.ndarray:
        return _unit(np.asarray(embed_texts(texts, cfg.encoder, "cpu", progress=False), dtype=np.float64))

    xp, xq, xt = embed(ds.public["text"][:]), embed(ds.train["text"][:]), embed(ds.test["text"][:])
    yp, yq, yt = (np.asarray(s["label"][:], dtype=np.int64) for s in (ds.public, ds.train, ds.test))
    rows: list[dict[str, object]] = []

    def add(recipe: str, dim: int | None, eps: float | None, accuracy: float) -> None:
        rows.append({"seed": seed, "recipe": recipe, "map_dim": dim, "epsilon": eps, "accuracy": accuracy})

    public = fit_public_model(xp, yp, k)
    add("public LR", None, None, float((public.predict(xt) == yt).mean()))
    private = LogisticRegression(C=10.0, max_iter=3000).fit(xq, yq)
    add("private LR (no noise)", None, None, float((private.predict(xt) == yt).mean()))
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    for dim in DIMS:
        matrix = projection_map(xp, public, dim).numpy()

        def project(x: np.ndarray, matrix: np.ndarray = matrix) -> np.ndarray:
            return _unit(x @ matrix[:-1] + matrix[-1])

        up, uq, ut = project(xp), project(xq), project(xt)
        pub = cm.public_statistics(up, yp, k)
        empty = cm.fit(np.zeros((0, dim)), np.zeros(0, np.int64), np.eye(k), 1.0, pub)
        add("public class-means", dim, None, _accuracy(empty.weight, empty.bias, ut, yt))
        clean = cm.fit(uq, yq, np.eye(k), 1.0, pub)
        add("class-means, no noise", dim, None, _accuracy(clean.weight, clean.bias, ut, yt))
        oracle = cm.fit(uq, yq, np.eye(k), 1.0, _with_covariance(pub, _within(uq, yq, k)))
        add(
            "class-means, no noise, private covariance (oracle)",
            dim,
            None,
            _accuracy(oracle.weight, oracle.bias, ut, yt),
        )
        for eps in EPSILONS:
            sentence = SENTENCE_SHARE * eps
            z = _privunit(uq, sentence, gen)
            released, transition = _rr(yq, eps - sentence, k, rng)
            second = 1.0 / PrivUnit(sentence, input_dim=dim, unbiased=True).m ** 2
            fitted = cm.fit(z, released, transition, second, pub)
            add("class-means", dim, eps, _accuracy(fitted.weight, fitted.bias, ut, yt))
            law = PrivUnit(sentence, input_dim=dim, unbiased=True).second_moment_law(dim)
            refit = cm.fit(z, released, transition, second, pub, covariance_law=law)
            add("class-means, covariance from the releases", dim, eps, _accuracy(refit.weight, refit.bias, ut, yt))
        if dim in SGD_DIMS:
            fp, fq, ft = _features(up), _features(uq), _features(ut)
            lr = LogisticRegression(C=public.l2, fit_intercept=False, max_iter=5000).fit(fp, yp)
            start = np.vstack([np.zeros_like(lr.coef_[0]), lr.coef_[0]]) if k == 2 else lr.coef_
            hessian = 0.25 * (ledoit_wolf(fp)[0] + np.outer(fp.mean(axis=0), fp.mean(axis=0))) + 1e-3 * np.eye(dim + 1)
            for cohorts in SGD_COHORTS:
                w = _ldp_sgd(fq, yq, start, hessian, cohorts, None, gen, rng)
                add(f"LDP-SGD {cohorts} cohorts, no noise", dim, None, _accuracy(w, np.zeros(k), ft, yt))
                for eps in EPSILONS:
                    w = _ldp_sgd(fq, yq, start, hessian, cohorts, eps, gen, rng)
                    add(f"LDP-SGD {cohorts} cohorts", dim, eps, _accuracy(w, np.zeros(k), ft, yt))
    for dims in TWO_STAGE:
        name = f"two cohorts {dims[0]} -> {dims[1]}"
        for eps in (None, *EPSILONS):
            matrix, weight, bias = _two_cohorts(xq, yq, xp, yp, public, dims, eps, gen, rng)
            ut = _unit(xt @ matrix[:-1] + matrix[-1])
            add(name if eps is not None else f"{name}, no noise", dims[1], eps, _accuracy(weight, bias, ut, yt))
    print(f"seed {seed}: {len(rows)} rows", file=sys.stderr, flush=True)
    return rows


def _table(rows: list[dict[str, object]], seeds: list[int]) -> str:
    by_seed: dict[int, dict[tuple[object, object, object], float]] = {s: {} for s in seeds}
    for r in rows:
        by_seed[int(r["seed"])][(r["recipe"], r["map_dim"], r["epsilon"])] = float(r["accuracy"])  # type: ignore[arg-type]
    line = np.array([max(v for (name, _, _), v in by_seed[s].items() if str(name).startswith("public")) for s in seeds])
    keys = list(by_seed[seeds[0]])
    out = [
        "| recipe | m' | epsilon | accuracy (mean +- sd) | gain over the strongest public-only (paired) "
        "| one-sided p |",
        "|---|---|---|---|---|---|",
    ]
    for key in keys:
        acc = np.array([by_seed[s][key] for s in seeds])
        gain = acc - line
        p = float(stats.ttest_1samp(gain, 0.0, alternative="greater").pvalue) if gain.std() > 0 else float("nan")
        name, dim, eps = key
        out.append(
            f"| {name} | {dim or '-'} | {eps or '-'} | {acc.mean():.3f} +- {acc.std(ddof=1):.3f} "
            f"| {gain.mean():+.3f} +- {gain.std(ddof=1):.3f} | {p:.3f} |"
        )
    out.append("")
    out.append(f"Strongest public-only model per seed (the line): {', '.join(f'{v:.3f}' for v in line)}.")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="simulations/experiments/sst2_public.toml")
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument(
        "--out",
        default="results/local-recipe-ceilings/sst2-public200",
        help="where to write (the committed copy: --out docs/results/local-recipe-ceilings/sst2-public200)",
    )
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = [r for s in seeds for r in _one_seed(args.config, s)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "rows.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out / "table.md").write_text(_table(rows, seeds))
    print((out / "table.md").read_text())


if __name__ == "__main__":
    main()
