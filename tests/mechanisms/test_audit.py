"""Empirical privacy audit (docs/SPEC.md §11.1 item 8): epsilon_lb <= claimed epsilon.

The audit is a sanity lower bound, not a proof (see ``mechanisms/audit/``).
These tests check three things:

* every registered private sentence/label mechanism passes its audit, and the
  audit is not vacuous: on the tight pairs (Purkayastha and planar Laplace on
  x' = -x, RR on two labels, RR-with-prior on two labels of its top-k* set
  under a non-uniform public prior) epsilon_lb reaches most of the claimed
  epsilon;
* power: a mechanism that samples with 3x its stated epsilon (or a third of its
  noise) is caught, epsilon_lb > claimed (sphere, additive, PrivEmb and label
  mechanisms, RR-with-prior audited under its prior);
* the statistics: Clopper-Pearson bounds against scipy's exact binomial CI,
  the Bonferroni level, delta handling, and the coverage of the bound.

Every audit uses a fixed seed, so every figure below is deterministic. The
figures in comments are what the default seeds gave (N = 2e5 per input).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms import (
    ClassRR,
    ClippedGaussian,
    ClippedLaplace,
    LabelPrior,
    PlanarLaplace,
    PrivEmb,
    PrivUnit,
    Purkayastha,
    RandomizedResponse,
    RRWithPrior,
)
from mechanisms.audit import (
    AuditResult,
    audit_mechanism,
    audit_pair,
    claimed_epsilon,
    clopper_pearson,
    cp_lower,
    cp_upper,
    default_pair,
    threshold_audit,
)
from mechanisms.base import SentenceMechanism, normalize_rows
from mechanisms.guarantee import Guarantee
from mechanisms.noise import gamma_radius_noise
from mechanisms.rr_prior import top_k_sets

N = 200_000
SEED = 1

# name -> (constructor parameters, input dimension, minimal epsilon_lb / claimed).
# Small m: the privacy loss of the sphere mechanisms reaches eps * d(x, x') only on
# outputs near x, whose mass shrinks like sin^(m-2); at m = 2 the audit is nearly
# tight. Fractions reached at N = 2e5 over seeds 0..5: purkayastha 0.91-0.93,
# planar_laplace 0.88-0.90, laplace 0.77-0.80, gaussian 0.62-0.73, privemb
# (out_dim 3) 0.78-0.81, rr 0.99-1.00, rr_prior under RR_PRIOR 0.99 (seeds 0..3),
# privunit (m = 8) 0.98-0.99, class_rr (K = 4, s = 2) 0.98-1.00.
AUDIT_CONFIGS: dict[str, tuple[dict, int, float]] = {
    "purkayastha": ({"epsilon": 0.5}, 2, 0.8),  # claimed pi * 0.5 = 1.571
    "planar_laplace": ({"epsilon": 1.0}, 2, 0.8),  # claimed 2 * 1.0
    "laplace": ({"epsilon": 2.0}, 2, 0.6),
    "gaussian": ({"epsilon": 2.0}, 2, 0.5),  # (2, 1e-5): delta subtracted
    "privemb": ({"epsilon": 1.0, "out_dim": 3}, 2, 0.65),  # output dim 3 != input dim 2
    # Pure eps on (x, -x): the cap event {<V, x> >= gamma} has ratio e^eps exactly (tight at any d).
    "privunit": ({"epsilon": 2.0}, 8, 0.9),
    # Pure eps on two inputs of public classes 0 and 1 (ClassRR.default_audit_pair): tight.
    "class_rr": ({"epsilon": 2.0, "num_classes": 4, "subset_size": 2}, 4, 0.95),
    "rr": ({"epsilon": 2.0}, 0, 0.95),
    "rr_prior": ({"epsilon": 2.0}, 0, 0.95),  # under RR_PRIOR, see AUDIT_KWARGS
}
# A public prior over K = 5 labels with k* = 3 at epsilon 2 (Y_k* = {0, 1, 2}): the
# default pair (0, 1) lies inside the top-k* set, where P[0 | 0] / P[0 | 1] = e^eps
# exactly (the tight pair); labels 3 and 4 are output uniformly over the set.
RR_PRIOR = (0.45, 0.35, 0.10, 0.05, 0.05)
# Extra audit_mechanism arguments per mechanism.
AUDIT_KWARGS: dict[str, dict] = {"rr_prior": {"num_classes": 5, "prior": RR_PRIOR}}
# A mechanism registered later without a config is audited with these defaults
# (the upper check only).
FALLBACK = ({"epsilon": 1.0}, 4, 0.0)


def _audited_names() -> list[str]:
    out = []
    for name in mechanisms.names():
        if name == "none":
            continue
        if mechanisms.mechanism_class(name).level in ("sentence", "label"):
            out.append(name)
    return out


def _create(name: str) -> tuple[mechanisms.Mechanism, int, float]:
    params, dim, frac = AUDIT_CONFIGS.get(name, FALLBACK)
    try:
        mech = mechanisms.create(name, **params)
    except ValueError as err:
        pytest.fail(f"cannot build {name!r} with {params}: add it to AUDIT_CONFIGS ({err})")
    assert mech.guarantee.is_private
    return mech, dim, frac


@pytest.mark.parametrize("name", _audited_names())
def test_audit_respects_claim_and_has_power(name: str) -> None:
    """epsilon_lb <= claimed for every private sentence/label mechanism, and a
    substantial fraction of it on the tight pairs. Catches a mechanism whose
    noise is too small for its stated guarantee (upper check) and an audit that
    has lost its power, e.g. a wrong direction or threshold grid (lower check)."""
    mech, dim, frac = _create(name)
    result = audit_mechanism(mech, N, seed=SEED, dim=max(dim, 2), **AUDIT_KWARGS.get(name, {}))
    assert result.claimed_epsilon is not None and math.isfinite(result.claimed_epsilon)
    assert result.epsilon_lb <= result.claimed_epsilon, result.to_dict()
    assert result.consistent
    assert result.epsilon_lb >= frac * result.claimed_epsilon, result.to_dict()


@pytest.mark.parametrize("name", [n for n in _audited_names() if mechanisms.mechanism_class(n).level == "sentence"])
def test_audit_respects_claim_at_m16(name: str) -> None:
    """The same upper check at m = 16 (the audit only loses power there)."""
    mech, _, _ = _create(name)
    result = audit_mechanism(mech, N // 2, seed=SEED, dim=16)
    assert result.input_dim == 16
    assert 0.0 < result.epsilon_lb <= result.claimed_epsilon, result.to_dict()


# --------------------------------------------------------------------------- power checks
class TooLittlePurkayastha(Purkayastha):
    """Claims epsilon, samples with 3 * epsilon."""

    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return Purkayastha(3 * self.epsilon).sanitize(x, generator)


class TooLittlePlanarLaplace(PlanarLaplace):
    """Claims epsilon, samples with 3 * epsilon."""

    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return PlanarLaplace(3 * self.epsilon).sanitize(x, generator)


class TooLittleLaplace(ClippedLaplace):
    """Laplace scale a third of 2C sqrt(d) / epsilon."""

    def scale(self, dim: int) -> float:
        return super().scale(dim) / 3


class TooLittleGaussian(ClippedGaussian):
    """Analytic-Gaussian sigma divided by 3."""

    def __init__(self, epsilon: float, delta: float = 1e-5, clip: float = 1.0) -> None:
        super().__init__(epsilon, delta, clip)
        self.sigma /= 3


class TooLittleRR(RandomizedResponse):
    """Claims epsilon, keeps the label with the probability of 3 * epsilon."""

    def sanitize(self, y: torch.Tensor, num_classes: int, generator: torch.Generator | None = None) -> torch.Tensor:
        return RandomizedResponse(3 * self.epsilon).sanitize(y, num_classes, generator)


class TooLittleRRPrior(RRWithPrior):
    """Claims epsilon, samples RR-with-prior at 3 * epsilon (with the prior it is given)."""

    def sanitize(
        self,
        y: torch.Tensor,
        num_classes: int,
        generator: torch.Generator | None = None,
        prior: LabelPrior | None = None,
    ) -> torch.Tensor:
        return RRWithPrior(3 * self.epsilon).sanitize(y, num_classes, generator, prior)


class TooLittlePrivUnit(PrivUnit):
    """Claims epsilon, samples PrivUnit2 at 3 * epsilon (its split re-optimised at 3 epsilon)."""

    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return PrivUnit(3 * self.epsilon).sanitize(x, generator)


class TooLittleClassRR(ClassRR):
    """Claims epsilon, releases the public class by subset selection at 3 * epsilon."""

    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return ClassRR(3 * self.epsilon, self.num_classes, self.subset_size).sanitize(x, generator)


class TooLittlePrivEmb(PrivEmb):
    """PrivEmb whose Gamma-norm noise scale is a third of L / epsilon."""

    @property
    def noise_scale(self) -> float:
        return super().noise_scale / 3


# (mechanism, dim, extra audit arguments); epsilon_lb / claimed at N = 2e5 over seeds 0..5 in comments.
BROKEN = {
    "purkayastha": (TooLittlePurkayastha(0.5), 2, {}),  # 2.79-2.84
    "planar_laplace_m16": (TooLittlePlanarLaplace(0.5), 16, {}),  # 1.72-2.06
    "laplace": (TooLittleLaplace(2.0), 4, {}),  # 2.00-2.05
    "gaussian_m16": (TooLittleGaussian(1.0), 16, {}),  # 2.14-2.23
    "privemb": (TooLittlePrivEmb(1.0, out_dim=3), 2, {}),  # 2.39-2.44 (seeds 0..3)
    "privunit": (TooLittlePrivUnit(1.0), 8, {}),  # 2.94-2.97
    "class_rr": (TooLittleClassRR(1.0, num_classes=4, subset_size=2), 4, {}),  # 2.97-2.98
    "rr": (TooLittleRR(1.0), 0, {}),  # 2.97-2.99
    "rr_prior": (TooLittleRRPrior(2.0), 0, AUDIT_KWARGS["rr_prior"]),  # 2.93-2.99 (seeds 0..3)
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_audit_catches_too_little_noise(case: str) -> None:
    """Power: a sampler with 3x the epsilon it states (a third of its noise) is refuted
    (epsilon_lb > claimed); RR-with-prior is audited under its non-uniform prior."""
    mech, dim, kwargs = BROKEN[case]
    result = audit_mechanism(mech, N, seed=SEED, dim=max(dim, 2), **kwargs)
    assert result.epsilon_lb > 1.3 * result.claimed_epsilon, result.to_dict()
    assert not result.consistent


def test_every_audited_mechanism_has_a_power_check() -> None:
    """Every registered private sentence/label mechanism has a deliberately broken variant in
    BROKEN (catches a mechanism added to the audit without its power check)."""
    covered = {case.split("_m16")[0] for case in BROKEN}
    assert set(_audited_names()) <= covered, set(_audited_names()) - covered


def test_rr_prior_audit_uses_the_tight_pair() -> None:
    """The rr_prior audit configuration is what it claims: RR_PRIOR is not uniform, its k* at
    epsilon 2 is 3 < K, the pair (0, 1) lies in the top-k* set, and the mechanism's own law gives
    log P[0 | 0] - log P[0 | 1] = epsilon exactly there."""
    eps = AUDIT_CONFIGS["rr_prior"][0]["epsilon"]
    k = AUDIT_KWARGS["rr_prior"]["num_classes"]
    probs = torch.tensor([RR_PRIOR], dtype=torch.float64)
    order, k_star = top_k_sets(probs, eps)
    assert len(set(RR_PRIOR)) > 1 and int(k_star) == 3 < k
    assert {0, 1} <= set(order[0, : int(k_star)].tolist())
    law = RRWithPrior(eps).log_output_probabilities(torch.tensor([0, 1]), k, LabelPrior(probs.expand(2, k), "public"))
    assert float(law[0, 0] - law[1, 0]) == pytest.approx(eps, rel=1e-12)


def test_audit_passes_the_prior_to_the_mechanism() -> None:
    """With the prior, labels 0 (in Y_k*) and 4 (outside: uniform over Y_k*) are audited against
    the law the prior implies: epsilon_lb stays below the largest log-ratio of the events
    {out == 0} and {out != 0} computed from the mechanism's own probabilities (1.14 < eps = 2)
    and reaches 90% of it; without the prior (plain RR) the same pair gives about eps. Catches
    an audit that drops the prior."""
    mech, eps, k = RRWithPrior(2.0), 2.0, 5
    prior = LabelPrior(torch.tensor([RR_PRIOR], dtype=torch.float64).expand(2, k), "public")
    p = mech.output_probabilities(torch.tensor([0, 4]), k, prior)[:, 0].tolist()
    bound = max(abs(math.log(p[0] / p[1])), abs(math.log((1 - p[0]) / (1 - p[1]))))
    assert bound < 0.6 * eps
    with_prior = audit_mechanism(mech, N, seed=SEED, num_classes=k, pair=(0, 4), prior=RR_PRIOR)
    assert 0.9 * bound <= with_prior.epsilon_lb <= bound, with_prior.to_dict()
    assert with_prior.prior == pytest.approx(list(RR_PRIOR))
    without = audit_mechanism(mech, N, seed=SEED, num_classes=k, pair=(0, 4))
    assert without.epsilon_lb >= 0.95 * eps and without.prior is None


def test_audit_prior_is_checked() -> None:
    """A prior is refused for a mechanism that takes none, for sentence mechanisms, and when it
    is not K finite non-negative numbers with a positive sum; it is normalised."""
    with pytest.raises(ValueError, match="does not take a label prior"):
        audit_mechanism(RandomizedResponse(1.0), 100, num_classes=5, prior=RR_PRIOR)
    with pytest.raises(ValueError, match="label mechanisms"):
        audit_mechanism(Purkayastha(1.0), 100, prior=RR_PRIOR)
    for bad in ([0.5, 0.5], [0.5, -0.1, 0.2, 0.2, 0.2], [math.nan, 1, 1, 1, 1], [0, 0, 0, 0, 0]):
        with pytest.raises(ValueError, match="prior"):
            audit_mechanism(RRWithPrior(1.0), 100, num_classes=5, prior=bad)
    res = audit_mechanism(RRWithPrior(1.0), 1000, num_classes=5, prior=[9, 7, 2, 1, 1])
    assert res.prior == pytest.approx(list(RR_PRIOR))
    json.dumps(res.to_dict(), allow_nan=False)


# --------------------------------------------------------------------------- other output dimensions
class ProjectedLaplace(SentenceMechanism):
    """Test double of a projecting mechanism: w = Phi x + Gamma-norm noise of scale
    sigma_max(Phi) / epsilon, Phi public [k, m]: epsilon * d_2-LDP on the sphere."""

    name = "test_projected_laplace"

    def __init__(self, epsilon: float, m: int, k: int) -> None:
        self.epsilon = epsilon
        self.phi = torch.randn(k, m, dtype=torch.float64, generator=torch.Generator().manual_seed(7)) / math.sqrt(k)
        self.lipschitz = float(torch.linalg.matrix_norm(self.phi, ord=2))

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(notion="metric", epsilon=self.epsilon, metric="euclidean", diameter=2.0)

    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        x = normalize_rows(x.to(torch.float64))
        k = self.phi.shape[0]
        return x @ self.phi.T + gamma_radius_noise(x.shape[0], k, self.lipschitz / self.epsilon, generator, x.device)


def test_audit_output_dimension_differs() -> None:
    """Releases of another dimension than the input are audited through the pilot
    projection; the pair is the direction Phi stretches most (+-v1)."""
    mech = ProjectedLaplace(1.0, m=16, k=5)
    x, x_prime = default_pair(mech, 16)
    v1 = torch.linalg.svd(mech.phi).Vh[0]
    assert abs(float(x @ v1)) == pytest.approx(1.0, abs=1e-12)
    assert torch.equal(x_prime, -x)
    result = audit_mechanism(mech, N, seed=SEED, dim=16)
    assert (result.input_dim, result.output_dim) == (16, 5)
    assert result.claimed_epsilon == pytest.approx(2.0)
    assert 0.5 * result.claimed_epsilon <= result.epsilon_lb <= result.claimed_epsilon, result.to_dict()


def test_audit_output_dimension_differs_has_power() -> None:
    """Power: the same projecting mechanism with a third of its noise is refuted through the
    same pilot projection (epsilon_lb > 1.3 * claimed)."""
    mech = ProjectedLaplace(1.0, m=16, k=5)
    mech.lipschitz /= 3
    result = audit_mechanism(mech, N, seed=SEED, dim=16)
    assert result.epsilon_lb > 1.3 * result.claimed_epsilon, result.to_dict()


# --------------------------------------------------------------------------- the statistics
@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (5, 10), (10, 10), (3, 1000), (997, 1000), (40, 123456)])
@pytest.mark.parametrize("confidence", [0.95, 0.999])
def test_clopper_pearson_matches_scipy(k: int, n: int, confidence: float) -> None:
    """Two-sided and one-sided bounds equal scipy's exact binomial CI."""
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    lo, hi = clopper_pearson(k, n, alpha=1 - confidence)
    assert float(lo) == pytest.approx(ref.low, rel=1e-7, abs=1e-15)
    assert float(hi) == pytest.approx(ref.high, rel=1e-7, abs=1e-15)
    greater = stats.binomtest(k, n, alternative="greater").proportion_ci(confidence, method="exact")
    less = stats.binomtest(k, n, alternative="less").proportion_ci(confidence, method="exact")
    assert float(cp_lower(k, n, 1 - confidence)) == pytest.approx(greater.low, rel=1e-7, abs=1e-15)
    assert float(cp_upper(k, n, 1 - confidence)) == pytest.approx(less.high, rel=1e-7, abs=1e-15)


def test_clopper_pearson_known_values() -> None:
    """Closed forms at the edges: k = 0 gives [0, 1 - (a/2)^(1/n)], k = n the mirror."""
    lo, hi = clopper_pearson(np.array([0, 20]), 20, alpha=0.05)
    assert lo[0] == 0.0 and hi[1] == 1.0
    assert hi[0] == pytest.approx(1 - 0.025 ** (1 / 20), rel=1e-12)
    assert lo[1] == pytest.approx(0.025 ** (1 / 20), rel=1e-12)


def test_threshold_audit_bonferroni_and_delta() -> None:
    """Each bound is at alpha / (4 * #thresholds); delta is subtracted from TPR_lo;
    candidates with a non-positive numerator are skipped (epsilon_lb = 0)."""
    n, thresholds = 10_000, np.array([0.0, 1.0, 2.0])
    kx, kp = np.array([9000, 5000, 2000]), np.array([1000, 300, 20])
    res = threshold_audit(kx, kp, n, thresholds, delta=0.0, alpha=0.05)
    level = 0.05 / 12
    expected = np.log(cp_lower(kx, n, level) / cp_upper(kp, n, level))
    # Lower tail, positive x': (n - kp) vs (n - kx).
    expected_low = np.log((1 - cp_upper(kp, n, level)) / (1 - cp_lower(kx, n, level)))
    assert res.epsilon_lb == pytest.approx(max(expected.max(), expected_low.max()), rel=1e-12)
    assert (res.threshold, res.tail, res.positive) == (2.0, "upper", "x")
    assert (res.count_positive, res.count_negative) == (2000, 20)
    assert res.epsilon_hat == pytest.approx(math.log(100))

    with_delta = threshold_audit(kx, kp, n, thresholds, delta=0.05, alpha=0.05)
    assert with_delta.epsilon_lb == pytest.approx(
        np.log((cp_lower(2000, n, level) - 0.05) / cp_upper(20, n, level)), rel=1e-12
    )
    # delta above every TPR: nothing left, the trivial bound 0.
    none_left = threshold_audit(np.array([100]), np.array([100]), n, np.array([0.0]), delta=0.99)
    assert none_left.epsilon_lb == 0.0 and none_left.threshold is None


def test_identical_distributions_give_zero() -> None:
    """Two identical output laws: the bound stays at 0 (no false alarm)."""

    def draw(n: int, gen: torch.Generator) -> torch.Tensor:
        return torch.randn(n, 3, generator=gen, dtype=torch.float64)

    res = audit_pair(draw, draw, 100_000, seed=SEED, claimed_epsilon=0.0)
    assert res.epsilon_lb == 0.0 and res.consistent


def test_bound_coverage_on_tight_rr() -> None:
    """Coverage: on exactly tight RR, P[epsilon_lb > epsilon] <= alpha. With
    alpha = 0.2 over 300 seeds, at most 60 + 3 sd exceedances (the exact bounds
    give 9). Power: plugging in point estimates instead of confidence bounds
    (``epsilon_hat`` of the same runs) exceeds that limit (186 exceedances)."""
    eps, alpha, runs = 1.0, 0.2, 300
    mech = RandomizedResponse(eps)
    results = [audit_mechanism(mech, 300, seed=s, alpha=alpha) for s in range(runs)]
    limit = runs * alpha + 3 * math.sqrt(runs * alpha * (1 - alpha))
    assert sum(r.epsilon_lb > eps for r in results) <= limit
    assert sum(r.epsilon_hat > eps for r in results) > limit


def test_claimed_epsilon_per_notion() -> None:
    """Metric: eps * d(x, x'); pure/approx: eps; unknown metric: eps * diameter."""
    x = torch.tensor([1.0, 0.0], dtype=torch.float64)
    y = torch.tensor([0.0, 1.0], dtype=torch.float64)
    angular = Guarantee(notion="metric", epsilon=2.0, metric="angular", diameter=math.pi)
    euclid = Guarantee(notion="metric", epsilon=2.0, metric="euclidean", diameter=2.0)
    other = Guarantee(notion="metric", epsilon=2.0, metric="hamming", diameter=3.0)
    assert claimed_epsilon(angular, x, y) == pytest.approx(math.pi)
    assert claimed_epsilon(euclid, x, y) == pytest.approx(2 * math.sqrt(2))
    assert claimed_epsilon(other, x, y) == pytest.approx(6.0)
    assert claimed_epsilon(Guarantee(notion="approx", epsilon=1.5, delta=1e-5)) == 1.5


@pytest.mark.parametrize(("k", "s"), [(2, 1), (4, 1), (5, 2)])
def test_class_rr_pair_has_two_public_classes(k: int, s: int) -> None:
    """class_rr states its pair (``default_audit_pair``): two unit inputs of public classes 0 and 1, so
    that the two output laws differ and the audit is not vacuous; catches default_pair ignoring the hook
    or a pair whose logits (read back through the sum-zero basis for K > 2) tie."""
    mech = ClassRR(1.0, num_classes=k, subset_size=s)
    x, x_prime = default_pair(mech, 6)
    assert x.dtype == x_prime.dtype == torch.float64 and x.shape == x_prime.shape == (6,)
    assert float(x.norm()) == pytest.approx(1.0) and float(x_prime.norm()) == pytest.approx(1.0)
    assert mech.public_class(torch.stack([x, x_prime])).tolist() == [0, 1]


def test_clipped_laplace_pair_attains_l1_diameter() -> None:
    """The clipped Laplace pair has ||x - x'||_1 = 2 C sqrt(m): its noise's calibration point."""
    mech = ClippedLaplace(1.0, clip=2.5)
    x, x_prime = default_pair(mech, 9)
    assert float(x.norm()) == pytest.approx(2.5)
    assert float((x - x_prime).abs().sum()) == pytest.approx(2 * 2.5 * 3)


def test_deterministic_and_json() -> None:
    """Fixed seed -> identical result; to_dict is strict JSON (inf -> None)."""
    mech = Purkayastha(0.5)
    a = audit_mechanism(mech, 20_000, seed=3, dim=4)
    b = audit_mechanism(mech, 20_000, seed=3, dim=4)
    assert a == b
    json.dumps(a.to_dict(), allow_nan=False)
    clear = audit_mechanism(mechanisms.create("none"), 20_000, seed=3, dim=4)
    data = clear.to_dict()
    json.dumps(data, allow_nan=False)
    assert data["claimed_epsilon"] is None and data["consistent"] is True
    assert clear.epsilon_lb > 8  # the identity is told apart as well as N allows
    assert isinstance(a, AuditResult)


def test_rejects_other_levels_and_bad_alpha() -> None:
    with pytest.raises(ValueError):
        audit_mechanism(mechanisms.create("none", level="word"), 100)
    with pytest.raises(ValueError):
        clopper_pearson(1, 10, alpha=1.5)


@pytest.mark.slow
@pytest.mark.parametrize("name", _audited_names())
def test_audit_full_size_m16(name: str) -> None:
    """docs/SPEC.md §11.1 item 8 at full size: N = 1e6 per input, m = 16, 95% bounds."""
    mech, _, _ = _create(name)
    result = audit_mechanism(mech, 10**6, seed=SEED, dim=16, **AUDIT_KWARGS.get(name, {}))
    assert result.epsilon_lb <= result.claimed_epsilon, result.to_dict()
