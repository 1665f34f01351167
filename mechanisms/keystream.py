"""The cryptographic bit source of ``secure-rng``: a ChaCha20 keystream and the generator that reads it.

:class:`SecureGenerator` is a ``torch.Generator`` subclass whose draws all come from a ChaCha20
keystream (RFC 8439, from the ``cryptography`` package) under a 256-bit key from the OS CSPRNG, as
Opacus' ``secure_mode`` draws from a cryptographic generator. This module holds the keystream level
only: the raw words (:meth:`SecureGenerator.words`, :func:`keystream_words`), the random bits every
sampler builds on (:func:`random_bits_`: torch's ``random_`` for a plain generator, keystream words
for a :class:`SecureGenerator`), 53-bit uniforms (:func:`uniform53`) and the counter-based coins of
central sampling (:func:`coins`). The laws drawn from these bits are in :mod:`mechanisms.random_source`
(``rand``, ``randn``, ``randint``, ``randperm``, ``exponential_``) and :mod:`mechanisms.noise`; this
module imports neither.
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
    """A ``torch.Generator`` whose draws through Sanitas' samplers come from a ChaCha20 keystream.

    ``key`` (32 bytes) fixes the stream (tests, audits); ``None`` (every run) takes a fresh key from the
    OS CSPRNG (``os.urandom``) that is never stored or sent. The keystream is consumed in order across
    calls, so successive draws are independent. The inherited torch state is seeded from the OS as well,
    but no sampler of Sanitas reads it. CPU only: draws are moved to the requested device.
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


def keystream_words(
    generator: SecureGenerator, shape: tuple[int, ...], device: torch.device | str | None
) -> torch.Tensor:
    """The next ``prod(shape)`` keystream words of ``generator`` as an int64 tensor of ``shape`` (all 64 bits)."""
    n = math.prod(shape)
    out = torch.from_numpy(generator.words(n).view(np.int64).copy()).reshape(shape)
    return out if device is None else out.to(device)


def as_shape(size: int | tuple[int, ...] | torch.Size) -> tuple[int, ...]:
    """A sampler's ``size`` argument as a tuple of ints."""
    return (int(size),) if isinstance(size, int) else tuple(int(s) for s in size)


def random_bits_(out: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Fill the int64 tensor ``out`` with random bits; the low 53 bits of each are uniform (torch's
    ``random_``: 63 uniform bits; the keystream: 64)."""
    if is_secure(generator):
        assert isinstance(generator, SecureGenerator)
        return out.copy_(keystream_words(generator, tuple(out.shape), out.device))
    return out.random_(generator=generator)


def uniform53(generator: SecureGenerator, shape: tuple[int, ...], device: torch.device | str | None) -> torch.Tensor:
    """k 2^-53, k uniform on [0, 2^53): torch's float64 uniform grid, exactly."""
    return keystream_words(generator, shape, device).bitwise_and_(_MASK53).to(torch.float64).mul_(_ULP)


def coins(key: bytes, first: int, count: int) -> torch.Tensor:
    """Uniforms on [0, 1) (53 bits) for the positions ``first .. first + count - 1`` of ``key``'s
    keystream: counter-based (a node reads only its own users' words), cryptographic."""
    if count <= 0:
        return torch.zeros(0, dtype=torch.float64)
    block, skip = divmod(int(first), _WORDS_PER_BLOCK)
    words = _keystream(key, skip + int(count), block)[skip:]
    return torch.from_numpy((words & np.uint64(_MASK53)).astype(np.float64) * _ULP)
