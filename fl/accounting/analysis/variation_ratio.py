"""Shuffle amplification by the variation-ratio bound, beside Feldman-McMillan-Talwar.

Reference: S. Wang, Y. Peng, J. Li, Y. Yang, Y. Chen et al., "Privacy Amplification via
Shuffling: Unified, Simplified, and Tightened", PVLDB 17 (2024) (arXiv:2304.05007), Lemma 4.4 and
Theorems 4.7/4.8. The authors' code (``wangsw/PrivacyAmplification``) was used only to
cross-check values in the tests; it is not a valid upper bound as is, and none of it is copied.

Guarantee: the same scope as ``fl.accounting.analysis.shuffle``: ONE shuffle by a trusted
shuffler of n reports from n distinct users, each from a pure local randomizer; (epsilon,
delta)-DP of the shuffled multiset for changing one user's input (substitution). Composition
over rounds is the caller's job. Where g > 0 (k-RR with k >= 3, the metric mechanisms) the
paper's merged pair is not an upper bound and is not used; the residual-revealed pair or the
g = 0 form is. ``VRParameters`` has a constructor per mechanism (``general_ldp``, ``binary_rr``,
``k_rr``, ``metric_ldp``, ``purkayastha``, ``planar_laplace``); RR-with-prior has no
amplification (q = inf).

The (p, beta, q) parameters, the reduction to the clones pair, the residual-revealed pair and
each mechanism's parameters: docs/SPEC.md §15.3.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field

from scipy import integrate, special, stats

from fl.accounting.analysis.shuffle import (
    _TAIL_FRACTION,
    _check_delta,
    _check_epsilon0,
    _check_n,
    _ShuffleProfile,
    _smallest_epsilon,
    closed_form_amplification,
    local_epsilon,
    numerical_amplification,
    shuffle_delta,
)

__all__ = [
    "Amplification",
    "VRParameters",
    "binary_rr",
    "general_ldp",
    "k_rr",
    "mechanism_amplification",
    "metric_ldp",
    "planar_laplace",
    "planar_laplace_beta",
    "purkayastha",
    "purkayastha_beta",
    "rr_with_prior",
    "shuffle_amplification",
    "vr_delta",
    "vr_epsilon",
]

# Above this log p (or log q) e^{log p} is not representable comfortably; no VR figure.
_MAX_LOG_RATIO = 700.0


# --------------------------------------------------------------------------- #
# Parameters
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class VRParameters:
    """(p, beta, q) variation-ratio parameters of a local randomizer (Wang et al. 2024).

    log_p, log_q: logs of the p- and q-ratios; beta: the TV bound; g: the
    non-informative weight 1 - alpha (1 + p), given in closed form where it is
    0 or known exactly (None: computed from beta, only when beta is clearly
    below (p - 1)/(p + 1)). epsilon_ldp: the randomizer's pure LDP epsilon (the
    FMT bound is evaluated there). applicable = False (with ``reason``) when
    the (p, beta, q) property fails, e.g. RR-with-prior. uniform_tv: every pair
    of distinct inputs has TV exactly beta (k-RR); only then is a g > 0 figure
    used by ``mechanism_amplification`` (docs/SPEC.md §15.3).
    """

    name: str
    log_p: float
    beta: float
    log_q: float
    epsilon_ldp: float
    g: float | None = None
    applicable: bool = True
    reason: str = ""
    notes: dict[str, float] = field(default_factory=dict)
    uniform_tv: bool = False

    @property
    def alpha_p(self) -> float:
        """alpha * p = beta / (1 - 1/p)."""
        return self.beta / -math.expm1(-self.log_p)

    @property
    def alpha(self) -> float:
        """alpha = beta / (p - 1)."""
        return self.beta / math.expm1(self.log_p)

    @property
    def log_clone(self) -> float:
        """log(2 r), r = alpha p / q: each other user's probability of being a clone."""
        return math.log(2.0) + math.log(self.alpha_p) - self.log_q

    @property
    def g_value(self) -> float:
        if self.g is not None:
            return self.g
        return max(0.0, 1.0 - self.alpha * (1.0 + math.exp(self.log_p)))

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _check_real(x: float, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {x!r}")
    v = float(x)
    if not (math.isfinite(v) and v > 0.0):
        raise ValueError(f"{name} must be finite and > 0, got {x!r}")
    return v


def _validated(params: VRParameters) -> VRParameters:
    """Refuse what the bound does not cover (the reference code reads NaN as private)."""
    if not params.applicable:
        return params
    lp, lq, beta = params.log_p, params.log_q, params.beta
    if not (math.isfinite(lp) and lp > 0.0 and math.isfinite(lq) and lq > 0.0):
        raise ValueError(f"need p > 1 and q > 1 finite, got log p = {lp!r}, log q = {lq!r}")
    bmax = math.tanh(lp / 2.0)
    if not (math.isfinite(beta) and 0.0 < beta <= bmax):
        raise ValueError(f"need 0 < beta <= (p-1)/(p+1) = {bmax!r}, got {beta!r}")
    if params.g is None and beta > bmax * (1.0 - 1e-9):
        raise ValueError("beta within 1e-9 of (p-1)/(p+1): pass g in closed form (g = 0 there)")
    if params.g is not None and not (0.0 <= params.g <= 1.0):
        raise ValueError(f"g must be in [0, 1], got {params.g!r}")
    if params.log_clone > 0.0:
        raise ValueError("need q >= 2 alpha p (clone probability 2 r <= 1)")
    return params


def general_ldp(epsilon0: float) -> VRParameters:
    """Any pure epsilon0-LDP randomizer: p = q = e^eps0, beta = tanh(eps0/2), g = 0."""
    e0 = _check_epsilon0(epsilon0)
    return VRParameters("general_ldp", e0, math.tanh(e0 / 2.0), e0, e0, g=0.0)


def binary_rr(epsilon: float) -> VRParameters:
    """Binary randomized response: the same parameters as a general epsilon-LDP randomizer (g = 0)."""
    return VRParameters(**{**asdict(general_ldp(epsilon)), "name": "binary_rr"})


def k_rr(epsilon: float, k: int) -> VRParameters:
    """k-ary randomized response: beta = (e^eps - 1)/(e^eps + k - 1), g = (k - 2)/(e^eps + k - 1).

    Closed forms (no float cancellation in g). With g > 0 the residual-revealed
    bound applies (docs/SPEC.md §15.3), which the general form (g = 0) beats in
    the cases checked.
    """
    eps = _check_epsilon0(epsilon)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or int(k) < 2:
        raise ValueError(f"k must be an integer >= 2, got {k!r}")
    k = int(k)
    if k == 2:
        return VRParameters(**{**asdict(general_ldp(eps)), "name": "k_rr"})
    # beta = (e^eps - 1)/(e^eps + k - 1) = -expm1(-eps) / (1 + (k - 1) e^-eps)
    beta = -math.expm1(-eps) / (1.0 + (k - 1) * math.exp(-eps))
    g = (k - 2) * math.exp(-eps) / (1.0 + (k - 1) * math.exp(-eps))
    return VRParameters("k_rr", eps, beta, eps, eps, g=g, uniform_tv=True)


def metric_ldp(epsilon: float, d01: float, dmax: float, beta: float | None = None) -> VRParameters:
    """Metric LDP (R(x)[y] <= e^{eps d(x, x')} R(x')[y]) for neighbours at distance <= d01.

    p = e^{eps d01}, q = e^{eps dmax}; beta = tanh(eps d01 / 2) (any such
    mechanism; g = 0) unless a mechanism-specific ``beta`` (its sup TV over pairs
    at distance <= d01) is given. The figure covers replacing a user's input by
    one within distance d01; d01 = dmax is the worst case.
    """
    eps, d01, dmax = _check_real(epsilon, "epsilon"), _check_real(d01, "d01"), _check_real(dmax, "dmax")
    if d01 > dmax:
        raise ValueError(f"d01 = {d01!r} exceeds the diameter {dmax!r}")
    lp, lq = eps * d01, eps * dmax
    if beta is None:
        return VRParameters("metric_ldp", lp, math.tanh(lp / 2.0), lq, lq, g=0.0, notes={"d01": d01, "dmax": dmax})
    return VRParameters("metric_ldp", lp, float(beta), lq, lq, notes={"d01": d01, "dmax": dmax})


_BETA_PAD = 1e-10  # quadrature error allowance: beta is rounded up by this much (Lemma 4.6: safe)


def _with_beta(
    name: str, log_p: float, log_q: float, eps_ldp: float, beta: float, one_minus_beta: float, notes: dict
) -> VRParameters:
    """Parameters with a numerically computed beta, padded upwards, g from 1 - beta without cancellation.

    g = 1 - beta (p + 1)/(p - 1) = (b_max - beta) / b_max with b_max = tanh(log p / 2),
    b_max - beta = (1 - beta) - 2/(e^{log p} + 1). If the padded beta reaches
    b_max the general form (beta = b_max, g = 0) is used.
    """
    bmax = math.tanh(log_p / 2.0)
    one_minus_bmax = 2.0 / (math.exp(log_p) + 1.0) if log_p < _MAX_LOG_RATIO else 0.0
    gap = (one_minus_beta - _BETA_PAD) - one_minus_bmax
    if gap <= 1e-9 * bmax:
        return VRParameters(name, log_p, bmax, log_q, eps_ldp, g=0.0, notes=notes)
    return VRParameters(name, log_p, min(bmax, beta + _BETA_PAD), log_q, eps_ldp, g=gap / bmax, notes=notes)


def _purkayastha_tv(eps: float, m: int) -> tuple[float, float]:
    """(beta, 1 - beta) of the antipodal Purkayastha pair, both computed directly."""
    if m == 2:
        x = math.pi * eps / 4.0
        return math.tanh(x), 2.0 / (math.exp(2.0 * x) + 1.0)
    half = math.pi / 2.0
    u0 = min(math.atan2(eps, m - 2), half * (1.0 - 1e-12))  # mode of cos^{m-2}(u) e^{eps u}
    top = (m - 2) * math.log(math.cos(u0)) + eps * u0

    def logw(u: float) -> float:
        c = math.cos(u)
        return (m - 2) * math.log(c) - top if c > 0.0 else -math.inf

    def f_plus(u: float) -> float:  # cos^{m-2} u e^{eps u}
        lw = logw(u)
        return math.exp(lw + eps * u) if lw > -math.inf else 0.0

    def f_minus(u: float) -> float:  # cos^{m-2} u e^{-eps u}
        lw = logw(u)
        return math.exp(lw - eps * u) if lw > -math.inf else 0.0

    kw = {"points": [u0], "limit": 500, "epsabs": 0.0, "epsrel": 1e-12}
    a = integrate.quad(f_plus, 0.0, half, **kw)[0]
    b = integrate.quad(f_minus, 0.0, half, **kw)[0]
    # beta = (a - b)/(a + b) (the sinh/cosh ratio), 1 - beta = 2 b / (a + b)
    return (a - b) / (a + b), 2.0 * b / (a + b)


def _check_dim(m: int, least: int) -> int:
    if isinstance(m, bool) or not isinstance(m, numbers.Integral) or int(m) < least:
        raise ValueError(f"m must be an integer >= {least}, got {m!r}")
    return int(m)


def purkayastha_beta(epsilon: float, m: int) -> float:
    """Sup TV of Purkayastha (density ∝ exp(-eps angle) on S^{m-1}): the antipodal pair's TV.

    For mu1 = -mu0 the optimal set is {angle to mu0 < pi/2}; with u = pi/2 - theta,
    beta = ∫_0^{pi/2} cos^{m-2}u sinh(eps u) du / ∫_0^{pi/2} cos^{m-2}u cosh(eps u) du,
    integrated in log space (m = 2: tanh(pi eps / 4) exactly). That the TV grows
    with the angle (so the antipodal pair is the sup) was checked numerically
    (for m = 3, by 2-D quadrature); the tests check the value against Monte Carlo.
    """
    return _purkayastha_tv(_check_real(epsilon, "epsilon"), _check_dim(m, 2))[0]


def purkayastha(epsilon: float, m: int) -> VRParameters:
    """Purkayastha on S^{m-1}, worst case: p = q = e^{pi eps}, beta = ``purkayastha_beta`` (padded)."""
    eps = _check_real(epsilon, "epsilon")
    m = _check_dim(m, 2)
    lp = math.pi * eps
    beta, comp = _purkayastha_tv(eps, m)
    return _with_beta("purkayastha", lp, lp, lp, beta, comp, {"m": float(m), "epsilon": eps})


def _planar_laplace_tv(eps: float, m: int, dist: float) -> tuple[float, float]:
    h = dist / 2.0
    if m == 1:
        return -math.expm1(-eps * h), math.exp(-eps * h)
    gam = stats.gamma(m, scale=1.0 / eps)
    lo, hi = float(gam.ppf(1e-17)), float(gam.isf(1e-17))
    a, b = 0.5, (m - 1) / 2.0

    def inside(radius: float) -> float:
        return float(gam.pdf(radius)) * float(special.betainc(a, b, min(1.0, (h / radius) ** 2)))

    def outside(radius: float) -> float:
        return float(gam.pdf(radius)) * float(special.betaincc(a, b, min(1.0, (h / radius) ** 2)))

    pts = sorted({x for x in (h, (m - 1) / eps) if lo < x < hi}) or None
    kw = {"points": pts, "limit": 500, "epsabs": 1e-16, "epsrel": 1e-11}
    below, above = float(gam.cdf(lo)), float(gam.sf(hi))
    beta = integrate.quad(inside, lo, hi, **kw)[0] + below  # R < lo: |Z_1| < h for sure (h >= lo there)
    comp = integrate.quad(outside, lo, hi, **kw)[0] + above
    return min(1.0, beta), max(0.0, comp)


def planar_laplace_beta(epsilon: float, m: int, distance: float = 2.0) -> float:
    """TV between x0 + Z and x1 + Z, ||x0 - x1|| = distance, Z ∝ exp(-eps ||z||) on R^m.

    The optimal set is the half-space closer to x0, so TV = Pr(|Z_1| < distance/2);
    ||Z|| ~ Gamma(m, scale 1/eps) and Z_1^2/||Z||^2 ~ Beta(1/2, (m-1)/2), so
    TV = E_R[ I_{min(1, (distance/2)^2/R^2)}(1/2, (m-1)/2) ] (1-D quadrature).
    """
    eps = _check_real(epsilon, "epsilon")
    dist = _check_real(distance, "distance")
    return _planar_laplace_tv(eps, _check_dim(m, 1), dist)[0]


def planar_laplace(epsilon: float, m: int, d01: float | None = None) -> VRParameters:
    """Planar Laplace on the unit sphere (diameter 2): worst case p = q = e^{2 eps}, beta = Pr(|Z_1| < 1).

    With ``d01``: the metric form for neighbours at distance <= d01,
    p = e^{eps d01}, q = e^{2 eps}, beta = Pr(|Z_1| < d01/2).
    """
    eps = _check_real(epsilon, "epsilon")
    m = _check_dim(m, 1)
    d = 2.0 if d01 is None else _check_real(d01, "d01")
    if d > 2.0:
        raise ValueError(f"d01 = {d01!r} exceeds the diameter 2")
    beta, comp = _planar_laplace_tv(eps, m, d)
    return _with_beta("planar_laplace", eps * d, 2.0 * eps, 2.0 * eps, beta, comp, {"m": float(m), "d01": d})


def rr_with_prior(epsilon: float) -> VRParameters:
    """RR-with-prior: no (p, beta, q) property across users (q = inf), so not applicable."""
    eps = _check_epsilon0(epsilon)
    return VRParameters(
        "rr_with_prior",
        eps,
        math.tanh(eps / 2.0),
        math.inf,
        eps,
        applicable=False,
        reason=(
            "not applicable: each example has its own top-k* label set, so another user's randomizer can put "
            "zero mass where the victim's has mass (q-ratio infinite, r = 0); neither the variation-ratio nor "
            "the FMT clone reduction proves amplification"
        ),
    )


# --------------------------------------------------------------------------- #
# The evaluator
# --------------------------------------------------------------------------- #
class _RevealedProfile:
    """delta(eps) = (1 - g) D_{e^eps}(P_inf || Q_inf): the VR pair with the victim's residual flag revealed.

    P_inf/Q_inf is FMT's clones pair at eps0 = log p with clone probability 2 r
    (``shuffle._ShuffleProfile``); the g-part (victim drew its residual Q*) has
    the same law under both data sets and adds nothing. See docs/SPEC.md §15.3.
    """

    def __init__(self, params: VRParameters, n: int, tail_mass: float, *, exact: bool = False) -> None:
        self.inner = _ShuffleProfile(params.log_p, n, tail_mass, exact=exact, log_clone=params.log_clone)
        self.epsilon0 = params.log_p  # delta(log p) = 0: the root finder's bracket
        bmax = math.tanh(params.log_p / 2.0)
        # 1 - g = alpha (1 + p) = beta / b_max; take the larger of the two ways of computing it, padded
        self.scale = min(1.0, max(1.0 - params.g_value, params.beta / bmax) * (1.0 + 1e-12))

    def delta(self, eps: float, *, with_slack: bool = True) -> float:
        return min(1.0, self.scale * self.inner.delta(eps, with_slack=with_slack))


def _profile(params: VRParameters, n: int, tail_mass: float, *, exact: bool = False) -> _RevealedProfile:
    return _RevealedProfile(params, n, tail_mass, exact=exact)


def vr_delta(epsilon: float, params: VRParameters, n: int, *, exact: bool = False, tail_mass: float = 1e-14) -> float:
    """Upper bound on delta(epsilon) of the VR pair for ``params`` and n users (residual revealed if g > 0).

    That is (1 - g) times the divergence of the g = 0 pair at eps0 = log p with
    clone probability 2 r, evaluated like ``shuffle.shuffle_delta``:
    ``exact=True`` sums every value of C (used against brute force); otherwise
    blocks of C are charged their left-end value and the lower tail below a
    Bernstein range (mass ~ ``tail_mass``) the c = 0 value. Includes a tiny
    float slack.
    """
    params = _validated(params)
    if not params.applicable:
        raise ValueError(params.reason)
    n = _check_n(n)
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
    return _profile(params, n, tail_mass, exact=exact).delta(float(epsilon))


def vr_epsilon(params: VRParameters, n: int, delta: float) -> float:
    """Smallest eps (safe side, re-checked) with VR delta(eps) <= delta; never above log p.

    Guarantee (one shuffle, trusted shuffler, n distinct users): (eps, delta)-DP
    of the shuffled output for the randomizers that have ``params``.
    """
    params = _validated(params)
    if not params.applicable:
        raise ValueError(params.reason)
    n = _check_n(n)
    delta = _check_delta(delta)
    if n == 1 or params.log_p > _MAX_LOG_RATIO or params.log_q > _MAX_LOG_RATIO:
        return params.log_p
    prof = _profile(params, n, _TAIL_FRACTION * delta)
    return min(params.log_p, _smallest_epsilon(prof, delta))


def _general_form(params: VRParameters) -> VRParameters:
    """The same p and q with beta raised to (p - 1)/(p + 1) (g = 0): also valid (any pure log p-ratio pair)."""
    bmax = math.tanh(params.log_p / 2.0)
    return VRParameters(params.name, params.log_p, bmax, params.log_q, params.epsilon_ldp, g=0.0, notes=params.notes)


# --------------------------------------------------------------------------- #
# The tighter valid bound
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class Amplification:
    """Central (epsilon, delta) of one shuffled round: the tighter of the valid bounds.

    method: "variation_ratio" (Wang et al. 2024), "fmt_numerical" /
    "fmt_closed_form" (Feldman-McMillan-Talwar 2021), "none" (epsilon ==
    epsilon0: nothing proven) or "not_applicable" (epsilon is None; see note).
    epsilon_fmt / epsilon_vr: each bound's figure (None where not computed).
    Scope: one shuffle, trusted shuffler, n reports from n distinct users,
    changing one user's input; for a metric form, only inputs within d01.
    """

    epsilon: float | None
    delta: float
    method: str
    amplified: bool
    note: str
    epsilon0: float
    n: int
    epsilon_fmt: float | None
    epsilon_vr: float | None
    parameters: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def mechanism_amplification(params: VRParameters, n: int, delta: float, *, both: bool = False) -> Amplification:
    """Tighter of VR with ``params`` and FMT at the randomizer's pure epsilon ``params.epsilon_ldp``.

    Both are valid upper bounds on the same guarantee (FMT needs only pure
    epsilon_ldp-LDP, which every randomizer with these parameters is), so the
    smaller is. To stay fast, FMT's numerical bound is first evaluated at the VR
    figure only: if its delta there already exceeds the target, its own figure
    is larger (delta(eps) is non-increasing) and is not computed
    (``epsilon_fmt`` None) unless ``both`` is set. FMT's closed form (O(1)) is
    always a candidate. RR-with-prior-like parameters (``applicable`` False)
    give method "not_applicable" and epsilon None.
    """
    n = _check_n(n)
    delta = _check_delta(delta)
    eps0 = params.epsilon_ldp
    if not params.applicable:
        return Amplification(None, delta, "not_applicable", False, params.reason, eps0, n, None, None, params.name)
    params = _validated(params)
    if n == 1:
        note = "n = 1: a single report gains nothing from shuffling; epsilon0 returned"
        return Amplification(eps0, delta, "none", False, note, eps0, n, None, None, params.name)
    note_vr = ""
    if params.g_value == 0.0:
        eps_vr = vr_epsilon(params, n, delta)
    elif params.uniform_tv:  # the residual-revealed figure at the exact TV, or the g = 0 form
        eps_vr = min(vr_epsilon(params, n, delta), vr_epsilon(_general_form(params), n, delta))
    else:
        eps_vr = vr_epsilon(_general_form(params), n, delta)
        note_vr = (
            f"the mechanism's beta = {params.beta:.6g} is not used: pairs have different TVs and the "
            "residual-revealed bound is not known to be monotone in beta; the g = 0 form at the same p, q is used"
        )
    cands = [(eps_vr, "variation_ratio")]
    closed = closed_form_amplification(eps0, n, delta)
    if closed is not None:
        cands.append((closed, "fmt_closed_form"))
    if both or eps_vr >= eps0 or shuffle_delta(min(eps_vr, eps0), eps0, n, tail_mass=_TAIL_FRACTION * delta) <= delta:
        cands.append((numerical_amplification(eps0, n, delta), "fmt_numerical"))
    eps, how = min(cands, key=lambda c: c[0])  # ties keep variation_ratio
    fmt_figures = [e for e, name in cands if name.startswith("fmt_")]
    # epsilon_fmt: FMT's best figure when its numerical bound was computed or FMT won, else None
    computed = any(name == "fmt_numerical" for _, name in cands) or how != "variation_ratio"
    eps_fmt = min(fmt_figures) if computed else None
    if not (math.isfinite(eps) and eps < eps0):
        note = "; ".join(x for x in (note_vr, "no amplification provable; epsilon0 returned") if x)
        return Amplification(eps0, delta, "none", False, note, eps0, n, eps_fmt, eps_vr, params.name)
    note = note_vr
    eps_local = local_epsilon(eps0, delta)
    if eps_local - eps < eps0 - eps_local:
        relax = (
            "most of the gap epsilon0 - epsilon is the delta-relaxation of the local randomizer alone "
            f"(epsilon_local = {eps_local:.10g}); shuffling gains only {max(0.0, eps_local - eps):.3g}"
        )
        note = f"{note}; {relax}" if note else relax
    return Amplification(max(0.0, eps), delta, how, True, note, eps0, n, eps_fmt, eps_vr, params.name)


def shuffle_amplification(epsilon0: float, n: int, delta: float, *, both: bool = False) -> Amplification:
    """Upper bound on the central epsilon when n pure epsilon0-LDP reports are shuffled.

    The tighter of the variation-ratio bound (Wang et al., VLDB 2024; general
    parameters p = q = e^eps0, beta = tanh(eps0/2)) and Feldman-McMillan-Talwar
    (``shuffle_bound``), with ``method`` saying which. Guarantee: (epsilon,
    delta)-DP of the shuffled output with respect to changing one user's input,
    for any pure epsilon0-LDP local randomizer, assuming a trusted shuffler and
    that the n reports are from distinct users. One round. Never above
    epsilon0, always finite. ``both``: also compute FMT's figure when VR is
    already known to be tighter (see ``mechanism_amplification``).
    """
    epsilon0 = _check_epsilon0(epsilon0)
    return mechanism_amplification(general_ldp(epsilon0), n, delta, both=both)
