"""Purkayastha mechanism on the unit sphere (Weggenmann & Kerschbaum, CCS 2021;
used for sentence embeddings by Du et al., WWW 2023, §3.2.1).

Guarantee: epsilon * d_angular-LDP per sentence embedding, where
d_angular(mu, mu') = arccos(mu^T mu') on the sphere S^{m-1} (Du et al. Thm 1; the
proof is dimension-independent). The angular diameter of the sphere is pi, so one
release is pure (pi * epsilon)-LDP, and this is tight (mu' = -mu, Y = mu).

Output law: density C * exp(-epsilon * arccos(mu^T Y)) on S^{m-1}. Tangent-normal
decomposition Y = cos(theta) mu + sin(theta) xi, with xi uniform on the great
sphere orthogonal to mu and theta ~ PurArc(m, eps), density on [0, pi]

    sin^{m-2}(theta) * exp(-epsilon * theta) / F_{m-2, eps}(pi).

Sampler (docs/SPEC.md §1.4): inverse CDF from a table built once per
(m, epsilon) by a log-space cumulative trapezoid on 2^14 points of a window
around the mode that holds all but e^-45 of the mass, then ``searchsorted`` +
linear interpolation. Written by hand because no maintained library samples
PurArc; the reference code's quadrature + bisection sampler is wrong for
epsilon >~ 200 and crashes at m >= 768, epsilon = 1000 (docs/SPEC.md §1.6).

Speed (CPU): the table search is an indexed search (a guide table of 2^16
buckets in u, Chen & Asau 1974) that returns exactly what ``searchsorted``
returns, and the release is computed in row blocks of about 2^17 numbers so that
the float64 temporaries are reused (a multiple of 16 rows: the blocks draw the
normals one ``torch.randn(n, m)`` would, whatever the block size). The
Gaussian behind the tangent direction is drawn at the release precision
(float32 unless the input is float64; see ``Purkayastha`` for why this does not
change the law); all the arithmetic stays in float64. A float32 release skips
the final float64 renormalisation of Y, which changes no float32 output (see
``Purkayastha``).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from mechanisms import random_source

from .base import SentenceMechanism, check_embeddings, check_epsilon, normalize_rows, sample_device
from .guarantee import Guarantee

GRID_POINTS = 2**14
GUIDE_BUCKETS = 2**16  # buckets of the indexed search in u (a power of 2: u * K is exact)
_RENORMALISE_ALL = False  # renormalise float32 releases too (tests: it changes no output bit)
_TAIL_LOG_MASS = 45.0  # the table window drops at most e^-45 of relative density
_BLOCK_ELEMENTS = 2**17  # CPU release block: rows * m ~ 2^17, float64 temporaries are reused


def purarc_log_density(theta: np.ndarray, m: int, epsilon: float) -> np.ndarray:
    """Unnormalised log-density (m-2) log sin(theta) - epsilon * theta (-inf at sin = 0)."""
    with np.errstate(divide="ignore"):
        return (m - 2) * np.log(np.sin(theta)) - epsilon * theta


@lru_cache(maxsize=256)
def purarc_table(m: int, epsilon: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Grid and CDF of PurArc(m, epsilon) for m >= 3, float64, cached per (m, eps).

    Returns ``(theta_grid, cdf, log_norm)`` with ``cdf[0] == 0``, ``cdf[-1] == 1``
    and ``log_norm = log F_{m-2,eps}(pi)`` (the log normaliser of PurArc); the
    grid is uniform on a window [lo, hi] of [0, pi] outside which the density is
    below e^-45 times its peak (the log-density is concave, so the mass outside
    is negligible at every (m, eps) in 3..1024 x 0.01..1000).
    """
    if m < 3:
        raise ValueError("purarc_table needs m >= 3 (m = 2 has a closed form)")
    n = m - 2
    mode = math.atan2(n, epsilon)
    spread = math.sin(mode) / math.sqrt(n)
    lo, hi = max(0.0, mode - 60 * spread), min(math.pi, mode + 60 * spread)
    peak = float(purarc_log_density(np.array([mode]), m, epsilon)[0])

    def above(t: float) -> bool:
        return float(purarc_log_density(np.array([t]), m, epsilon)[0]) > peak - _TAIL_LOG_MASS

    while lo > 0.0 and above(lo):
        lo = max(0.0, mode - 2 * (mode - lo))
    while hi < math.pi and above(hi):
        hi = min(math.pi, mode + 2 * (hi - mode))

    grid = np.linspace(lo, hi, GRID_POINTS + 1)
    log_f = purarc_log_density(grid, m, epsilon) - peak
    step = (hi - lo) / GRID_POINTS
    log_cells = np.logaddexp(log_f[:-1], log_f[1:]) + math.log(step / 2)
    log_cum = np.logaddexp.accumulate(log_cells)
    cdf = np.concatenate([[0.0], np.exp(log_cum - log_cum[-1])])
    cdf[-1] = 1.0
    return grid, cdf, float(log_cum[-1] + peak)


@lru_cache(maxsize=256)
def purarc_guide(m: int, epsilon: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CPU tensors ``(cdf, first, narrow)`` of the indexed search for PurArc(m, epsilon).

    ``first[b]`` is the first index i with ``cdf[i] > b / K`` (K = GUIDE_BUCKETS),
    and ``narrow[b]`` says that at most one table entry lies in [b/K, (b+1)/K).
    """
    _, cdf, _ = purarc_table(m, epsilon)
    # first[b] = #{i : cdf[i] <= b/K} = #{i : ceil(cdf[i] K) <= b}: a cumulative histogram
    # (cdf * K is exact, K being a power of 2), O(N + K) instead of K binary searches.
    counts = np.bincount(np.ceil(cdf * GUIDE_BUCKETS).astype(np.int64), minlength=GUIDE_BUCKETS + 1)
    first = np.minimum(np.cumsum(counts), GRID_POINTS)  # first[K] = N + 1 -> N: cdf[N] = 1 > every u
    narrow = np.diff(first) <= 1
    return torch.from_numpy(cdf), torch.from_numpy(first[:-1].astype(np.int32)), torch.from_numpy(narrow)


def _cell_index(u: torch.Tensor, cdf: torch.Tensor, first: torch.Tensor, narrow: torch.Tensor) -> torch.Tensor:
    """``torch.searchsorted(cdf, u, right=True)`` for u in [0, 1), by an indexed search.

    For u in bucket b = floor(u K), the answer lies in [first[b], first[b+1]]
    and equals first[b] plus the number of entries of cdf[first[b]:first[b+1]]
    that are <= u (cdf is non-decreasing). In a narrow bucket that is one
    comparison; the few u in wide buckets (the far tails, where table cells are
    thinner than 1/K in u) go through ``searchsorted``. The result is identical
    (as int32; ``index_select`` with int32 indices is the fastest gather on CPU).
    """
    bucket = (u * GUIDE_BUCKETS).int()  # exact: K is a power of 2 and u < 1
    lo = first.index_select(0, bucket)
    idx = lo.add_(cdf.index_select(0, lo) <= u)
    rows = narrow.index_select(0, bucket).logical_not_().nonzero().squeeze(1)
    if rows.numel():
        idx[rows] = torch.searchsorted(cdf, u[rows], right=True, out_int32=True)
    return idx


def sample_purarc(
    m: int,
    epsilon: float,
    n: int,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Draw ``n`` i.i.d. angles theta ~ PurArc(m, epsilon) as float64 on ``device``."""
    device = torch.device(device)
    u = random_source.rand(n, generator=generator, dtype=torch.float64, device=device)
    if m == 2:
        # Truncated exponential on [0, pi]: exact inverse CDF.
        return -torch.log1p(u * math.expm1(-epsilon * math.pi)) / epsilon
    grid_np, cdf_np, _ = purarc_table(m, float(epsilon))
    if device.type == "cpu":
        cdf, first, narrow = purarc_guide(m, float(epsilon))
        idx = _cell_index(u, cdf, first, narrow)
    else:
        cdf = torch.as_tensor(cdf_np, device=device)
        idx = torch.searchsorted(cdf, u, right=True)
    # cdf[0] = 0 <= u < 1 = cdf[-1], so 1 <= idx <= GRID_POINTS and c0 <= u < c1:
    # the cell has positive width and the fraction lies in [0, 1).
    c0, c1 = cdf.index_select(0, idx - 1), cdf.index_select(0, idx)
    step = (grid_np[-1] - grid_np[0]) / GRID_POINTS
    frac = (u - c0).div_(c1 - c0)
    return idx.to(torch.float64).sub_(1.0).add_(frac).mul_(step).add_(grid_np[0])


class _Workspace:
    """Buffers for releasing blocks of up to ``rows`` rows of dimension ``m``.

    ``dtype`` is the arithmetic dtype (float64 in ``sanitize``) and
    ``noise_dtype`` the dtype the Gaussians are drawn in. Row dot products are
    ``mv(a * b, ones)``, faster than ``vecdot`` / ``vector_norm`` on short rows.
    """

    def __init__(self, rows: int, m: int, dtype: torch.dtype, noise_dtype: torch.dtype, device: torch.device) -> None:
        self.x, self.r, self.tmp = (torch.empty((rows, m), dtype=dtype, device=device) for _ in range(3))
        self.noise = None if noise_dtype == dtype else torch.empty((rows, m), dtype=noise_dtype, device=device)
        self.ones = torch.ones(m, dtype=dtype, device=device)

    def rowdot(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mv(torch.mul(a, b, out=self.tmp[: a.shape[0]]), self.ones)

    def load_rows(self, block: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(v, 1 / |v|)`` for the rows v of ``block`` (a slice of ``x``), copied to a buffer.

        The direction v / |v| is the map of ``normalize_rows``: rows of norm
        < 1e-12 are replaced by e1. The finiteness check of ``check_embeddings``
        is folded into the norms: a NaN or inf entry makes its row's squared norm
        non-finite, and then ``check_embeddings(x)`` raises its usual error. A
        finite float64 row whose squares overflow is rescaled by its largest
        entry (same direction).
        """
        v = self.x[: block.shape[0]]
        v.copy_(block)
        sq = self.rowdot(v, v)
        low, high = (float(t) for t in torch.aminmax(sq))  # a NaN fails both tests below
        if not high < math.inf:
            check_embeddings(x)  # raises on NaN / inf
            big = ~torch.isfinite(sq)
            v[big] = v[big] / v[big].abs().amax(dim=1, keepdim=True)
            sq[big] = self.rowdot(v[big], v[big])
        if not low >= 1e-24:  # some norm < 1e-12
            tiny = sq < 1e-24
            v[tiny] = 0.0
            v[tiny, 0] = 1.0
            sq[tiny] = 1.0
        return v, sq.rsqrt_()

    def tangent(
        self, v: torch.Tensor, inv_norm: torch.Tensor | None, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(r_perp, 1 / |r_perp|)`` with r ~ N(0, I_m) per row and r_perp = r - (r . mu) mu.

        mu = v * inv_norm (``inv_norm=None``: v has unit rows). Rows with
        |r_perp| <= 1e-12 |r| are drawn again (probability ~0), which keeps the
        law exact; |r|^2 = |r_perp|^2 + (r . mu)^2 needs no extra pass.
        """
        k = v.shape[0]
        r = self.r[:k]
        if self.noise is None:
            random_source.randn(r.shape, generator=generator, dtype=r.dtype, device=r.device, out=r)
        else:
            noise = self.noise[:k]
            random_source.randn(noise.shape, generator=generator, dtype=noise.dtype, device=noise.device, out=noise)
            r.copy_(noise)
        along = self.rowdot(r, v)  # r . v = |v| (r . mu)
        coef = along if inv_norm is None else along.mul_(inv_norm.square())  # (r . v) / |v|^2
        r.addcmul_(v, coef.unsqueeze(1), value=-1.0)
        sq = self.rowdot(r, r)
        along_mu = coef if inv_norm is None else coef / inv_norm
        # Rows with |r_perp| < 1e-2 |r . mu| (rare but for small m) lost digits to cancellation:
        # |r_perp| <= 1e-12 |r| (sq <= 1e-24 (sq + (r . mu)^2)) are drawn again, the others projected once more.
        if float(torch.addcmul(sq, along_mu, along_mu, value=-1e-4).min()) < 0.0:
            self._fix_ill_conditioned(r, sq, along_mu, v, inv_norm, generator)
        return r, sq.rsqrt_()

    def _fix_ill_conditioned(
        self,
        r: torch.Tensor,
        sq: torch.Tensor,
        along_mu: torch.Tensor,
        v: torch.Tensor,
        inv_norm: torch.Tensor | None,
        generator: torch.Generator | None,
    ) -> None:
        """See ``tangent``: redraw the degenerate rows, re-project the other ill-conditioned ones (in place)."""
        degenerate = torch.addcmul(sq, along_mu, along_mu, value=-1e-24) <= 0.0
        ill = ((sq - 1e-4 * along_mu.square()) < 0.0) & ~degenerate
        if bool(ill.any()):  # a second Gram-Schmidt step: r_perp is then orthogonal to mu to ~1e-16 |r_perp|
            rows = ill.nonzero().squeeze(1)
            vr, rr = v[rows], r[rows]
            coef = (rr * vr).sum(1) if inv_norm is None else (rr * vr).sum(1) * inv_norm[rows].square()
            rr = rr - coef.unsqueeze(1) * vr
            r[rows], sq[rows] = rr, (rr * rr).sum(1)
        if bool(degenerate.any()):
            rows = degenerate.nonzero().squeeze(1)
            noise_dtype = r.dtype if self.noise is None else self.noise.dtype
            redo = _Workspace(rows.numel(), v.shape[1], r.dtype, noise_dtype, r.device)
            r[rows], inv = redo.tangent(v[rows], None if inv_norm is None else inv_norm[rows], generator)
            sq[rows] = inv.square().reciprocal()


def tangent_directions(mu: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Uniform unit vectors xi with xi orthogonal to each row of ``mu`` (unit rows)."""
    work = _Workspace(mu.shape[0], mu.shape[1], mu.dtype, mu.dtype, mu.device)
    r_perp, inv_norms = work.tangent(mu, None, generator)
    return r_perp * inv_norms.unsqueeze(1)


def _check_shape(x: torch.Tensor) -> torch.Tensor:
    """``check_embeddings`` without its O(n m) finiteness scan (``_Workspace.load_rows`` does it)."""
    ok = isinstance(x, torch.Tensor) and x.dim() == 2 and x.shape[1] >= 2 and torch.is_floating_point(x)
    if not ok:
        check_embeddings(x)  # raises the matching error
    return x.detach()


class Purkayastha(SentenceMechanism):
    """Purkayastha mechanism: epsilon * d_angular-LDP, pure pi*epsilon-LDP per row.

    Parameters
    ----------
    epsilon : float
        Metric privacy parameter, 0 < epsilon < inf.

    Notes
    -----
    Inputs are normalised to the unit sphere first (rows of norm < 1e-12 map to
    e1, a public vector). The angle is sampled in float64 and all arithmetic is
    float64; the output has the input's dtype and device and no gradient path to
    the input.

    Precision of the tangent direction (a deliberate reading of
    docs/SPEC.md §0.4): the Gaussian r behind xi = r_perp / |r_perp| is drawn in
    float64 for float64 inputs and in float32 otherwise, then cast to float64.
    torch's float32 normals are Box-Muller pairs of 24-bit uniforms, so the law
    of r differs from N(0, I) only by the quantisation of those uniforms (2^-24)
    and by a cap of the pair radius at sqrt(48 ln 2) = 5.77, which has
    probability 2^-24 per pair: any event about xi changes probability by
    O(m 2^-24) ~ 1e-6 at most.
    The release is then rounded to float32, a perturbation of the same order,
    and both are far below what the statistical tests can see. On CPU, float64
    normals alone cost about 3x a float32 ``torch.randn`` even with the
    vectorised Box-Muller of ``mechanisms.noise`` (5-6x with torch's scalar
    float64 path), which would rule out the "within 2x of randn" target.

    Renormalisation: Y is renormalised in float64 (docs/SPEC.md §1.4) only for
    float64 releases. In float64, |mu| and |xi| are 1 and mu . xi is 0 to a few
    ulps (rows where r is within 1e-2 of mu's direction, frequent only for small
    m, get a second Gram-Schmidt step), so |Y| = 1 within ~1e-15, and rounding
    to float32 (relative step 6e-8) absorbs the renormalisation: it would only
    matter for a coordinate within ~1e-15 of a float32 rounding boundary. Tests
    check that forcing it leaves float32 releases bit for bit unchanged.
    """

    name = "purkayastha"

    def __init__(self, epsilon: float) -> None:
        self.epsilon = check_epsilon(epsilon)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            notion="metric",
            epsilon=self.epsilon,
            metric="angular",
            diameter=math.pi,
            granularity="sentence",
        )

    def log_prob(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Exact log-density of releasing ``y`` (unit rows) given inputs ``x``, per row.

        log p = -eps * arccos(mu^T y) - log S_{m-2} - log F_{m-2,eps}(pi), w.r.t. the
        surface measure of S^{m-1} (docs/SPEC.md §1.3). Used by tests and audits.
        """
        x = check_embeddings(x).to(torch.float64)
        y = check_embeddings(y, "y").to(torch.float64)
        if x.shape != y.shape:
            raise ValueError(f"x and y must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
        m = x.shape[1]
        mu, y = normalize_rows(x), normalize_rows(y)
        angle = torch.arccos((mu * y).sum(dim=1).clamp(-1.0, 1.0))
        log_area = math.log(2) + (m - 1) / 2 * math.log(math.pi) - math.lgamma((m - 1) / 2)
        if m == 2:
            log_norm = math.log(-math.expm1(-self.epsilon * math.pi) / self.epsilon)
        else:
            log_norm = purarc_table(m, self.epsilon)[2]
        return -self.epsilon * angle - log_area - log_norm

    @torch.no_grad()
    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        x = _check_shape(x)
        device = sample_device(x.device, generator)
        n, m = x.shape
        noise_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        theta = sample_purarc(m, self.epsilon, n, generator, device)
        cos_t, sin_t = torch.cos(theta), torch.sin(theta)
        renormalise = _RENORMALISE_ALL or x.dtype == torch.float64  # see the class notes
        src = x.to(device)
        out = torch.empty((n, m), dtype=x.dtype, device=device)
        # A multiple of 16 rows: every block but the last draws a multiple of 16 normals, so the
        # blocks draw exactly what one torch.randn(n, m) would (the same stream for any block size).
        rows = max(1, min(n, max(16, _BLOCK_ELEMENTS // m // 16 * 16)) if device.type == "cpu" else n)
        work = _Workspace(rows, m, torch.float64, noise_dtype, device)
        for start in range(0, n, rows):
            block = slice(start, min(start + rows, n))
            v, inv_norm = work.load_rows(src[block], x)  # mu = v / |v|
            r_perp, inv_perp = work.tangent(v, inv_norm, generator)
            # Y = cos(theta) mu + sin(theta) r_perp / |r_perp| (docs/SPEC.md §1.4).
            y = v.mul_(inv_norm.mul_(cos_t[block]).unsqueeze(1))
            y.addcmul_(r_perp, inv_perp.mul_(sin_t[block]).unsqueeze(1))
            if renormalise:
                torch.mul(y, work.rowdot(y, y).rsqrt_().unsqueeze(1), out=out[block])
            else:
                out[block] = y
        return out.to(x.device)
