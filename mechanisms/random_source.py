"""Where a mechanism's randomness comes from: torch's generator, or a cryptographic keystream.

Every sampler of Sanitas takes a ``torch.Generator``. By default that is torch's CPU generator
(Mersenne Twister, MT19937), seeded from the node's secret: fast and reproducible, but not a
cryptographic generator (its outputs are predictable from enough earlier outputs). With
``secure-rng = true`` a node passes a :class:`SecureGenerator` instead: a ``torch.Generator``
subclass whose draws all come from a ChaCha20 keystream (RFC 8439, from the ``cryptography``
package) under a 256-bit key from the OS CSPRNG, as Opacus' ``secure_mode`` draws from a
cryptographic generator.

torch's samplers cannot take a custom bit source, so the draws go through the functions below
(:func:`random_bits_`, :func:`rand`, :func:`randn`, :func:`randint`, :func:`randperm`,
:func:`exponential_`): for a plain ``torch.Generator`` each calls exactly the torch sampler it
replaces (the same stream, bit for bit); for a :class:`SecureGenerator` it builds the same law from
keystream words, by hand (no well-kept library maps a cryptographic byte stream to torch tensors of
these laws). A :class:`SecureGenerator` handed straight to a torch sampler would draw from its
(OS-seeded) Mersenne Twister state instead: ``tests/mechanisms/test_random_source.py`` runs every
mechanism with two secure generators of one key and different torch states and requires equal
releases, so no sampler may bypass these functions.
"""

from __future__ import annotations

import hashlib
import math
import os
import secrets

import numpy as np
import torch
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

_MASK53 = (1 << 53) - 1
_ULP = 2.0**-53
_WORDS_PER_BLOCK = 8  # ChaCha20 emits 64-byte blocks: 8 words of 64 bits


def _keystream(key: bytes, words: int, first_block: int = 0) -> np.ndarray:
    """``words`` uint64 words of the ChaCha20 keystream of ``key`` (nonce 0), from block ``first_block``."""
    # cryptography's ChaCha20 nonce is the 32-bit little-endian block counter, then a 96-bit nonce.
    nonce = int(first_block).to_bytes(4, "little") + bytes(12)
    encryptor = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()
    return np.frombuffer(encryptor.update(bytes(8 * int(words))), dtype="<u8")


class SecureGenerator(torch.Generator):
    """A ``torch.Generator`` whose draws through this module come from a ChaCha20 keystream.

    ``key`` (32 bytes) fixes the stream (tests, audits); ``None`` (every run) takes a fresh key from the
    OS CSPRNG (``os.urandom``) that is never stored or sent. The keystream is consumed in order across
    calls, so successive draws are independent. The inherited torch state is seeded from the OS as well,
    but no sampler of this module reads it. CPU only: draws are moved to the requested device.
    """

    def __new__(cls, key: bytes | None = None) -> SecureGenerator:
        return super().__new__(cls, "cpu")  # type: ignore[call-arg]  # torch.Generator takes its device here

    def __init__(self, key: bytes | None = None) -> None:
        super().__init__()
        if key is not None and len(key) != 32:
            raise ValueError(f"a ChaCha20 key is 32 bytes, got {len(key)}")
        self.manual_seed(secrets.randbits(63))
        self._encryptor = Cipher(algorithms.ChaCha20(key or os.urandom(32), bytes(16)), mode=None).encryptor()

    @classmethod
    def from_material(cls, *parts: object) -> SecureGenerator:
        """A generator keyed by SHA-256 of ``parts`` (deterministic; tests and audits only)."""
        return cls(hashlib.sha256("|".join(map(str, parts)).encode()).digest())

    def words(self, n: int) -> np.ndarray:
        """The next ``n`` keystream words (uint64)."""
        return np.frombuffer(self._encryptor.update(bytes(8 * int(n))), dtype="<u8")


def is_secure(generator: torch.Generator | None) -> bool:
    """Whether draws from ``generator`` come from a cryptographic keystream."""
    return isinstance(generator, SecureGenerator)


def generator_name(secure: bool) -> str:
    """The generator that draws a run's noise, as the guarantee line names it."""
    return (
        "ChaCha20 keystream keyed from the OS CSPRNG (secure-rng)"
        if secure
        else "torch's Mersenne Twister seeded from the secret (not a cryptographic generator)"
    )


def _words(generator: SecureGenerator, shape: tuple[int, ...], device: torch.device | str | None) -> torch.Tensor:
    n = math.prod(shape)
    out = torch.from_numpy(generator.words(n).view(np.int64).copy()).reshape(shape)
    return out if device is None else out.to(device)


def _shape(size: int | tuple[int, ...] | torch.Size) -> tuple[int, ...]:
    return (int(size),) if isinstance(size, int) else tuple(int(s) for s in size)


def random_bits_(out: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Fill the int64 tensor ``out`` with random bits; the low 53 bits of each are uniform (torch's
    ``random_``: 63 uniform bits; the keystream: 64)."""
    if is_secure(generator):
        assert isinstance(generator, SecureGenerator)
        return out.copy_(_words(generator, tuple(out.shape), out.device))
    return out.random_(generator=generator)


def _uniform53(generator: SecureGenerator, shape: tuple[int, ...], device: torch.device | str | None) -> torch.Tensor:
    """k 2^-53, k uniform on [0, 2^53): torch's float64 uniform grid, exactly."""
    return _words(generator, shape, device).bitwise_and_(_MASK53).to(torch.float64).mul_(_ULP)


def rand(
    size: int | tuple[int, ...] | torch.Size,
    generator: torch.Generator | None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Uniform on [0, 1) (``torch.rand``); the keystream path gives 53-bit float64 uniforms, and 24-bit
    ones for float32 (never rounded up to 1)."""
    shape = _shape(size)
    if not is_secure(generator):
        return torch.rand(shape, generator=generator, dtype=dtype, device=device)
    assert isinstance(generator, SecureGenerator)
    if dtype == torch.float64:
        return _uniform53(generator, shape, device)
    bits = {torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}[dtype]  # the mantissa, as torch.rand
    k = _words(generator, shape, device).bitwise_and_((1 << bits) - 1)
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
    shape = _shape(size)
    if not is_secure(generator):
        if out is not None:
            return torch.randn(shape, generator=generator, dtype=dtype, device=device, out=out)
        return torch.randn(shape, generator=generator, dtype=dtype, device=device)
    from mechanisms.noise import standard_normal_  # noise draws its bits here: imported on use

    normals = standard_normal_(torch.empty(shape, dtype=torch.float64), generator)
    if out is not None:
        return out.copy_(normals)
    return normals.to(dtype=dtype, device=device)


def exponential_(out: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Fill ``out`` with Exp(1) (``Tensor.exponential_``); the keystream path: -log(1 - u), 1 - u on (0, 1]."""
    if not is_secure(generator):
        return out.exponential_(generator=generator)
    assert isinstance(generator, SecureGenerator)
    u = _uniform53(generator, tuple(out.shape), out.device)
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
    shape = _shape(size)
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


def coins(key: bytes, first: int, count: int) -> torch.Tensor:
    """Uniforms on [0, 1) (53 bits) for the positions ``first .. first + count - 1`` of ``key``'s
    keystream: counter-based (a node reads only its own users' words), cryptographic."""
    if count <= 0:
        return torch.zeros(0, dtype=torch.float64)
    block, skip = divmod(int(first), _WORDS_PER_BLOCK)
    words = _keystream(key, skip + int(count), block)[skip:]
    return torch.from_numpy((words & np.uint64(_MASK53)).astype(np.float64) * _ULP)
