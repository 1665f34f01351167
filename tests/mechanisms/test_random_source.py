"""secure-rng's cryptographic generator (``mechanisms/keystream.py``) and the samplers that read it
(``mechanisms/random_source.py``).

* The keystream is RFC 8439's ChaCha20 (a known-answer block), read at the positions it claims.
* Each primitive draws its law (KS and chi-square at N = 2e5), and each test has power: the same test
  rejects a nearby wrong law at the same N.
* Every registered mechanism (sentence, label, word and document level) draws only through it: two
  secure generators with one key and different torch states give equal releases, another key differs.
* Every mechanism's law with it: its releases match the torch generator's (two-sample KS or
  chi-square on a statistic of the release), with power against the mechanism at a larger epsilon;
  the privacy audits of the sentence and label mechanisms hold with it (epsilon_lb <= claimed) and
  keep their power on the tight pairs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from scipy import stats

import mechanisms
from mechanisms import random_source as rs
from mechanisms.audit import audit_mechanism
from mechanisms.keystream import SecureGenerator, coins
from tests.mechanisms.test_audit import AUDIT_CONFIGS, AUDIT_KWARGS, FALLBACK
from tests.mechanisms.test_audit_levels import _levels, _tight_deepcandidate

N = 200_000
ALPHA = 1e-4  # a sound sampler fails one of these tests with probability below ~1e-3 in all


def _gen(*material: object) -> SecureGenerator:
    return SecureGenerator.from_material("test", *material)


def test_chacha20_known_answer_and_counter_layout() -> None:
    """RFC 8439 section 2.3.2: key 00..1f, block counter 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00;
    cryptography's 16-byte nonce is the 4-byte little-endian counter, then the RFC's nonce."""
    key = bytes(range(32))
    nonce = (1).to_bytes(4, "little") + bytes.fromhex("000000090000004a00000000")
    block = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor().update(bytes(64))
    assert block[:16].hex() == "10f1e7e4d13b5915500fdd1fa32071c4"
    # coins() reads word i of block i // 8: a slice of the stream equals the stream read from its start.
    whole = coins(key, 0, 40).numpy()
    assert np.array_equal(coins(key, 13, 20).numpy(), whole[13:33])
    assert not np.array_equal(coins(bytes(32), 0, 40).numpy(), whole)


def test_a_key_must_be_32_bytes_and_a_fresh_generator_draws_from_the_os() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        SecureGenerator(b"short")
    a, b = SecureGenerator(), SecureGenerator()
    assert not torch.equal(rs.rand(64, a), rs.rand(64, b))  # two OS keys (equal: probability 2^-3392)


def _ks(sample: torch.Tensor | np.ndarray, cdf: object) -> float:
    return float(stats.kstest(np.asarray(sample, dtype=np.float64).ravel(), cdf).pvalue)


def test_uniforms_normals_and_exponentials_have_their_law_and_the_tests_have_power() -> None:
    g = _gen("laws")
    u, z = rs.rand(N, g), rs.randn((N // 2, 2), g)
    e = rs.exponential_(torch.empty(N, dtype=torch.float64), generator=g)
    u32 = rs.rand(N, g, dtype=torch.float32)
    assert u.dtype == torch.float64 and float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert u32.dtype == torch.float32 and float(u32.max()) < 1.0
    assert _ks(u, stats.uniform.cdf) > ALPHA and _ks(u32, stats.uniform.cdf) > ALPHA
    assert _ks(z, stats.norm.cdf) > ALPHA and _ks(e, stats.expon.cdf) > ALPHA
    # Power: the same tests reject a 2% wrong scale at this N.
    assert _ks(u * 0.98, stats.uniform.cdf) < ALPHA
    assert _ks(z * 1.02, stats.norm.cdf) < ALPHA
    assert _ks(e * 1.02, stats.expon.cdf) < ALPHA
    out = torch.empty(5, 3, dtype=torch.float32)
    assert rs.randn((5, 3), g, dtype=torch.float32, out=out) is out and bool(out.abs().sum() > 0)


@pytest.mark.parametrize("span", [2, 3, 7, 1000])
def test_randint_is_exactly_uniform(span: int) -> None:
    values = rs.randint(5, 5 + span, N, _gen("randint", span))
    assert values.dtype == torch.int64 and int(values.min()) >= 5 and int(values.max()) < 5 + span
    counts = np.bincount(values.numpy() - 5, minlength=span)
    assert stats.chisquare(counts).pvalue > ALPHA
    if span > 2:  # power: a draw that never yields the top value is rejected
        skewed = np.bincount(np.minimum(values.numpy() - 5, span - 2), minlength=span)
        assert stats.chisquare(skewed).pvalue < ALPHA


def test_randperm_is_uniform_over_permutations() -> None:
    g = _gen("perm")
    perms = np.stack([rs.randperm(3, g).numpy() for _ in range(6000)])
    codes = perms[:, 0] * 9 + perms[:, 1] * 3 + perms[:, 2]
    counts = np.array([np.sum(codes == c) for c in np.unique(codes)])
    assert len(counts) == 6 and stats.chisquare(counts).pvalue > ALPHA
    assert sorted(rs.randperm(1000, g).tolist()) == list(range(1000))
    # Power: the first position of a permutation biased toward identity (1 in 4 kept) is caught.
    biased = np.where(np.arange(6000) % 4 == 0, 0, perms[:, 0])
    assert stats.chisquare(np.bincount(biased, minlength=3)).pvalue < ALPHA


def test_the_torch_path_is_torchs_own_stream() -> None:
    """Without secure-rng every draw is exactly the torch sampler it replaced (no fingerprint changes)."""

    def pair(f: object) -> tuple[torch.Tensor, torch.Tensor]:
        return f(torch.Generator().manual_seed(5)), f(torch.Generator().manual_seed(5))  # type: ignore[operator]

    a = rs.rand((4, 3), torch.Generator().manual_seed(5))
    assert torch.equal(a, torch.rand((4, 3), generator=torch.Generator().manual_seed(5), dtype=torch.float64))
    b = rs.randint(0, 9, 20, torch.Generator().manual_seed(5))
    assert torch.equal(b, torch.randint(0, 9, (20,), generator=torch.Generator().manual_seed(5)))
    c = rs.randperm(10, torch.Generator().manual_seed(5))
    assert torch.equal(c, torch.randperm(10, generator=torch.Generator().manual_seed(5)))
    x, y = pair(lambda g: rs.randn(7, g))
    assert torch.equal(x, y)


# --------------------------------------------------------------------------- every mechanism
def _sentence_or_label(name: str) -> tuple[mechanisms.Mechanism, int]:
    params, dim, _ = AUDIT_CONFIGS.get(name, FALLBACK)
    return mechanisms.create(name, **params), max(dim, 2)


def _word(name: str, epsilon: float | None = None) -> mechanisms.Mechanism:
    params = {"epsilon": 3.4, "max_delta": 1.0} if name == "trlaplace" else {"epsilon": 2.0}
    if epsilon is not None:
        params["epsilon"] = epsilon
    return mechanisms.create(name, vocab_size=2000, **params)


def _document(name: str, epsilon: float = 2.0) -> mechanisms.Mechanism:
    if name == "deepcandidate":  # test_audit_levels' tight pair: utilities differ, so epsilon matters
        return _tight_deepcandidate(epsilon)[0]
    return mechanisms.create(name, epsilon=epsilon, lo=torch.full((8,), -0.5), hi=torch.full((8,), 0.5))


def _release(mech: mechanisms.Mechanism, gen: torch.Generator, n: int) -> torch.Tensor:
    """n releases of one fixed input at the mechanism's level."""
    inputs = torch.Generator().manual_seed(11)
    if mech.level == "label":
        k = AUDIT_KWARGS.get(mech.name, {}).get("num_classes", 4)
        return mech.sanitize(torch.zeros(n, dtype=torch.int64), num_classes=k, generator=gen)  # type: ignore[attr-defined]
    if mech.level == "sentence":
        dim = _sentence_or_label(mech.name)[1]
        x = torch.randn(1, dim, generator=inputs, dtype=torch.float64)
        x = x / x.norm() * 0.9
        return mech.sanitize(x.expand(n, dim).contiguous(), generator=gen)  # type: ignore[attr-defined]
    if mech.level == "word":
        return mech.perturb(torch.full((n,), 42, dtype=torch.int64), gen)  # type: ignore[attr-defined]
    doc = torch.rand(3, 8, generator=inputs, dtype=torch.float64) * 0.5
    if mech.name == "deepcandidate":
        doc = _tight_deepcandidate(1.0)[1]
    blocks = [min(512, n - start) for start in range(0, n, 512)]  # documents per call: bounded memory
    return torch.cat([torch.as_tensor(mech.sanitize([doc] * m, generator=gen)) for m in blocks])  # type: ignore[attr-defined]


def _built(name: str) -> mechanisms.Mechanism:
    level = mechanisms.mechanism_class(name).level
    if level in ("sentence", "label"):
        return _sentence_or_label(name)[0]
    return _word(name) if level == "word" else _document(name)


@pytest.mark.parametrize("name", _levels("sentence", "label", "word", "document"))
def test_every_mechanism_draws_only_from_the_keystream(name: str) -> None:
    """One key, two different torch states: equal releases (no sampler read torch's generator); another
    key: different releases (the keystream is what decides)."""
    mech = _built(name)
    a, b = _gen(name, "key"), _gen(name, "key")
    a.manual_seed(1)
    b.manual_seed(2)
    first, second = _release(mech, a, 600), _release(mech, b, 600)
    assert torch.equal(first, second)
    assert not torch.equal(first, _release(mech, _gen(name, "other"), 600))


def _statistic(release: torch.Tensor) -> np.ndarray:
    """A real statistic of each release: the first coordinate (labels and indices as they are)."""
    flat = release.reshape(release.shape[0], -1).to(torch.float64)
    return flat[:, 0].numpy()


def _same_law(a: np.ndarray, b: np.ndarray) -> float:
    """p-value of 'same law': chi-square on the values of a discrete release, else two-sample KS."""
    values = np.union1d(a, b)
    if values.size <= 200:
        table = np.stack([np.searchsorted(values, a), np.searchsorted(values, b)])
        counts = np.stack([np.bincount(t, minlength=values.size) for t in table])
        counts = counts[:, counts.sum(axis=0) > 0]
        return 1.0 if counts.shape[1] < 2 else float(stats.chi2_contingency(counts).pvalue)
    return float(stats.ks_2samp(a, b).pvalue)


def _rebuilt(name: str, factor: float) -> mechanisms.Mechanism:
    level = mechanisms.mechanism_class(name).level
    if level in ("sentence", "label"):
        params, _, _ = AUDIT_CONFIGS.get(name, FALLBACK)
        return mechanisms.create(name, **{**params, "epsilon": params["epsilon"] * factor})
    eps = {"trlaplace": 3.4}.get(name, 2.0) * factor
    return _word(name, eps) if level == "word" else _document(name, eps)


@pytest.mark.parametrize("name", _levels("sentence", "label", "word", "document"))
def test_every_mechanisms_law_is_the_same_with_the_keystream(name: str) -> None:
    """Releases from the keystream and from torch's generator: one law (p > 1e-4); the same test tells
    the mechanism at 2x epsilon apart (p < 1e-4), so it has the power to see a wrong sampler."""
    n = 20_000
    mech = _built(name)
    secure = _statistic(_release(mech, _gen(name, "law"), n))
    plain = _statistic(_release(mech, torch.Generator().manual_seed(7), n))
    assert _same_law(secure, plain) > ALPHA
    other = _statistic(_release(_rebuilt(name, 2.0), torch.Generator().manual_seed(8), n))
    assert _same_law(secure, other) < ALPHA


@pytest.mark.parametrize("name", _levels("sentence", "label"))
def test_the_privacy_audit_holds_with_the_keystream(name: str) -> None:
    """epsilon_lb <= claimed with secure draws, and most of the claim on the tight pairs (N = 5e4: the
    torch-generator audits reach these fractions at 2e5, see test_audit)."""
    params, dim, frac = AUDIT_CONFIGS.get(name, FALLBACK)
    mech = mechanisms.create(name, **params)
    result = audit_mechanism(mech, 50_000, seed=1, dim=max(dim, 2), secure=True, **AUDIT_KWARGS.get(name, {}))
    assert result.claimed_epsilon is not None and math.isfinite(result.claimed_epsilon)
    assert result.epsilon_lb <= result.claimed_epsilon, result.to_dict()
    assert result.epsilon_lb >= 0.8 * frac * result.claimed_epsilon, result.to_dict()
