"""Sentence- and label-level pairs: the worst-case-style pair of a mechanism and the epsilon its
guarantee claims for a pair.

Part of :mod:`mechanisms.audit` (its docstring states the audit's guarantee)."""

from __future__ import annotations

import inspect
import math
from typing import Any

import torch

from ..base import Mechanism
from ..guarantee import Guarantee


# --------------------------------------------------------------------------- mechanisms
def pair_distance(guarantee: Guarantee, x: torch.Tensor, x_prime: torch.Tensor) -> float | None:
    """d(x, x') in the guarantee's metric ("angular" or "euclidean"); None otherwise."""
    x, x_prime = x.reshape(-1).to(torch.float64), x_prime.reshape(-1).to(torch.float64)
    if guarantee.metric == "angular":
        cos = float(x @ x_prime) / (float(x.norm()) * float(x_prime.norm()))
        return math.acos(max(-1.0, min(1.0, cos)))
    if guarantee.metric == "euclidean":
        return float((x - x_prime).norm())
    return None


def claimed_epsilon(guarantee: Guarantee, x: torch.Tensor | None = None, x_prime: torch.Tensor | None = None) -> float:
    """The epsilon the guarantee claims for the pair (x, x').

    Metric: eps * d(x, x') for the angular and Euclidean metrics, else the pure
    eps * diameter of ``as_ldp`` (an upper bound on eps * d). Pure / approx: eps.
    """
    if guarantee.notion == "metric" and x is not None and x_prime is not None:
        d = pair_distance(guarantee, x, x_prime)
        if d is not None:
            return float(guarantee.epsilon) * d
    return guarantee.as_ldp()[0]


def default_pair(mech: Mechanism, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Worst-case-style sentence pair (x, -x) of shape [dim], float64 (docs/SPEC.md §15.6).

    PrivEmb-like mechanisms (a public ``phi`` [k, dim]; it is drawn by a warm-up
    call if needed) get x = the top right singular vector of phi; mechanisms with
    a finite public ``domain`` get the two domain points farthest apart (after
    phi when there is one). A mechanism that knows its tight pair states it as
    ``mech.default_audit_pair(dim)`` (class_rr: two inputs of different public
    classes; for K > 2 the constant x and -x both have class 0, argmax ties).
    """
    stated = getattr(mech, "default_audit_pair", None)
    if callable(stated):
        x, x_prime = stated(dim)
        return x.to(torch.float64).reshape(-1), x_prime.to(torch.float64).reshape(-1)
    phi = _public_projection(mech, dim)
    domain = getattr(mech, "domain", None)
    if isinstance(domain, torch.Tensor):
        pts = domain.to(torch.float64)
        emb = pts @ phi.T if phi is not None else pts
        far = torch.cdist(emb, emb)
        i, j = divmod(int(far.argmax()), far.shape[1])
        return pts[i].clone(), pts[j].clone()
    if phi is not None:
        x = torch.linalg.svd(phi, full_matrices=False).Vh[0]
    else:
        radius = float(getattr(mech, "clip", 1.0))
        x = torch.full((dim,), radius / math.sqrt(dim), dtype=torch.float64)
    return x, -x


def _no_sanitize(*args: object, **kwargs: object) -> torch.Tensor:
    raise TypeError("this mechanism has no sanitize(): audit it at its own level")


def _public_projection(mech: Mechanism, dim: int) -> torch.Tensor | None:
    try:
        phi = getattr(mech, "phi", None)
    except RuntimeError:  # drawn lazily at the first call: draw it now (public, seed-determined)
        mech.sanitize(  # type: ignore[attr-defined]  # sentence mechanisms that project (PrivEmb) have phi
            torch.ones(1, dim, dtype=torch.float64) / math.sqrt(dim),
            generator=torch.Generator().manual_seed(0),
        )
        phi = getattr(mech, "phi", None)
    if isinstance(phi, torch.Tensor) and phi.dim() == 2 and phi.shape[1] == dim:
        return phi.to(torch.float64)
    return None


def _check_prior(mech: Mechanism, prior: Any, num_classes: int) -> torch.Tensor:
    """The prior as a normalised float64 [K] tensor, after checking it and that ``mech`` takes one."""
    try:
        takes_prior = "prior" in inspect.signature(mech.sanitize).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        takes_prior = False
    if not takes_prior:
        raise ValueError(f"mechanism {mech.name!r} does not take a label prior (its sanitize has no 'prior')")
    row = torch.as_tensor(prior, dtype=torch.float64).reshape(-1).clone()
    if row.numel() != num_classes or not bool(torch.isfinite(row).all()) or bool((row < 0).any()):
        raise ValueError(f"prior must be {num_classes} finite, non-negative numbers, got {prior!r}")
    total = float(row.sum())
    if not total > 0:
        raise ValueError("prior must have a positive sum")
    return row / total
