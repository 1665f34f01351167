"""The synthetic dataset (``dataset = "synthetic"``): users and embedding vectors generated on demand from a
seed, for scale and speed measurements (no text, no encoder)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# ------------------------------------------------------------------------------------ synthetic
SYNTHETIC = "synthetic"


#: Distance of each class mean from the origin along ``mu``, in units of the per-coordinate noise:
#: the Bayes accuracy of the (linear) best classifier is Phi(1.2816) = 0.90.
SYNTHETIC_SEPARATION = 1.2816


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's increment


_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


_CHUNK_USERS = 8192  # users per vectorised block: temporaries of at most ~13 MB each (d = 384)


def _stream_key(seed: int, split: str, stream: str) -> np.uint64:
    """A 64-bit key per (seed, split, stream): streams never share a SplitMix64 sequence in practice."""
    digest = hashlib.sha256(f"sanitas-synthetic|{seed}|{split}|{stream}".encode()).digest()
    return np.uint64(int.from_bytes(digest[:8], "little"))


def _splitmix(key: np.uint64, counters: np.ndarray) -> np.ndarray:
    """SplitMix64 output number ``counters`` of the sequence seeded by ``key`` (uint64, vectorised)."""
    z = counters.astype(np.uint64, copy=True)
    z *= _GOLDEN
    z += key
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


def _normals(key: np.uint64, users: np.ndarray, dim: int) -> np.ndarray:
    """Standard normals float32 [n, dim]: row i depends only on (key, users[i]).

    Each user owns the counters ``[u * ceil(dim / 2), (u + 1) * ceil(dim / 2))``; one 64-bit hash
    gives two 24-bit uniforms and Box-Muller turns them into two normals (tails cut at 5.9 sigma).
    """
    half = (dim + 1) // 2
    counters = users.astype(np.uint64)[:, None] * np.uint64(half) + np.arange(half, dtype=np.uint64)
    h = _splitmix(key, counters)
    u1 = (h >> np.uint64(40)).astype(np.float32)
    u1 += np.float32(0.5)
    u1 *= np.float32(2.0**-24)
    angle = (h & np.uint64(0xFFFFFF)).astype(np.float32)
    angle *= np.float32(2 * math.pi * 2.0**-24)
    radius = np.log(u1)
    radius *= np.float32(-2.0)
    np.sqrt(radius, out=radius)
    out = np.empty((users.size, 2 * half), dtype=np.float32)
    np.multiply(radius, np.cos(angle), out=out[:, 0::2])
    np.multiply(radius, np.sin(angle), out=out[:, 1::2])
    return out[:, :dim]


@dataclass(frozen=True)
class SyntheticDataset:
    """``dataset = "synthetic"``: users generated on demand, never materialised (see the module docstring).

    For scale and speed measurements only, never for accuracy claims. Every user
    (``num_train`` training, ``num_test`` test) holds one document, its row in
    the split is its user id, and :meth:`rows` generates any block of users.
    """

    num_train: int
    num_test: int
    dim: int
    seed: int
    name: str = SYNTHETIC
    num_classes: int = 2
    label_names: tuple[str, ...] = ("0", "1")
    public: None = None  # no public documents
    dropped_empty: Mapping[str, int] = field(default_factory=dict)
    dropped_short: Mapping[str, int] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return (
            f"synthetic Gaussian mixture: {self.num_train} training users, {self.num_test} test users, "
            f"d = {self.dim} (scale and speed measurements only, never accuracy claims)"
        )

    def size(self, split: str) -> int:
        """Users (= documents) of ``split`` (``"train"`` or ``"test"``)."""
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        return self.num_train if split == "train" else self.num_test

    def mean_direction(self) -> np.ndarray:
        """``mu``: the unit direction of the class means (float64 [d], from the seed)."""
        mu = _normals(_stream_key(self.seed, "all", "mean"), np.zeros(1, dtype=np.int64), self.dim)[0]
        mu = mu.astype(np.float64)
        return mu / np.linalg.norm(mu)

    def rows(self, split: str, users: np.ndarray | range) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings float32 [n, d] (unit rows) and labels int64 [n] of ``users`` of ``split``.

        Depends only on (seed, split, user id): the same user gets the same row whichever
        node or block asks. Memory is O(len(users) * d).
        """
        users = np.asarray(users, dtype=np.int64).reshape(-1)
        total = self.size(split)
        if users.size and (users.min() < 0 or users.max() >= total):
            raise ValueError(f"synthetic {split} users lie in [0, {total}), got ids outside it")
        key_x, key_y = _stream_key(self.seed, split, "vector"), _stream_key(self.seed, split, "label")
        shift = (SYNTHETIC_SEPARATION * self.mean_direction()).astype(np.float32)
        x = np.empty((users.size, self.dim), dtype=np.float32)
        y = (_splitmix(key_y, users) >> np.uint64(63)).astype(np.int64)
        for start in range(0, users.size, _CHUNK_USERS):
            block = slice(start, start + _CHUNK_USERS)
            z = _normals(key_x, users[block], self.dim)
            z += np.where(y[block, None] == 1, shift, -shift)
            z /= np.linalg.norm(z, axis=1, keepdims=True)
            x[block] = z
        return x, y

    def describe(self) -> dict[str, Any]:
        return {
            "dataset": self.name,
            "source": self.source,
            "train_documents": self.num_train,
            "test_documents": self.num_test,
            "public_documents": 0,
            "num_classes": self.num_classes,
            "synthetic_dim": self.dim,
            "synthetic_separation": SYNTHETIC_SEPARATION,
            "note": "synthetic data: for scale and speed measurements only, never for accuracy claims",
            "dropped_empty_documents": dict(self.dropped_empty),
            "dropped_short_documents": dict(self.dropped_short),
        }
