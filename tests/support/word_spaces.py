"""Small synthetic word spaces for the statistical tests of the word mechanisms (fast, no GloVe load)."""

from __future__ import annotations

import torch

from mechanisms.words import WordSpace


def make_space(num_words: int = 2000, dim: int = 16, seed: int = 0, scale: float = 1.0) -> WordSpace:
    """Words ``w0 .. w{V-1}`` with Gaussian vectors whose norms vary (a heavy-ish tail, like GloVe)."""
    gen = torch.Generator().manual_seed(seed)
    vec = torch.randn(num_words, dim, generator=gen, dtype=torch.float64)
    vec *= scale * (0.5 + torch.rand(num_words, 1, generator=gen, dtype=torch.float64))
    return WordSpace.from_vectors(f"synthetic-{num_words}x{dim}-{seed}", [f"w{i}" for i in range(num_words)], vec)
