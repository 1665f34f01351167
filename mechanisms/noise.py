"""Shared noise samplers and the L2 clip, all driven by an explicit generator.

``torch.distributions`` cannot take a ``torch.Generator``, so these are
written by hand on top of the generator's raw 64-bit draws: every sample of a
mechanism is reproducible from its generator and independent across rows.

Precision (docs/SPEC.md §0.4). Every sample is float64 and is built from
53-bit uniforms u = k 2^-53 with float64 arithmetic: normals by Box-Muller,
Laplace variates by inversion, Gamma variates by Marsaglia and Tsang's exact
rejection method. u is exactly torch's float64 uniform (``Tensor.uniform_``
keeps the low 53 bits of one 64-bit draw, and so does :func:`_uniform_integers_`,
which only skips the per-element float conversion of torch's serial kernel).
Nothing here is float32: a 24-bit uniform would truncate a Laplace tail at 16.6
scales and a Box-Muller radius at 5.77 (events of probability ~1e-7 that
another input can produce and this one cannot), and a float32 direction times a
large noise radius would be far coarser than the float32 grid of the release.

Speed (CPU). ``torch.randn(dtype=float64)`` runs Box-Muller one scalar at a
time; :func:`standard_normal_` runs the same Box-Muller, on the same 53-bit
uniforms, as vectorised tensor ops on blocks of 2^16 numbers (about 1.6x
faster). :func:`gamma_radius_noise` draws its Gamma(m) radius by rejection, one normal
and one uniform per trial and about 1.07 trials per row (acceptance > 0.95,
batches drawn with a margin), not as a sum of m log-uniforms (m uniforms and m
logarithms per row).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from mechanisms.keystream import random_bits_

_BLOCK_ELEMENTS = 2**16  # CPU numbers per Box-Muller / Laplace block
_ROW_BLOCK_ELEMENTS = 2**17  # CPU numbers per block of rows of a release (see row_blocks)
_ULP = 2.0**-53  # spacing of the 53-bit uniforms
_MASK53 = 2**53 - 1


def row_blocks(n: int, m: int, device: torch.device, elements: int = _ROW_BLOCK_ELEMENTS) -> Iterator[slice]:
    """Row slices covering ``range(n)``: blocks of about ``elements`` numbers on the CPU, so that
    the float64 temporaries of a release stay small and are reused instead of whole [n, m]
    tensors being allocated (and page-faulted) at every step; a single block on other devices."""
    rows = max(1, elements // max(m, 1)) if device.type == "cpu" else max(n, 1)
    for start in range(0, n, rows):
        yield slice(start, min(start + rows, n))


def _chunk_size(total: int, device: torch.device) -> int:
    """Numbers per sampler block: 2^16 on the CPU (temporaries stay in cache), all of them elsewhere."""
    return max(1, min(total, _BLOCK_ELEMENTS) if device.type == "cpu" else total)


def _chunks(total: int, device: torch.device) -> Iterator[tuple[int, int]]:
    size = _chunk_size(total, device)
    for start in range(0, total, size):
        yield start, min(start + size, total)


def _uniform_integers_(out: torch.Tensor, bits: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """``out`` (1-D float64) <- i.i.d. integers k uniform on [0, 2^53), exactly; ``bits`` is an int64
    scratch of at least ``out.numel()`` entries. k 2^-53 is bit for bit the float64 uniform that
    ``out.uniform_(generator=generator)`` would have drawn."""
    bits = bits[: out.numel()]
    random_bits_(bits, generator).bitwise_and_(_MASK53)  # the low 53 bits of one 64-bit draw
    return out.copy_(bits)


class _Scratch:
    """Reusable buffers of the block samplers (``size`` numbers each)."""

    def __init__(self, size: int, device: torch.device) -> None:
        self.bits = torch.empty(size, dtype=torch.int64, device=device)
        self.real = torch.empty(size, dtype=torch.float64, device=device)


def _box_muller_(buf: torch.Tensor, scratch: _Scratch, generator: torch.Generator | None) -> None:
    """Fill the 1-D float64 ``buf`` (even length) with N(0, 1) by Box-Muller on 53-bit uniforms:
    (u1, u2) -> sqrt(-2 log(1 - u1)) (cos 2 pi u2, sin 2 pi u2), the law and the arithmetic of
    torch's float64 ``normal_fill``; 1 - u1 lies in (0, 1] and is exact."""
    _uniform_integers_(buf, scratch.bits, generator)
    half = buf.numel() // 2
    k1, k2 = buf[:half], buf[half:]
    radius = scratch.real[:half]
    torch.add(1.0, k1, alpha=-_ULP, out=radius).log_().mul_(-2.0).sqrt_()  # 1 - k1 2^-53: exact
    k2.mul_(2.0 * math.pi * _ULP)  # the same double as (2 pi) * u2
    torch.cos(k2, out=k1)
    k2.sin_()
    k1.mul_(radius)
    k2.mul_(radius)


def standard_normal_(out: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Fill the contiguous float64 tensor ``out`` with i.i.d. N(0, 1) in place (and return it)."""
    flat = out.view(-1)
    total = flat.numel()
    scratch = _Scratch(_chunk_size(total, out.device) + 1, out.device)
    for start, stop in _chunks(total, out.device):
        if (stop - start) % 2 == 0:
            _box_muller_(flat[start:stop], scratch, generator)
        else:  # an odd count: draw one normal more than needed
            spare = torch.empty(stop - start + 1, dtype=out.dtype, device=out.device)
            _box_muller_(spare, scratch, generator)
            flat[start:stop] = spare[:-1]
    return out


def standard_normal(shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """i.i.d. N(0, 1) of the given shape, float64."""
    return standard_normal_(torch.empty(shape, dtype=torch.float64, device=device), generator)


def _standard_laplace_(buf: torch.Tensor, scratch: _Scratch, generator: torch.Generator | None) -> None:
    """Fill the 1-D float64 ``buf`` with Lap(0, 1) by inversion of 53-bit uniforms.

    t = 2u - 1 + 2^-53 runs over the odd multiples of 2^-53 in (-1, 1) (exact: a
    grid symmetric about 0 that holds neither 0 nor +-1), and the variate is
    sign(t) * -log(1 - |t|); 1 - |t| is exact, so ``log`` loses nothing against ``log1p``.
    """
    _uniform_integers_(buf, scratch.bits, generator)
    torch.add(_ULP - 1.0, buf, alpha=2.0 * _ULP, out=buf)  # t = 2 k 2^-53 - (1 - 2^-53): exact
    mag = scratch.real[: buf.numel()]
    torch.abs(buf, out=mag)
    torch.sub(1.0, mag, out=mag).log_()  # log(1 - |t|) in [-36.7, 0)
    torch.copysign(mag, buf, out=buf)


def standard_laplace_(out: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Fill the contiguous float64 tensor ``out`` with i.i.d. Lap(0, 1) in place (and return it)."""
    flat = out.view(-1)
    scratch = _Scratch(_chunk_size(flat.numel(), out.device), out.device)
    for start, stop in _chunks(flat.numel(), out.device):
        _standard_laplace_(flat[start:stop], scratch, generator)
    return out


def laplace(
    shape: tuple[int, ...], scale: float, generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    """i.i.d. Laplace(0, scale), float64: scale * sign(t) * -log(1 - |t|) for a uniform t on (-1, 1)."""
    return standard_laplace_(torch.empty(shape, dtype=torch.float64, device=device), generator).mul_(scale)


def standard_gamma(n: int, shape: float, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """n i.i.d. Gamma(shape, 1) draws for shape >= 1, float64.

    Marsaglia & Tsang (2000), an exact rejection method: with d = shape - 1/3,
    c = 1 / sqrt(9 d), x ~ N(0, 1), v = (1 + c x)^3 and u uniform, a trial is
    accepted if v > 0 and log(1 - u) < x^2 / 2 + d (1 - v + log v) (1 - u is
    uniform on (0, 1]), and then d v is a Gamma(shape, 1) draw. This is the exact
    acceptance condition (no squeeze shortcut). Trials are independent and
    accepted with probability > 0.95 for every shape >= 1, so a batch of
    slightly more than n trials is drawn at once and the first n accepted values
    are kept, in order: i.i.d. Gamma, since each accepted value has the Gamma
    law whatever the other trials did. A shortfall (rare) is drawn the same way.
    """
    shape = float(shape)
    if not shape >= 1.0:
        raise ValueError(f"standard_gamma needs shape >= 1, got {shape!r}")
    d = shape - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    parts, have = [torch.empty(0, dtype=torch.float64, device=device)], 0
    while have < n:
        need = n - have
        trials = need + math.ceil(0.06 * need + 4.0 * math.sqrt(need) + 8.0)
        x = standard_normal((trials,), generator, device)
        u = _uniform_integers_(
            torch.empty(trials, dtype=torch.float64, device=device),
            torch.empty(trials, dtype=torch.int64, device=device),
            generator,
        )
        log_u = torch.add(1.0, u, alpha=-_ULP, out=u).log_()  # log(1 - u), 1 - u in (0, 1] exact
        v = x.mul(c).add_(1.0)
        v.mul_(v * v)  # (1 + c x)^3
        # x^2/2 + d (1 - v + log v): NaN or -inf when v <= 0, and then the comparison is false.
        bound = torch.log(v).sub_(v).add_(1.0).mul_(d).addcmul_(x, x, value=0.5)
        parts.append(torch.masked_select(v, log_u < bound)[:need].mul_(d))
        have += parts[-1].numel()
    return parts[-1] if len(parts) <= 2 else torch.cat(parts)


def gamma_integer_shape(n: int, shape: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """n draws of Gamma(shape, 1) for an integer shape >= 1 (the law of a sum of ``shape``
    Exp(1) variates), float64, by :func:`standard_gamma`."""
    if isinstance(shape, bool) or int(shape) != shape or shape < 1:
        raise ValueError(f"shape must be an integer >= 1, got {shape!r}")
    return standard_gamma(n, int(shape), generator, device)


def _row_norms_nonzero(r: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Row norms of the Gaussian rows ``r`` [n, m] (float64), redrawing in place the rows of
    norm 0 (probability ~2^-53 per pair of coordinates; keeps the direction's law exact)."""
    norms = torch.linalg.vector_norm(r, dim=1)
    while norms.numel() and not bool(norms.min() > 0):
        bad = (norms == 0).nonzero().squeeze(1)
        r[bad] = standard_normal((bad.numel(), r.shape[1]), generator, r.device)
        norms[bad] = torch.linalg.vector_norm(r[bad], dim=1)
    return norms


def uniform_directions(n: int, m: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """n unit vectors uniform on S^{m-1} (normalised Gaussians), float64."""
    r = standard_normal((n, m), generator, device)
    return r.div_(_row_norms_nonzero(r, generator).unsqueeze(1))


def gamma_radius_noise(
    n: int, m: int, scale: float, generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    """Noise with density proportional to exp(-||z||_2 / scale) on R^m, float64 [n, m].

    Radius ~ Gamma(m, scale) (the r^{m-1} Jacobian makes it Gamma, not
    exponential), times a uniform direction r / |r|, r ~ N(0, I_m), independent
    of it (docs/SPEC.md §2.2).
    """
    radius = standard_gamma(n, m, generator, device).mul_(scale)
    r = standard_normal((n, m), generator, device)
    return r.mul_(radius.div_(_row_norms_nonzero(r, generator)).unsqueeze(1))


def clip_l2(x: torch.Tensor, radius: float) -> torch.Tensor:
    """x * min(1, radius / ||x||) per row: the projection onto the L2 ball of ``radius``."""
    norms = x.norm(dim=1, keepdim=True)
    return x * torch.clamp(radius / norms.clamp_min(1e-300), max=1.0)
