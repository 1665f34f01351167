"""The input map M1 (d -> m') of Du et al. (2023), in the four ``map-in`` modes.

Only a map that does not depend on private data keeps the sanitizer's local-DP
guarantee meaningful for the released vector (docs/SPEC.md §3.2-3.3):

* ``identity``: no map (m' = d).
* ``random``: a Gaussian (JL) projection from the public ``map-seed``; every
  client derives it itself.
* ``public``: trained by the server together with M2 and the classifier on the
  *public* split only, then frozen and sent to the clients.
* ``leaky``: the behaviour of Du et al.'s Sentence-LDP code (docs/SPEC.md §3.1,
  §13.1). Clients send the gradient of the loss with respect to M1, computed
  from their raw embeddings and true labels through the noise. Those gradients
  are not sanitized, so **no local-DP guarantee holds**; allowed only with
  ``allow-unaccounted-leakage = true``.

In the first three modes the mechanism input is computed under ``no_grad`` from
a detached tensor (:func:`apply_input_map`), so no gradient path reaches M1 or
the encoder (docs/SPEC.md §11.6).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from mechanisms.base import SentenceMechanism, normalize_rows

from . import config as config_mod
from .pipeline import train_epochs

MODES: tuple[str, ...] = ("identity", "random", "public", "leaky")
FROM_SERVER: tuple[str, ...] = ("public", "leaky")  # modes where the clients receive M1


def map_dim(cfg: Mapping[str, Any], d: int) -> int:
    """m', the dimension of M1's output (the mechanism's input)."""
    return d if cfg["map-in"] == "identity" else int(cfg["map-dim"])


def release_dim(cfg: Mapping[str, Any], d: int) -> int:
    """Columns of a released vector: the sentence mechanism's output on m' = map_dim inputs."""
    m_prime = map_dim(cfg, d)
    return int(config_mod.make_mechanism(cfg, "sentence", input_dim=m_prime).output_dim(m_prime))


def input_map(kind: str, d: int, m_prime: int, seed: int) -> torch.Tensor | None:
    """M1 as a [d, m'] matrix derived from public values (``None`` for the identity).

    ``"random"`` (and the starting point of ``"public"``/``"leaky"``): entries
    i.i.d. N(0, 1/m') from ``torch.Generator(seed)``, so the server and every
    client derive the same matrix from the public seed.
    """
    if kind not in MODES:
        raise ValueError(f"unknown map-in {kind!r}; use one of {MODES}")
    if kind == "identity":
        return None
    gen = torch.Generator().manual_seed(int(seed))
    return torch.randn(d, m_prime, generator=gen, dtype=torch.float64) / math.sqrt(m_prime)


def map_version(matrix: torch.Tensor | None) -> str:
    """A short fingerprint of M1: releases made under another M1 are stale."""
    if matrix is None:
        return "identity"
    return hashlib.sha256(matrix.detach().cpu().to(torch.float64).numpy().tobytes()).hexdigest()[:16]


@torch.no_grad()
def apply_input_map(emb: np.ndarray | torch.Tensor, matrix: torch.Tensor | None) -> torch.Tensor:
    """n(M1 x) for each row: float64, unit rows, and no gradient path to ``emb`` or M1."""
    x = torch.as_tensor(emb).detach().to(torch.float64)
    if matrix is not None:
        if x.shape[1] != matrix.shape[0]:
            raise ValueError(f"embedding dimension {x.shape[1]} does not match the input map's {matrix.shape[0]}")
        x = x @ matrix.detach().to(torch.float64)
    return normalize_rows(x)


def straight_through(mech: SentenceMechanism, h: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """The sanitized value of ``h`` in the forward pass, the gradient of the
    noise-free output ``mech.clean(h)`` in the backward pass.

    This is how Du et al.'s Sentence-LDP code (docs/SPEC.md §3.1) lets gradients
    "flow through the noise" (for planar Laplace, mu + Z, it is the exact
    Jacobian). Use it only on public data or in the ``leaky`` mode: the gradient
    it produces is not private.
    """
    noisy = mech.sanitize(h.detach(), generator=generator).to(h.dtype)
    clean = mech.clean(h)
    return clean + (noisy - clean).detach()


def _mapped(emb: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """n(x M1) with gradients (float32), for training M1."""
    return torch.nn.functional.normalize(emb @ weight, dim=1)


def train_public_map(
    weight: torch.Tensor,
    model: nn.Module,
    emb: torch.Tensor,
    labels: torch.Tensor,
    mech: SentenceMechanism,
    epochs: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator,
    progress: Callable[[], None] | None = None,
) -> tuple[torch.Tensor, float]:
    """Train M1 (``weight``, [d, m']) with ``model`` (M2 + classifier) on *public* data.

    The mechanism's noise is in the loop (straight-through), so M1, M2 and the
    classifier learn to cope with it, as in the paper, but only public documents
    are used, so the result is public. Returns the frozen M1 (float64, detached)
    and the last epoch's loss; ``model`` is trained in place.
    """
    w = nn.Parameter(weight.detach().to(emb.device, torch.float32).clone())
    optimizer = torch.optim.Adam([w, *model.parameters()], lr=lr)

    def forward(batch: torch.Tensor) -> torch.Tensor:
        return model(straight_through(mech, _mapped(batch, w), generator))

    last = train_epochs(model, optimizer, emb, labels, epochs, batch_size, generator, progress, forward=forward)
    return w.detach().to("cpu", torch.float64), last


def leaky_map_gradient(
    matrix: torch.Tensor,
    model: nn.Module,
    emb: torch.Tensor,
    labels: torch.Tensor,
    mech: SentenceMechanism,
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The Sentence-LDP code's client step (docs/SPEC.md §3.1): (released rows, summed dLoss/dM1).

    The release is the sanitized n(x M1); the gradient is computed from the raw
    embeddings and true labels through the same noise draw. **The gradient is
    not private** (for one example it is a rank-one outer product that reveals
    the embedding up to scale, docs/SPEC.md §3.2).
    """
    w = matrix.detach().to(torch.float32).clone().requires_grad_(True)
    x = torch.as_tensor(emb, dtype=torch.float32)
    released = straight_through(mech, _mapped(x, w), generator)
    model.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(released.to(torch.float32)), labels, reduction="sum")
    (grad,) = torch.autograd.grad(loss, w)
    return released.detach(), grad.detach()
