"""The float64 samplers of ``mechanisms.noise`` (Box-Muller normals, Laplace by inversion,
Marsaglia-Tsang Gamma) and the speed-related rewrites of the sentence mechanisms.

The laws are checked against torch's own float64 samplers (same uniforms, same
arithmetic) and against scipy (KS); every statistical test has a power check: a
deliberately wrong sampler fails the same test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms import noise
from mechanisms import purkayastha as purk

CPU = torch.device("cpu")
N = 200_000
P_MIN = 1e-4


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------- uniforms
def test_uniform_integers_are_torch_float64_uniforms() -> None:
    """k 2^-53 from ``_uniform_integers_`` is bit for bit ``Tensor.uniform_`` of the same generator state."""
    for size in (1, 16, 1001, 70_000):
        k = noise._uniform_integers_(
            torch.empty(size, dtype=torch.float64), torch.empty(size, dtype=torch.int64), _gen(size)
        )
        u = torch.empty(size, dtype=torch.float64).uniform_(generator=_gen(size))
        assert torch.equal(k * 2.0**-53, u)
        assert float(k.min()) >= 0 and float(k.max()) < 2.0**53 and torch.equal(k, k.round())


# --------------------------------------------------------------------------- normals
def test_box_muller_is_torch_randn_float64() -> None:
    """On 16 numbers torch's float64 ``normal_fill`` pairs u_j with u_{j+8}, as the block
    sampler pairs the two halves of a block: same uniforms, same formula, same values."""
    ours = noise.standard_normal((16,), _gen(5), CPU)
    theirs = torch.randn(16, dtype=torch.float64, generator=_gen(5))
    assert torch.allclose(ours, theirs, rtol=1e-13, atol=1e-15)


def _normal_checks(z: np.ndarray) -> tuple[float, float]:
    """(KS p-value against N(0, 1), |corr(z_i^2, z_j^2)| of the Box-Muller partners of the first block)."""
    half = min(len(z), noise._BLOCK_ELEMENTS) // 2
    return stats.kstest(z, "norm").pvalue, abs(np.corrcoef(z[:half] ** 2, z[half : 2 * half] ** 2)[0, 1])


@pytest.mark.parametrize("size", [N, N + 1, 3 * noise._BLOCK_ELEMENTS + 7])
def test_standard_normal_law(size: int) -> None:
    """N(0, 1) by KS (even and odd sizes, several blocks); the two numbers of a pair are independent."""
    z = noise.standard_normal((size,), _gen(1), CPU).numpy()
    assert z.shape == (size,) and np.isfinite(z).all()
    ks_p, pair_corr = _normal_checks(z)
    assert ks_p > P_MIN
    assert pair_corr < 5 / math.sqrt(noise._BLOCK_ELEMENTS // 2)


def test_standard_normal_checks_have_power(monkeypatch: pytest.MonkeyPatch) -> None:
    """Power: a radius sqrt(-log(1 - u)) (half the variance) fails the KS test; an angle shared by
    both halves of a pair (cos for both) fails the pair-independence check."""

    def half_variance(buf, scratch, generator):
        _box_muller(buf, scratch, generator)
        buf.mul_(math.sqrt(0.5))

    def same_angle(buf, scratch, generator):
        _box_muller(buf, scratch, generator)
        half = buf.numel() // 2
        buf[half:] = buf[:half]

    _box_muller = noise._box_muller_
    monkeypatch.setattr(noise, "_box_muller_", half_variance)
    assert _normal_checks(noise.standard_normal((N,), _gen(1), CPU).numpy())[0] < 1e-6
    monkeypatch.setattr(noise, "_box_muller_", same_angle)
    assert _normal_checks(noise.standard_normal((N,), _gen(1), CPU).numpy())[1] > 5 / math.sqrt(
        noise._BLOCK_ELEMENTS // 2
    )


# --------------------------------------------------------------------------- Laplace
def test_laplace_law_and_power() -> None:
    """Lap(0, b) by KS; the same test rejects Lap(0, 0.97 b)."""
    b = 1.7
    z = noise.laplace((N,), b, _gen(2), CPU).numpy()
    assert stats.kstest(z, stats.laplace(scale=b).cdf).pvalue > P_MIN
    assert stats.kstest(z, stats.laplace(scale=0.97 * b).cdf).pvalue < 1e-6


def test_laplace_grid_is_symmetric_and_finite(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inversion maps k and 2^53 - 1 - k to opposite values (a grid symmetric about 0), the
    extremes to +-53 ln 2 (finite; u = 0 gave -inf with v = u - 1/2), and it is exact: 1 - |t| is
    computed without rounding."""
    ks = torch.tensor([0.0, 1.0, 2.0**52 - 1, 2.0**52, 2.0**53 - 2, 2.0**53 - 1], dtype=torch.float64)

    def fixed(out, bits, generator):
        return out.copy_(ks[: out.numel()])

    monkeypatch.setattr(noise, "_uniform_integers_", fixed)
    z = noise.laplace((6,), 1.0, None, CPU)
    assert torch.isfinite(z).all()
    assert torch.equal(z, -z.flip(0))
    assert float(z[-1]) == pytest.approx(53 * math.log(2), rel=1e-15)
    assert float(z[3]) == pytest.approx(-math.log1p(-(2.0**-53)), rel=1e-12)  # t = 2^-53: the two middle values


# --------------------------------------------------------------------------- Gamma
@pytest.mark.parametrize("shape", [1, 2, 3, 16, 149, 1024])
def test_standard_gamma_law(shape: int) -> None:
    """Gamma(shape, 1) by KS, for the shapes the mechanisms use (m or k = 2 ... 1024; 1 for the
    exponential-norm test doubles)."""
    g = noise.standard_gamma(100_000, shape, _gen(shape), CPU).numpy()
    assert g.shape == (100_000,) and (g > 0).all()
    assert stats.kstest(g, stats.gamma(a=shape).cdf).pvalue > P_MIN


def _no_rejection(n: int, shape: float, generator, device) -> torch.Tensor:
    """Wrong Gamma: the Marsaglia-Tsang proposal d (1 + c x)^3 accepted every time (v > 0 kept)."""
    d = shape - 1 / 3
    v = (1 + noise.standard_normal((3 * n,), generator, device) / math.sqrt(9 * d)) ** 3
    return v[v > 0][:n] * d


@pytest.mark.parametrize(("wrong", "shape"), [("no rejection", 1), ("shape - 1", 16)])
def test_standard_gamma_law_has_power(wrong: str, shape: int) -> None:
    """Power: the KS test of ``test_standard_gamma_law`` rejects the proposal without its rejection
    step (shape 1, acceptance 0.95) and an off-by-one shape."""
    if wrong == "no rejection":
        g = _no_rejection(100_000, shape, _gen(shape), CPU).numpy()
    else:
        g = noise.standard_gamma(100_000, shape - 1, _gen(shape), CPU).numpy()
    assert stats.kstest(g, stats.gamma(a=shape).cdf).pvalue < 1e-6


def test_standard_gamma_sizes_and_refusal() -> None:
    for n in (0, 1, 2, 17):
        assert noise.standard_gamma(n, 5, _gen(n), CPU).shape == (n,)
    with pytest.raises(ValueError, match="shape"):
        noise.standard_gamma(3, 0.5, None, CPU)
    with pytest.raises(ValueError, match="integer"):
        noise.gamma_integer_shape(3, 2.5, None, CPU)


def test_gamma_radius_noise_law() -> None:
    """||z|| ~ Gamma(m, scale) and the direction is uniform (Beta test on a squared coordinate)."""
    z = noise.gamma_radius_noise(50_000, 16, 0.3, _gen(7), CPU).numpy()
    norms = np.linalg.norm(z, axis=1)
    assert stats.kstest(norms, stats.gamma(a=16, scale=0.3).cdf).pvalue > P_MIN
    assert stats.kstest((z[:, 3] / norms) ** 2, stats.beta(0.5, 7.5).cdf).pvalue > P_MIN


# --------------------------------------------------------------------------- mechanisms
SENTENCE = ["purkayastha", "planar_laplace", "laplace", "gaussian", "privemb"]


@pytest.mark.parametrize("name", SENTENCE)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sanitize_leaves_the_input_alone(name: str, dtype: torch.dtype) -> None:
    """The block loops write into their own buffers, never into x (float64 x is not copied by .to)."""
    x = torch.randn(3000, 16, dtype=dtype, generator=_gen(3)) * 3
    before = x.clone()
    y = mechanisms.create(name, epsilon=2.0).sanitize(x, generator=_gen(4))
    assert torch.equal(x, before)
    assert y.dtype == dtype and y.shape == x.shape and bool(torch.isfinite(y).all())


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_clipped_release_leaves_the_input_alone_without_clip(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even when ``clip_l2`` hands back its (float64) input, the noise is not added into x."""
    monkeypatch.setattr("mechanisms.clipped_additive.clip_l2", lambda x, radius: x)
    x = torch.randn(3000, 16, dtype=torch.float64, generator=_gen(5))
    before = x.clone()
    mechanisms.create(name, epsilon=2.0).sanitize(x, generator=_gen(6))
    assert torch.equal(x, before)


@pytest.mark.parametrize("name", SENTENCE)
def test_nan_and_inf_refused(name: str) -> None:
    """The one-pass finiteness check (sum of x) still refuses NaN and +-inf anywhere."""
    mech = mechanisms.create(name, epsilon=1.0)
    for bad in (float("nan"), float("inf"), -float("inf")):
        x = torch.randn(50, 16, generator=_gen(8))
        x[17, 5] = bad
        with pytest.raises(ValueError, match="NaN or infinite"):
            mech.sanitize(x, generator=_gen(9))


@pytest.mark.parametrize("name", SENTENCE)
def test_huge_finite_rows_are_accepted(name: str) -> None:
    """A sum that overflows while every entry is finite falls back to the exact scan and passes."""
    x = torch.full((4, 16), 3e38)
    assert not math.isfinite(float(x.sum()))
    mech = mechanisms.create(name, epsilon=1.0)
    y = mech.sanitize(x, generator=_gen(10))
    assert y.shape == (4, 16) and bool(torch.isfinite(y).all())
    # A huge row is its direction, as any row far outside the unit ball: the same release, draw for draw,
    # as the row 0.25 * 100 * (1, ..., 1) (norm 100) with the same generator.
    same = mech.sanitize(torch.full((4, 16), 25.0), generator=_gen(10))
    assert torch.allclose(y.double(), same.double(), atol=1e-5), (y[0], same[0])


def test_planar_zero_rows_map_to_e1() -> None:
    """planar_laplace normalises a zero row to the public e1 (as ``normalize_rows``), at huge epsilon
    the release is then ~e1; other rows go to ~x / |x|."""
    x = torch.randn(6, 16, dtype=torch.float64, generator=_gen(11))
    x[2] = 0.0
    y = mechanisms.create("planar_laplace", epsilon=1e9).sanitize(x, generator=_gen(12))
    e1 = torch.zeros(16, dtype=torch.float64)
    e1[0] = 1.0
    assert torch.allclose(y[2], e1, atol=1e-6)
    mask = torch.arange(6) != 2
    assert torch.allclose(y[mask], x[mask] / x[mask].norm(dim=1, keepdim=True), atol=1e-6)


# --------------------------------------------------------------------------- Purkayastha
@pytest.mark.parametrize(("m", "eps"), [(2, 1.0), (3, 10.0), (16, 10.0), (16, 0.01), (300, 10.0)])
def test_purkayastha_float32_release_needs_no_renormalisation(m: int, eps: float, monkeypatch) -> None:
    """A float32 release skips the float64 renormalisation of Y (|Y| = 1 within a few float64 ulps):
    with the renormalisation forced, the same random numbers give bit for bit the same float32
    release (m = 2 and 3 include rows re-projected for cancellation)."""
    x = torch.randn(20_000, m, generator=_gen(13)) * 2
    mech = mechanisms.create("purkayastha", epsilon=eps)
    plain = mech.sanitize(x, generator=_gen(14))
    monkeypatch.setattr(purk, "_RENORMALISE_ALL", True)
    renormalised = mech.sanitize(x, generator=_gen(14))
    assert torch.equal(plain, renormalised)


def test_purkayastha_reprojects_ill_conditioned_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """In 2-D about 0.6% of the Gaussians r are within 1e-2 of the direction mu; those rows take
    the second Gram-Schmidt step, and the releases stay on the sphere with xi _|_ mu."""
    calls = []
    original = purk._Workspace._fix_ill_conditioned

    def spy(self, r, sq, along_mu, v, inv_norm, generator):
        calls.append(int((torch.addcmul(sq, along_mu, along_mu, value=-1e-4) < 0).sum()))
        return original(self, r, sq, along_mu, v, inv_norm, generator)

    monkeypatch.setattr(purk._Workspace, "_fix_ill_conditioned", spy)
    x = torch.randn(1, 2, dtype=torch.float64, generator=_gen(15)).expand(20_000, 2).contiguous()
    y = mechanisms.create("purkayastha", epsilon=1.0).sanitize(x, generator=_gen(16))
    assert sum(calls) > 20
    mu = x[0] / x[0].norm()
    cos = y @ mu
    assert float((y.norm(dim=1) - 1).abs().max()) < 1e-12
    tangent = y - cos[:, None] * mu
    assert torch.allclose(tangent.norm(dim=1) ** 2 + cos**2, torch.ones(20_000, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("m", [3, 16, 300])
def test_purkayastha_release_does_not_depend_on_the_block_size(m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks hold a multiple of 16 rows, so their float32 normals are exactly those of one
    torch.randn(n, m): the release for a seed is the same whatever the CPU block size."""
    x = torch.randn(4000, m, generator=_gen(17))
    mech = mechanisms.create("purkayastha", epsilon=5.0)
    releases = []
    for elements in (2**10, 2**17, 2**30):
        monkeypatch.setattr(purk, "_BLOCK_ELEMENTS", elements)
        releases.append(mech.sanitize(x, generator=_gen(18)))
    assert torch.equal(releases[0], releases[1]) and torch.equal(releases[1], releases[2])
