"""Statistical tests of the public-class release ``class_rr`` (``mechanisms/class_rr.py``;
docs/SPEC.md §16.5-16.6).

The oracle law is written again here from the definition, not taken from the
module: P(S | c) = e^eps / Z if c is in S, 1 / Z otherwise, with
Z = C(K-1, s-1) e^eps + C(K-1, s), over the C(K, s) sets S of s classes in
lexicographic order. The class rule is checked against numpy. Each statistical
test has a power check: a deliberately wrong sampler (or law) must fail it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import mechanisms
from mechanisms import ClassRR, RandomizedResponse
from mechanisms.audit import audit_mechanism, default_pair
from mechanisms.class_rr import sum_zero_basis
from mechanisms.guarantee import Guarantee
from tests.support.label_law import check_law, check_ratio

PER_INPUT = 20_000


def _oracle_law(k: int, s: int, eps: float) -> np.ndarray:
    """[K, C(K, s)] exact P(S_j | c = i) from the definition (S_j in itertools.combinations order)."""
    z = math.comb(k - 1, s - 1) * math.exp(eps) + math.comb(k - 1, s)
    subsets = list(itertools.combinations(range(k), s))
    return np.array([[(math.exp(eps) if c in subset else 1.0) / z for subset in subsets] for c in range(k)])


def _class_inputs(k: int, d: int, per_input: int) -> torch.Tensor:
    """[K * per_input, d] rows whose public class is 0, ..., K-1 in turn (K = 2: -e1 / e1; else the
    sum-zero coordinates H^T e_c of class c's indicator, whose logits are e_c - 1/K), perturbed by small
    noise in every coordinate that keeps the class."""
    base = torch.zeros(k, d, dtype=torch.float64)
    if k == 2:
        base[0, 0], base[1, 0] = -1.0, 1.0
    else:
        base[:, : k - 1] = _helmert(k)
    noise = 0.05 * torch.rand(k * per_input, d, generator=torch.Generator().manual_seed(k), dtype=torch.float64)
    return base.repeat_interleave(per_input, dim=0) + noise


def _helmert(k: int) -> torch.Tensor:
    """The sum-zero basis written independently: Gram-Schmidt on e_j - e_{j+1}, made to match the sign
    convention (column j - 1 ends in -j / sqrt(j (j + 1)) at row j)."""
    vs = np.zeros((k, k - 1))
    for j in range(1, k):
        v = np.zeros(k)
        v[:j], v[j] = 1.0, -j
        vs[:, j - 1] = v / np.linalg.norm(v)
    return torch.as_tensor(vs)


# --------------------------------------------------------------------------- the class rule
@pytest.mark.parametrize("k", [2, 3, 4, 7])
def test_sum_zero_basis_is_orthonormal_and_sums_to_zero(k: int) -> None:
    """The basis the supervised map writes K > 2 logits in: orthonormal columns that sum to 0, so H H^T is
    the centring projection; catches a QR-based basis whose signs may differ between machines."""
    h = sum_zero_basis(k)
    assert torch.allclose(h.T @ h, torch.eye(k - 1, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(h.sum(dim=0), torch.zeros(k - 1, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(h @ h.T, torch.eye(k, dtype=torch.float64) - 1.0 / k, atol=1e-12)
    assert torch.allclose(h, _helmert(k), atol=1e-12)


def test_binary_class_is_the_sign_of_the_logit() -> None:
    """K = 2: c = 1{x_0 > 0} (x_0 = 0 is class 0), whatever the other coordinates; invariant to a positive
    scale; a zero row (or one of norm < 1e-12) is e1, class 1. Catches argmax over two coordinates
    (the supervised map has one logit for two classes) and a flipped sign."""
    mech = ClassRR(1.0, num_classes=2)
    x = torch.randn(500, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x[:, 1:] *= 100.0  # large other coordinates must not matter
    x[:10, 0] = 0.0
    expected = (x[:, 0].numpy() > 0).astype(np.int64)
    assert np.array_equal(mech.public_class(x).numpy(), expected)
    assert np.array_equal(mech.public_class(x * 1e-6).numpy(), expected)
    assert np.array_equal(mech.public_class(x.float()).numpy(), expected)
    tiny = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0], [-1e-13, 0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    assert mech.public_class(tiny).tolist() == [1, 1]


@pytest.mark.parametrize("k", [3, 4, 10])
def test_multiclass_class_is_argmax_of_the_logits_read_back_from_the_basis(k: int) -> None:
    """K > 2: c = argmax of the K logits H x[:K-1], ignoring the
    later coordinates (principal directions and the constant of the supervised map); zero rows are class 0.
    Catches an argmax over the raw coordinates (which are not logits for K > 2)."""
    mech = ClassRR(1.0, num_classes=k)
    logits = torch.randn(1000, k, generator=torch.Generator().manual_seed(k), dtype=torch.float64)
    # (no exact ties: the logits come back through a rotation, so a tie is decided by rounding, and real
    # logits tie with probability 0)
    x = torch.cat([logits @ _helmert(k), 50.0 + torch.zeros(1000, 4, dtype=torch.float64)], dim=1)
    expected = np.argmax(logits.numpy(), axis=1)
    assert (np.argmax(x[:, :k].numpy(), axis=1) != expected).any()  # the raw coordinates would disagree
    assert np.array_equal(mech.public_class(x).numpy(), expected)
    assert np.array_equal(mech.public_class(3.0 * x).numpy(), expected)
    assert mech.public_class(torch.zeros(2, k + 3)).tolist() == [0, 0]
    assert torch.equal(mech.clean(x), torch.nn.functional.one_hot(torch.as_tensor(expected), k).double())


# --------------------------------------------------------------------------- the exact law
LAW_SHAPES = [(2, 1), (3, 1), (4, 1), (4, 2), (4, 3), (5, 2), (6, 3)]


@pytest.mark.parametrize(("k", "s"), LAW_SHAPES)
@pytest.mark.parametrize("eps", [0.1, 2.0, 30.0])
def test_exact_law_matches_definition_and_ratio_is_exactly_eps(k: int, s: int, eps: float) -> None:
    """``log_transition_matrix`` is the oracle law (rel. 1e-12), its columns are ``subsets`` (lexicographic),
    rows sum to 1, and the largest log-ratio over inputs of any release is exactly eps (tight, s < K).
    For s = 1 it is K-RR's matrix. Power: the law at 3 eps fails the e^eps bound of the same check."""
    mech = ClassRR(eps, num_classes=k, subset_size=s)
    log_p = mech.log_transition_matrix()
    assert mech.subsets == tuple(itertools.combinations(range(k), s))
    assert log_p.shape == (k, math.comb(k, s)) and log_p.dtype == torch.float64
    np.testing.assert_allclose(log_p.exp().numpy(), _oracle_law(k, s, eps), rtol=1e-12, atol=0)
    ratio = check_ratio(log_p)
    assert ratio.normalised and ratio.bounded_by(eps)
    assert ratio.max_log_ratio == pytest.approx(eps, rel=1e-12)
    if s == 1:
        assert torch.equal(log_p, RandomizedResponse(eps).log_transition_matrix(k))
    assert mech.keep_probability == pytest.approx(float(_oracle_law(k, s, eps)[0][: math.comb(k - 1, s - 1)].sum()))
    wrong = check_ratio(ClassRR(3 * eps, num_classes=k, subset_size=s).log_transition_matrix())
    assert not wrong.bounded_by(eps) and wrong.max_log_ratio == pytest.approx(3 * eps, rel=1e-12)


def test_law_is_finite_at_huge_epsilon() -> None:
    """At eps = 1000 the log-law stays finite (the linear probabilities of the excluded sets underflow)."""
    log_p = ClassRR(1000.0, num_classes=5, subset_size=2).log_transition_matrix()
    assert bool(torch.isfinite(log_p).all())
    assert check_ratio(log_p).max_log_ratio == pytest.approx(1000.0, rel=1e-12)


# --------------------------------------------------------------------------- the sampler
class WrongKeepClassRR(ClassRR):
    """Test double: keeps c in S with K-RR's e^eps / (e^eps + K - 1) whatever s (the s = 1 formula)."""

    @property
    def keep_probability(self) -> float:
        return 1.0 / (1.0 + (self.num_classes - 1) * math.exp(-self.epsilon))


class DoubleEpsClassRR(ClassRR):
    """Test double: claims epsilon, samples at 2 * epsilon (s = 1 through K-RR, s > 1 through pi)."""

    def __init__(self, epsilon: float, num_classes: int, subset_size: int = 1) -> None:
        super().__init__(epsilon, num_classes, subset_size)
        self._sampler = ClassRR(2 * epsilon, num_classes, subset_size)

    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return self._sampler.sanitize(x, generator)


def _counts(mech: ClassRR, d: int, seed: int) -> np.ndarray:
    """[K, C(K, s)] release counts of PER_INPUT rows of each public class."""
    k = mech.num_classes
    x = _class_inputs(k, d, PER_INPUT)
    assert torch.equal(mech.public_class(x), torch.arange(k).repeat_interleave(PER_INPUT))
    out = mech.sanitize(x, generator=torch.Generator().manual_seed(seed))
    idx = mech.subset_index(out).reshape(k, PER_INPUT)
    return np.stack([np.bincount(row.numpy(), minlength=len(mech.subsets)) for row in idx])


SAMPLER_CASES = [(2, 1, 0.5), (2, 1, 2.0), (4, 1, 1.0), (4, 2, 1.0), (4, 2, 3.0), (5, 3, 2.0), (6, 2, 0.5)]


@pytest.mark.parametrize(("k", "s", "eps"), SAMPLER_CASES)
def test_sampler_matches_the_exact_law(k: int, s: int, eps: float) -> None:
    """Release counts of 2e4 rows per public class against the oracle law: nothing outside the support,
    every cell inside its Clopper-Pearson interval (Bonferroni, family-wise 1e-4), pooled chi-square
    p > 1e-4. Catches a wrong keep probability, non-uniform other classes, a release of the wrong class."""
    mech = ClassRR(eps, num_classes=k, subset_size=s)
    result = check_law(_counts(mech, k + 2, seed=10 * k + s), _oracle_law(k, s, eps))
    assert result.passed, result


@pytest.mark.parametrize(
    ("wrong", "k", "s", "eps"),
    [("s = 1 keep rate", 4, 2, 1.0), ("s = 1 keep rate", 6, 3, 0.5), ("2 eps", 2, 1, 0.5), ("2 eps", 4, 2, 1.0)],
)
def test_sampler_check_has_power(wrong: str, k: int, s: int, eps: float) -> None:
    """Power: the same check (same sample size) rejects a subset sampler keeping c with K-RR's
    probability instead of s e^eps / (s e^eps + K - s), and samplers at twice the epsilon."""
    mech = WrongKeepClassRR(eps, k, s) if wrong.startswith("s = 1") else DoubleEpsClassRR(eps, k, s)
    result = check_law(_counts(mech, k + 2, seed=10 * k + s), _oracle_law(k, s, eps))
    assert not result.passed and result.chi2_p < 1e-6, result


@pytest.mark.parametrize(("k", "s"), [(2, 1), (4, 2), (6, 3), (7, 1), (10, 4)])
def test_subset_index_ranks_every_subset(k: int, s: int) -> None:
    """``subset_index`` of the indicator of the j-th set of itertools.combinations is j (the lexicographic
    rank the chi-square counts and ``log_probability`` rely on), and the law's column j is larger exactly
    on the classes of that set. Catches a rank formula off by one set or in colexicographic order."""
    mech = ClassRR(1.0, num_classes=k, subset_size=s)
    subsets = list(itertools.combinations(range(k), s))
    rows = torch.zeros(len(subsets), k)
    for j, subset in enumerate(subsets):
        rows[j, list(subset)] = 1.0
    assert torch.equal(mech.subset_index(rows), torch.arange(len(subsets)))
    law = mech.log_transition_matrix()
    assert torch.equal(law > law.min(dim=0).values, rows.T.bool())


@pytest.mark.parametrize(("k", "s"), [(2, 1), (4, 2), (5, 3)])
def test_log_probability_of_releases(k: int, s: int) -> None:
    """``log_probability`` of sampled releases is the law's entry at (c(x), subset_index(release));
    a row that is not the indicator of s classes gets -inf; ``log_output_probabilities`` is the law's row."""
    mech = ClassRR(1.5, num_classes=k, subset_size=s)
    x = _class_inputs(k, k + 1, 50)
    out = mech.sanitize(x, generator=torch.Generator().manual_seed(1))
    law = mech.log_transition_matrix()
    expected = law[mech.public_class(x), mech.subset_index(out)]
    assert torch.equal(mech.log_probability(x, out), expected)
    assert torch.equal(mech.log_output_probabilities(x), law[mech.public_class(x)])
    bad = torch.zeros(2, k, dtype=torch.float64)
    bad[1] = 1.0
    assert torch.isneginf(mech.log_probability(x[:2], bad)).all()
    with pytest.raises(ValueError, match="shape"):
        mech.log_probability(x, out[:, :1])
    with pytest.raises(ValueError, match="indicator"):
        mech.subset_index(bad)


# --------------------------------------------------------------------------- shapes and inputs
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("k", "s"), [(2, 1), (4, 2)])
def test_release_shape_and_dtype(dtype: torch.dtype, k: int, s: int) -> None:
    """A release is a [n, K] 0/1 row of the input's dtype with s ones; ``output_dim(d) = K``; an empty
    batch gives [0, K]; the guarantee is pure eps per sentence."""
    mech = mechanisms.create("class_rr", epsilon=1.0, num_classes=k, subset_size=s)
    x = torch.randn(300, 7, generator=torch.Generator().manual_seed(2)).to(dtype)
    out = mech.sanitize(x, generator=torch.Generator().manual_seed(3))
    assert out.shape == (300, k) and out.dtype == dtype and not out.requires_grad
    assert bool(((out == 0) | (out == 1)).all()) and bool((out.sum(dim=1) == s).all())
    assert mech.output_dim(7) == k and mech.sanitize(torch.zeros(0, 7)).shape == (0, k)
    stated = Guarantee(notion="pure", epsilon=1.0, granularity="sentence")
    assert mech.guarantee.to_dict() == stated.to_dict()
    # one class per release is K-ary randomized response (its exact account); a larger subset is not
    kind = ("randomized_response", k) if s == 1 else (None, None)
    assert (mech.guarantee.accounting, mech.guarantee.buckets) == kind
    assert mech.level == "sentence" and "class_rr" in mechanisms.names()


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_bad_epsilon_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        ClassRR(bad, num_classes=2)


def test_bad_parameters_are_refused() -> None:
    """num_classes >= 2 (an integer), 1 <= subset_size < K, and d >= K (K > 2) or d >= 2 (K = 2)."""
    for k in (1, 0, 2.0, True):
        with pytest.raises(ValueError, match="num_classes"):
            ClassRR(1.0, num_classes=k)  # type: ignore[arg-type]
    for s in (0, 4, 5, 1.0, True):
        with pytest.raises(ValueError, match="subset_size"):
            ClassRR(1.0, num_classes=4, subset_size=s)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="input dimension must be >= 5, got 4"):
        ClassRR(1.0, num_classes=5).sanitize(torch.ones(3, 4))
    with pytest.raises(ValueError, match="input dimension must be >= 5, got 3"):
        ClassRR(1.0, num_classes=5, input_dim=3)
    with pytest.raises(ValueError, match="m >= 2"):
        ClassRR(1.0, num_classes=2).sanitize(torch.ones(3, 1))
    with pytest.raises(ValueError, match="does not match the input_dim 6"):
        ClassRR(1.0, num_classes=3, input_dim=6).sanitize(torch.ones(3, 5))
    with pytest.raises(ValueError, match="NaN or infinite"):
        ClassRR(1.0, num_classes=2).sanitize(torch.tensor([[math.nan, 1.0]]))
    with pytest.raises(ValueError, match="too many"):
        ClassRR(1.0, num_classes=40, subset_size=20).log_transition_matrix()


def test_reproducible_with_a_seeded_generator() -> None:
    mech = ClassRR(1.0, num_classes=4, subset_size=2)
    x = torch.randn(200, 6, generator=torch.Generator().manual_seed(4))
    a = mech.sanitize(x, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, mech.sanitize(x, generator=torch.Generator().manual_seed(5)))
    assert not torch.equal(a, mech.sanitize(x, generator=torch.Generator().manual_seed(6)))


# --------------------------------------------------------------------------- audit
AUDIT_CASES = [(2, 1), (4, 1), (4, 2)]


@pytest.mark.parametrize(("k", "s"), AUDIT_CASES)
def test_audit_lower_bound_respects_epsilon_and_is_tight(k: int, s: int) -> None:
    """mechanisms.audit on the mechanism's stated pair (public classes 0 and 1, ``default_audit_pair``) gives
    epsilon_lb <= eps = 2 and >= 0.9 eps (the pair is tight: the event "class 0 released, class 1 not" has
    ratio e^eps). Power: a sampler at 2 eps is refuted against the 1x claim."""
    mech = ClassRR(2.0, num_classes=k, subset_size=s)
    x, x_prime = default_pair(mech, k + 2)
    assert mech.public_class(torch.stack([x, x_prime])).tolist() == [0, 1]
    result = audit_mechanism(mech, 100_000, seed=1, dim=k + 2)
    assert (result.input_dim, result.output_dim) == (k + 2, k)
    assert 0.9 * 2.0 <= result.epsilon_lb <= 2.0, result.to_dict()
    broken = audit_mechanism(DoubleEpsClassRR(2.0, k, s), 100_000, seed=1, dim=k + 2)
    assert broken.epsilon_lb > 1.3 * 2.0, broken.to_dict()
