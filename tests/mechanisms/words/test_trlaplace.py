"""TrLaplace (docs/SPEC.md §7.4-7.6, §11.5 items 1, 2, 4).

Power checks: an untruncated Laplace fails the law test, and the support-leak
Monte Carlo rejects a wrong delta (v concentrated on one coordinate).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.words import WordSpace, trlaplace_delta, trlaplace_param_dim, trlaplace_variance
from mechanisms.words.trlaplace import trlaplace_cdf, trlaplace_params, trlaplace_support_leak
from tests.support.word_spaces import make_space

P_MIN = 1e-4


def _space(dim: int, points: torch.Tensor | None = None) -> WordSpace:
    """A space whose first words are ``points`` (the rest random), for exact placement of x and x'."""
    base = make_space(64, dim, seed=dim).vectors[:-1].double()
    if points is not None:
        base[: points.shape[0]] = points
    return WordSpace.from_vectors(f"tr-{dim}", [f"w{i}" for i in range(base.shape[0])], base)


def _noise(mech, n: int, word: int = 0, seed: int = 0) -> torch.Tensor:
    ids = torch.full((n,), word, dtype=torch.int64)
    return mech.perturb(ids, torch.Generator().manual_seed(seed)) - mech.input_vectors(torch.device("cpu"))[ids]


@pytest.mark.filterwarnings("ignore:trlaplace")
@pytest.mark.parametrize(
    ("eps", "dim"), [(0.001, 300), (1.0, 300), (5.0, 300), (10.0, 300), (20.0, 300), (1.0, 50), (10.0, 50)]
)
def test_noise_law_and_support(eps: float, dim: int) -> None:
    """KS of the coordinates against the truncated-Laplace CDF; |z_i| <= A (docs/SPEC.md §11.5 item 1)."""
    mech = mechanisms.create("trlaplace", epsilon=eps, clip=1.0, space=_space(dim))
    lam, a, _ = mech.params
    z = _noise(mech, 200_000 // dim + 1).ravel()[:200_000]
    assert float(z.abs().max()) <= a
    cdf = lambda t: trlaplace_cdf(torch.as_tensor(t), eps, mech.d_params).numpy()  # noqa: E731
    assert stats.kstest(z.numpy(), cdf).pvalue > P_MIN
    if eps <= 1.0:  # power: the untruncated Laplace(lambda) fails the same test
        wrong = stats.laplace(scale=lam).rvs(200_000, random_state=np.random.default_rng(0))
        assert stats.kstest(wrong, cdf).pvalue < 1e-6


def test_variance_matches_formula() -> None:
    """docs/SPEC.md §7.4/§11.5: formula 5.838 at C = 1, eps = 1, d = 300 (MC in docs/SPEC.md §11.5: 5.842)."""
    assert trlaplace_variance(1.0, 300, 1.0) == pytest.approx(5.838, abs=5e-4)
    mech = mechanisms.create("trlaplace", epsilon=1.0, clip=1.0, space=_space(300))
    z = _noise(mech, 2000).ravel()
    sd_of_var = float((z**2).std()) / math.sqrt(z.numel())
    assert abs(float((z**2).mean()) - 5.838087) < 5 * sd_of_var
    assert float((z**2).mean()) != pytest.approx(2 * mech.params[0] ** 2, rel=0.5)  # not Laplace's 2 lambda^2


@pytest.mark.parametrize(
    ("eps", "d_params", "a_over_c", "lam_over_c", "delta"),
    [
        (0.01, 300, 4.002, 3464, 0.987),
        (0.05, 300, 4.012, 693, 0.987),
        (0.1, 300, 4.023, 346, 0.987),
        (0.5, 300, 4.120, 69.3, 0.984),
        (1, 300, 4.250, 34.6, 0.979),
        (5, 300, 5.967, 6.93, 0.843),
        (10, 500, 10.05, 4.47, 0.371),
        (20, 1700, 14.48, 4.12, 0.123),
    ],
)
def test_spec_table(eps: float, d_params: int, a_over_c: float, lam_over_c: float, delta: float) -> None:
    """docs/SPEC.md §7.5 table (d = 300), including the computed dummy dimensions 500 and 1700."""
    assert trlaplace_param_dim(eps, 300) == d_params
    lam, a, b = trlaplace_params(eps, d_params, 2.0)
    assert a / 2.0 == pytest.approx(a_over_c, rel=2e-3) and lam / 2.0 == pytest.approx(lam_over_c, rel=2e-3)
    assert b == pytest.approx(1 / 16)
    assert trlaplace_delta(eps, d_params, 300, 2.0) == pytest.approx(delta, abs=6e-4)
    assert trlaplace_delta(eps, d_params, 300, 0.01) == pytest.approx(trlaplace_delta(eps, d_params, 300, 7.0))


def test_dummy_dimension_rule() -> None:
    assert trlaplace_param_dim(8.6, 300) == 300 and trlaplace_param_dim(8.67, 300) == 401
    assert trlaplace_param_dim(3.5, 50) == 50 and trlaplace_param_dim(3.6, 50) == 152
    with pytest.raises(ValueError, match="sqrt"):
        trlaplace_params(10.0, 400, 1.0)
    with pytest.raises(ValueError, match="d_params"):
        mechanisms.create("trlaplace", epsilon=10.0, d_params=400, space=_space(50))


def test_single_shift_support_leak_by_monte_carlo() -> None:
    """docs/SPEC.md §11.5 item 2: v = 0.1 on one coordinate, eps = 1, d' = 300: P[y not in supp(x')] = 0.01107."""
    x, x2 = torch.zeros(2), torch.tensor([0.1, 0.0])
    mech = mechanisms.create("trlaplace", epsilon=1.0, clip=1.0, d_params=300, space=_space(2, torch.stack([x, x2])))
    _, a, _ = mech.params
    formula = trlaplace_support_leak(x2 - x, 1.0, 300)
    assert formula == pytest.approx(0.01107, abs=1e-5)
    n = 400_000
    y = mech.perturb(torch.zeros(n, dtype=torch.int64), torch.Generator().manual_seed(3))
    leak = float(((y - x2).abs() > a).any(dim=1).double().mean())
    assert abs(leak - formula) < 3 * math.sqrt(formula * (1 - formula) / n)


@pytest.mark.parametrize(("eps", "dim"), [(10.0, 300), (1.0, 50)])
def test_worst_case_delta_by_monte_carlo(eps: float, dim: int) -> None:
    """x = v/2, x' = -v/2 with |v_i| = 2C/sqrt(n): MC P[y not in supp(x')] = trlaplace_delta (0.371 at eps 10, d 300).

    Power: the delta of v concentrated on one coordinate (a plausible wrong worst case) is rejected.
    """
    c = 1.0
    v = torch.full((dim,), 2 * c / math.sqrt(dim), dtype=torch.float64)
    mech = mechanisms.create("trlaplace", epsilon=eps, clip=c, space=_space(dim, torch.stack([v / 2, -v / 2])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        delta = mech.guarantee.delta
    assert delta == pytest.approx(trlaplace_delta(eps, mech.d_params, dim, c))
    n = 20_000
    y = mech.perturb(torch.zeros(n, dtype=torch.int64), torch.Generator().manual_seed(5))
    _, a, _ = mech.params
    leak = float(((y + v / 2).abs() > a).any(dim=1).double().mean())
    sd = math.sqrt(delta * (1 - delta) / n)
    assert abs(leak - delta) < 4 * sd
    concentrated = trlaplace_support_leak(torch.tensor([2 * c] + [0.0] * (dim - 1)), eps, mech.d_params, c)
    assert abs(leak - concentrated) > 10 * sd


def test_even_spread_is_the_supremum() -> None:
    """No shift in the ball (random, sparse or uneven directions of norm 2C) leaks more than trlaplace_delta."""
    gen = torch.Generator().manual_seed(0)
    for eps, d_params, dim in [(1.0, 300, 300), (10.0, 500, 300), (3.0, 50, 50), (10.0, 500, 50)]:
        bound = trlaplace_delta(eps, d_params, dim, 1.0)
        worst = 0.0
        for k in [1, 2, 5, dim // 2, dim]:
            for _ in range(50):
                v = torch.zeros(dim, dtype=torch.float64)
                v[torch.randperm(dim, generator=gen)[:k]] = torch.rand(k, generator=gen, dtype=torch.float64) + 0.1
                worst = max(worst, trlaplace_support_leak(2.0 * v / v.norm(), eps, d_params, 1.0))
        assert worst <= bound + 1e-12
        assert worst > 0.9 * bound  # near-even spreads come close


def test_clip_inputs_and_candidates() -> None:
    """||clip(x)|| <= C(1 + 1e-12), x unchanged inside the ball; the NN searches the clipped vocabulary."""
    space = make_space(500, 16, seed=2)
    mech = mechanisms.create("trlaplace", epsilon=1.0, clip=3.0, space=space)
    raw = space.vectors.double()
    clipped = mech.input_vectors(torch.device("cpu"))
    assert float(clipped.norm(dim=1).max()) <= 3.0 * (1 + 1e-12)
    inside = raw.norm(dim=1) <= 3.0
    assert 0 < int(inside.sum()) < raw.shape[0] and torch.equal(clipped[inside], raw[inside])
    assert float(mech.index.vectors64.norm(dim=1).max()) <= 3.0 * (1 + 1e-12)
    default = mechanisms.create("trlaplace", epsilon=1.0, space=space)  # C = median word norm
    assert default.clip_radius == pytest.approx(float(raw[:-1].norm(dim=1).median()))


def test_guarantee_document_and_refusal() -> None:
    space = _space(50)
    mech = mechanisms.create("trlaplace", epsilon=10.0, space=space)
    with pytest.warns(UserWarning, match="delta"):
        g = mech.guarantee
    assert (g.notion, g.epsilon, g.granularity) == ("approx", 10.0, "word")
    assert g.delta == pytest.approx(trlaplace_delta(10.0, 500, 50, 1.0))
    assert mech.loss_bound == pytest.approx(10.0 * math.sqrt(50 / 500))
    doc = mech.document_guarantee(20)
    assert doc.epsilon == 200.0 and doc.delta == pytest.approx(1 - (1 - g.delta) ** 20)
    assert doc.delta <= min(1.0, 20 * g.delta)
    with pytest.raises(ValueError, match="max_delta"):
        mechanisms.create("trlaplace", epsilon=10.0, max_delta=1e-3, space=space)
    ok = mechanisms.create("trlaplace", epsilon=10.0, max_delta=0.5, space=space)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ok.guarantee.delta < 0.5
