"""Statistical and analytic tests of PrivEmb (docs/SPEC.md §6, §11.2 items 1, 2, 4, 5).

Each distribution test has a power check: the TrLap code's std = 1/k projection,
an exponential noise norm, the paper's (1 + beta) calibration on a Phi whose
realised Lipschitz constant exceeds 1 + beta, and for the noise direction a
non-uniform direction, a radius tied to the direction and noise shared by rows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.noise import gamma_integer_shape, uniform_directions
from mechanisms.privemb import PrivEmb, lipschitz_constant, paper_out_dim, projection

N = 20_000
P_MIN = 1e-4


def _unit(n: int, d: int, seed: int) -> torch.Tensor:
    x = torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return x / x.norm(dim=1, keepdim=True)


def _noise(mech: PrivEmb, d: int, n: int = N, seed: int = 0) -> np.ndarray:
    """kappa = w - Phi x for one fixed unit input."""
    x = _unit(1, d, 99)
    w = mech.sanitize(x.expand(n, d).contiguous(), generator=torch.Generator().manual_seed(seed))
    return (w - x @ mech.phi.T).numpy()


def test_registered_with_sentence_level() -> None:
    mech = mechanisms.create("privemb", epsilon=2.0)
    assert mech.level == "sentence" and "privemb" in mechanisms.names()
    g = mech.guarantee
    assert (g.notion, g.metric, g.delta, g.diameter) == ("metric", "euclidean", 0.0, 2.0)
    assert g.as_ldp() == (4.0, 0.0)


def test_paper_dimension_formula() -> None:
    """docs/SPEC.md §6: k = 149, 76, 46 at d = 300, delta = 1e-6, beta = 0.5, 0.7, 0.9."""
    assert [paper_out_dim(300, b, 1e-6) for b in (0.5, 0.7, 0.9)] == [149, 76, 46]


@pytest.mark.parametrize("k", [16, 149, 300])
def test_projection_entry_variance(k: int) -> None:
    """docs/SPEC.md §11.2 item 5: var(Phi) = 1/k within 3*sqrt(2/(k d))/k; the std = 1/k bug fails it."""
    d = 300
    phi = projection(d, k, seed=7).numpy()
    tol = 3 * math.sqrt(2 / (k * d)) / k
    assert abs(phi.var() - 1 / k) < tol
    wrong = np.random.default_rng(7).normal(0, 1 / k, (k, d))  # TrLap: scale=1/k passed as the std
    assert abs(wrong.var() - 1 / k) > tol


def test_projection_is_public_and_fixed() -> None:
    """Same seed, same Phi in every mechanism instance (users must share it); not redrawn per call."""
    a = mechanisms.create("privemb", epsilon=1.0, input_dim=32, projection_seed=5)
    b = mechanisms.create("privemb", epsilon=1.0, input_dim=32, projection_seed=5)
    assert torch.equal(a.phi, b.phi)
    before = a.phi.clone()
    a.sanitize(_unit(10, 32, 0), generator=torch.Generator().manual_seed(0))
    assert torch.equal(a.phi, before)


def test_sphere_lipschitz_is_spectral_norm() -> None:
    """On the sphere L = sigma_max(Phi): random pairs never exceed it, and the top singular pair attains it."""
    phi = projection(300, 149, seed=0)
    big = lipschitz_constant(phi)
    assert abs(big - 2.4) < 0.1  # docs/SPEC.md §6: sigma_max is about 2.4 at k = 149
    x, xp = _unit(5000, 300, 1), _unit(5000, 300, 2)
    ratios = ((x - xp) @ phi.T).norm(dim=1) / (x - xp).norm(dim=1)
    assert float(ratios.max()) <= big + 1e-9
    v = torch.linalg.svd(phi).Vh[0]
    a, b = v * 0.01 + _unit(1, 300, 3)[0], _unit(1, 300, 3)[0]  # a small step along the top direction
    a = a / a.norm()
    assert float((phi @ (a - b)).norm() / (a - b).norm()) > 0.99 * big


def test_domain_lipschitz_matches_brute_force() -> None:
    """Chunked Gram computation equals the explicit double loop; docs/SPEC.md §6: about 1.3 for
    300-d points at k=149."""
    pts = torch.randn(300, 300, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    phi = projection(300, 149, seed=0)
    fast = lipschitz_constant(phi, pts, chunk=37)
    diff = pts[:, None, :] - pts[None, :, :]
    num = (diff @ phi.T).norm(dim=2)
    den = diff.norm(dim=2)
    mask = ~torch.eye(300, dtype=torch.bool)
    brute = float((num[mask] / den[mask]).max())
    assert abs(fast - brute) < 1e-9
    assert 1.1 < fast < 1.5 < lipschitz_constant(phi)


@pytest.mark.parametrize("d", [2, 16, 300, 768, 1024])
@pytest.mark.parametrize("eps", [0.01, 1.0, 10.0, 1000.0])
def test_noise_norm_is_gamma_exact(d: int, eps: float) -> None:
    """||kappa|| ~ Gamma(k, L/eps) for the exact variant (k = d), docs/SPEC.md §11.2 item 1."""
    mech = PrivEmb(eps, input_dim=d)
    n = 4000 if d >= 768 else N
    norms = np.linalg.norm(_noise(mech, d, n), axis=1)
    assert stats.kstest(norms, stats.gamma(a=d, scale=mech.lipschitz / eps).cdf).pvalue > P_MIN


def _exponential_norm(n: int, m: int, scale: float, generator, device) -> torch.Tensor:
    """The "exponential norm" bug: radius ~ Exp(scale) instead of Gamma(m, scale), uniform direction."""
    return (gamma_integer_shape(n, 1, generator, device) * scale)[:, None] * uniform_directions(n, m, generator, device)


class _ThirdOfTheNoise(PrivEmb):
    @property
    def noise_scale(self) -> float:
        return super().noise_scale / 3


@pytest.mark.parametrize("wrong", ["third of the scale", "exponential norm"])
def test_noise_norm_exact_check_has_power(wrong: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Power: the KS test of ``test_noise_norm_is_gamma_exact`` (d = 16, eps = 1) rejects the exact
    variant run with a third of its noise scale, and with the exponential-norm noise patched in."""
    d, eps = 16, 1.0
    if wrong == "exponential norm":
        monkeypatch.setattr("mechanisms.privemb.gamma_radius_noise", _exponential_norm)
        mech = PrivEmb(eps, input_dim=d)
    else:
        mech = _ThirdOfTheNoise(eps, input_dim=d)
    norms = np.linalg.norm(_noise(mech, d), axis=1)
    assert stats.kstest(norms, stats.gamma(a=d, scale=mech.lipschitz / eps).cdf).pvalue < 1e-6


def test_noise_norm_paper_variant_and_power() -> None:
    """Paper variant: Gamma(k, (1+beta)/eps); the exact variant's L/eps scale fails that KS test."""
    d, eps = 300, 1.0
    paper = PrivEmb(eps, variant="paper", input_dim=d)
    norms = np.linalg.norm(_noise(paper, d), axis=1)
    k = paper.phi.shape[0]
    assert k == 149
    assert stats.kstest(norms, stats.gamma(a=k, scale=1.5 / eps).cdf).pvalue > P_MIN
    assert stats.kstest(norms, stats.gamma(a=k, scale=paper.lipschitz / eps).cdf).pvalue < 1e-6
    expo = np.random.default_rng(0).exponential(1.5 / eps, N)  # the "exponential norm" bug
    assert stats.kstest(expo, stats.gamma(a=k, scale=1.5 / eps).cdf).pvalue < 1e-6


def _direction_stats(z: np.ndarray) -> tuple[float, float, float]:
    """(KS p-value of u_0^2 against Beta(1/2, (k-1)/2) for u = kappa/||kappa||, |corr(||kappa||, u_0)|,
    |corr(kappa_0 of row i, kappa_0 of row i+1)|)."""
    k = z.shape[1]
    norms = np.linalg.norm(z, axis=1)
    u = z / norms[:, None]
    return (
        stats.kstest(u[:, 0] ** 2, stats.beta(0.5, (k - 1) / 2).cdf).pvalue,
        abs(stats.pearsonr(norms, u[:, 0]).statistic),
        abs(np.corrcoef(z[:-1, 0], z[1:, 0])[0, 1]),
    )


def test_noise_direction_uniform_and_independent() -> None:
    """Squared coordinates of kappa/||kappa|| ~ Beta(1/2, (k-1)/2); no correlation across rows or with the radius."""
    mech = PrivEmb(1.0, out_dim=16, input_dim=64)
    ks_p, radius_corr, row_corr = _direction_stats(_noise(mech, 64))
    assert ks_p > P_MIN
    assert radius_corr < 4 / math.sqrt(N)
    assert row_corr < 4 / math.sqrt(N)


def _stretched_direction(n: int, m: int, scale: float, generator, device) -> torch.Tensor:
    """Wrong noise: Gamma radius, but the direction's Gaussian has 1.3x the spread on coordinate 0."""
    r = torch.randn((n, m), generator=generator, dtype=torch.float64, device=device)
    r[:, 0] *= 1.3
    return (gamma_integer_shape(n, m, generator, device) * scale)[:, None] * r / r.norm(dim=1, keepdim=True)


def _radius_tied_to_direction(n: int, m: int, scale: float, generator, device) -> torch.Tensor:
    """Wrong noise: uniform direction u, radius Gamma(m, scale) * (1 + u_0 / 2)."""
    u = uniform_directions(n, m, generator, device)
    return (gamma_integer_shape(n, m, generator, device) * scale * (1 + u[:, 0] / 2))[:, None] * u


def _shared_by_row_pairs(n: int, m: int, scale: float, generator, device) -> torch.Tensor:
    """Wrong noise: one correct noise vector for each pair of consecutive rows (a partial broadcast)."""
    half = (gamma_integer_shape((n + 1) // 2, m, generator, device) * scale)[:, None] * uniform_directions(
        (n + 1) // 2, m, generator, device
    )
    return half.repeat_interleave(2, dim=0)[:n]


@pytest.mark.parametrize(
    ("wrong", "which"), [(_stretched_direction, 0), (_radius_tied_to_direction, 1), (_shared_by_row_pairs, 2)]
)
def test_noise_direction_checks_have_power(wrong, which: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Power: PrivEmb run with a wrong noise sampler (patched into the mechanism) fails the
    matching check of ``test_noise_direction_uniform_and_independent`` (same helper, same thresholds):
    a non-uniform direction fails the Beta KS test, a radius tied to the direction the radius
    correlation, noise shared by consecutive rows the row correlation."""
    monkeypatch.setattr("mechanisms.privemb.gamma_radius_noise", wrong)
    stats_ = _direction_stats(_noise(PrivEmb(1.0, out_dim=16, input_dim=64), 64))
    if which == 0:
        assert stats_[0] < 1e-6
    else:
        assert stats_[which] > 4 / math.sqrt(N)


def _log_density_ratio(mech: PrivEmb, y: torch.Tensor, x: torch.Tensor, xp: torch.Tensor) -> torch.Tensor:
    """log p(y|x) - log p(y|x') for the Gamma-norm density exp(-||y - Phi x|| / scale)."""
    phi = mech.phi
    return ((y - xp @ phi.T).norm(dim=1) - (y - x @ phi.T).norm(dim=1)) / mech.noise_scale


def test_density_ratio_bound_exact_variant() -> None:
    """Exact variant: log-ratio <= eps * ||x - x'|| for random triples, with equality on the worst case."""
    d, eps = 64, 2.0
    mech = PrivEmb(eps, out_dim=32, input_dim=d)
    x, xp = _unit(2000, d, 1), _unit(2000, d, 2)
    y = torch.randn(2000, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 3
    assert bool((_log_density_ratio(mech, y, x, xp) <= eps * (x - xp).norm(dim=1) + 1e-9).all())
    # Worst case: x - x' along Phi's top right-singular vector, y on the ray beyond Phi x.
    v = torch.linalg.svd(mech.phi).Vh[0]
    x0, x1 = (v / 2)[None], (-v / 2)[None]  # not unit, but the density bound is over R^d
    y0 = x0 @ mech.phi.T * 5
    ratio = float(_log_density_ratio(mech, y0, x0, x1)[0])
    assert abs(ratio - eps * float((x0 - x1).norm())) < 1e-9


def test_paper_variant_reports_attained_epsilon() -> None:
    """Power: with (1+beta)/eps noise and L > 1+beta the nominal eps is exceeded, so the guarantee
    reports eps*L/(1+beta)."""
    d, eps = 300, 1.0
    paper = PrivEmb(eps, variant="paper", input_dim=d)
    assert paper.lipschitz > 1.5
    v = torch.linalg.svd(paper.phi).Vh[0]
    x0, x1 = (v / 2)[None], (-v / 2)[None]
    ratio = float(_log_density_ratio(paper, x0 @ paper.phi.T * 5, x0, x1)[0])
    assert ratio > eps * 1.0 + 0.1  # the paper's claim eps * ||x - x'|| fails for this Phi
    g = paper.guarantee
    assert g.delta == 1e-6
    assert abs(ratio - g.epsilon * 1.0) < 1e-9  # and the reported epsilon is exactly what is attained


def test_paper_guarantee_needs_the_drawn_projection() -> None:
    mech = PrivEmb(1.0, variant="paper")
    with pytest.raises(RuntimeError, match="input_dim"):
        _ = mech.guarantee
    mech.sanitize(_unit(3, 300, 0), generator=torch.Generator().manual_seed(0))
    assert mech.guarantee.epsilon >= 1.0


def test_map_back_and_output_dim() -> None:
    mech = PrivEmb(1.0, out_dim=8, input_dim=32, map_back=True)
    assert mech.output_dim(32) == 32
    assert mech.sanitize(_unit(4, 32, 0), generator=torch.Generator().manual_seed(0)).shape == (4, 32)
    assert PrivEmb(1.0, out_dim=8).output_dim(32) == 8


def test_finite_domain_guarantee_and_membership() -> None:
    """On a public finite domain the calibration uses its pairwise L; inputs outside it are refused."""
    vocab = torch.randn(200, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    mech = PrivEmb(1.0, out_dim=20, domain=vocab)
    assert mech.lipschitz < lipschitz_constant(mech.phi)
    assert mech.guarantee.diameter == pytest.approx(float(torch.cdist(vocab, vocab).max()))
    assert mech.sanitize(vocab[:5], generator=torch.Generator().manual_seed(0)).shape == (5, 20)
    with pytest.raises(ValueError, match="not one of its points"):
        mech.sanitize(vocab[:5] + 0.1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": 1.0, "variant": "fast"}, "variant"),
        ({"epsilon": 1.0, "variant": "paper", "input_dim": 300, "out_dim": 20}, "below the paper"),
        ({"epsilon": 1.0, "beta": -1.0}, "beta"),
        ({"epsilon": 1.0, "out_dim": 0}, "out_dim"),
    ],
)
def test_bad_parameters(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mechanisms.create("privemb", **kwargs)


def test_dimension_mismatch_and_nan() -> None:
    mech = PrivEmb(1.0, input_dim=16)
    with pytest.raises(ValueError, match="does not match"):
        mech.sanitize(_unit(3, 8, 0))
    bad = _unit(3, 16, 0)
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        mech.sanitize(bad)
