"""Where a mechanism's randomness comes from: torch's generator, or a cryptographic keystream.

Every sampler of Sanitas takes a ``torch.Generator``. By default that is torch's CPU generator
(Mersenne Twister, MT19937), seeded from the node's secret: fast and reproducible, but not a
cryptographic generator (its outputs are predictable from enough earlier outputs). With
``secure-rng = true`` a node passes a :class:`~mechanisms.keystream.SecureGenerator` instead: a
``torch.Generator`` subclass whose draws all come from a ChaCha20 keystream (RFC 8439, from the
``cryptography`` package) under a 256-bit key from the OS CSPRNG, as Opacus' ``secure_mode`` draws
from a cryptographic generator. The generator and its raw bits (:func:`~mechanisms.keystream.random_bits_`,
the coins of central sampling) are in :mod:`mechanisms.keystream`; this module draws the laws.

torch's samplers cannot take a custom bit source, so the draws go through the functions below
(:func:`rand`, :func:`randn`, :func:`randint`, :func:`randperm`, :func:`exponential_`) and
:func:`mechanisms.keystream.random_bits_`: for a plain ``torch.Generator`` each calls exactly the
torch sampler it replaces (the same stream, bit for bit); for a
:class:`~mechanisms.keystream.SecureGenerator` it builds the same law from keystream words, by hand
(no well-kept library maps a cryptographic byte stream to torch tensors of these laws). A
:class:`~mechanisms.keystream.SecureGenerator` handed straight to a torch sampler would draw from its
(OS-seeded) Mersenne Twister state instead: ``tests/mechanisms/test_random_source.py`` runs every
mechanism with two secure generators of one key and different torch states and requires equal
releases, so no sampler may bypass these functions.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from mechanisms.keystream import SecureGenerator, as_shape, is_secure, keystream_words, uniform53
from mechanisms.noise import standard_normal_

__all__ = ["exponential_", "generator_name", "rand", "randint", "randn", "randperm"]


def generator_name(secure: bool) -> str:
    """The generator that draws a run's noise, as the guarantee line names it."""
    return (
        "ChaCha20 keystream keyed from the OS CSPRNG (secure-rng)"
        if secure
        else "torch's Mersenne Twister seeded from the secret (not a cryptographic generator)"
    )


def rand(
    size: int | tuple[int, ...] | torch.Size,
    generator: torch.Generator | None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Uniform on [0, 1) (``torch.rand``); the keystream path gives 53-bit float64 uniforms, and 24-bit
    ones for float32 (never rounded up to 1)."""
    shape = as_shape(size)
    if not is_secure(generator):
        return torch.rand(shape, generator=generator, dtype=dtype, device=device)
    assert isinstance(generator, SecureGenerator)
    if dtype == torch.float64:
        return uniform53(generator, shape, device)
    bits = {torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}[dtype]  # the mantissa, as torch.rand
    k = keystream_words(generator, shape, device).bitwise_and_((1 << bits) - 1)
    return k.to(torch.float64).mul_(2.0**-bits).to(dtype)


def randn(
    size: int | tuple[int, ...] | torch.Size,
    generator: torch.Generator | None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """N(0, 1) (``torch.randn``, into ``out`` when given); the keystream path runs Box-Muller on 53-bit
    uniforms (:func:`mechanisms.noise.standard_normal_`) in float64, then casts."""
    shape = as_shape(size)
    if not is_secure(generator):
        if out is not None:
            return torch.randn(shape, generator=generator, dtype=dtype, device=device, out=out)
        return torch.randn(shape, generator=generator, dtype=dtype, device=device)
    normals = standard_normal_(torch.empty(shape, dtype=torch.float64), generator)
    if out is not None:
        return out.copy_(normals)
    return normals.to(dtype=dtype, device=device)


def exponential_(out: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Fill ``out`` with Exp(1) (``Tensor.exponential_``); the keystream path: -log(1 - u), 1 - u on (0, 1]."""
    if not is_secure(generator):
        return out.exponential_(generator=generator)
    assert isinstance(generator, SecureGenerator)
    u = uniform53(generator, tuple(out.shape), out.device)
    return out.copy_(torch.sub(1.0, u).log_().neg_())


def randint(
    low: int,
    high: int,
    size: int | tuple[int, ...] | torch.Size,
    generator: torch.Generator | None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Integers uniform on [low, high) (``torch.randint``, int64); the keystream path is exact: 63-bit
    words at or above the largest multiple of the range are redrawn."""
    shape = as_shape(size)
    if not is_secure(generator):
        return torch.randint(low, high, shape, generator=generator, device=device)
    assert isinstance(generator, SecureGenerator)
    span = int(high) - int(low)
    if span < 1:
        raise ValueError(f"randint needs high > low, got [{low}, {high})")
    limit = np.uint64((1 << 63) - (1 << 63) % span)
    need, kept = math.prod(shape), np.empty(0, dtype=np.uint64)
    while kept.size < need:  # accepts with probability > 1/2 per word; about one pass in practice
        draw = generator.words(need - kept.size + 8) >> np.uint64(1)
        kept = np.concatenate([kept, draw[draw < limit]])
    values = (kept[:need] % np.uint64(span)).astype(np.int64) + int(low)
    out = torch.from_numpy(values).reshape(shape)
    return out if device is None else out.to(device)


def randperm(n: int, generator: torch.Generator | None, device: torch.device | str | None = None) -> torch.Tensor:
    """A uniform permutation of range(n) (``torch.randperm``); the keystream path sorts n random 64-bit
    keys (uniform unless two keys tie, probability below n^2 / 2^65)."""
    if not is_secure(generator):
        return torch.randperm(int(n), generator=generator, device=device)
    assert isinstance(generator, SecureGenerator)
    order = torch.from_numpy(np.argsort(generator.words(int(n)), kind="stable").astype(np.int64))
    return order if device is None else order.to(device)
