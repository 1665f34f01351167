"""Truncation baseline for document embeddings (Li & Clifton 2021, as used by Meehan et al. ACL 2022; docs/SPEC.md §9).

A document is the list of its k sentence embeddings. The release is

    y = mean_j clip_box(s_j) + Lap(b),    b_d = d * w_d / (k * epsilon),    w_d = hi_d - lo_d,

with ``clip_box`` the coordinate-wise clamp to a public box [lo, hi] and independent
Laplace noise per coordinate. The box is the "75% median interval" of public
document embeddings (:func:`median_box`).

Privacy (pure epsilon-SentDP, docs/SPEC.md §0.1): neighbouring documents have the
same k and differ in one sentence. Clipped sentences lie in the box, so each
coordinate of the mean moves by at most w_d / k, and the Laplace log-density
ratio is at most sum_d (w_d / k) / b_d = sum_d epsilon / d = epsilon. Replacing
all k sentences moves the mean by up to w_d per coordinate: k * epsilon for a
whole document. Both bounds are attained (opposite box corners), see
``tests/mechanisms/test_truncation.py``.
"""

from __future__ import annotations

import math
from functools import reduce

import torch

from .base import DocumentMechanism, check_documents, check_embeddings, check_epsilon, sample_device
from .guarantee import Guarantee, compose_units
from .noise import laplace


def median_box(public_docs: torch.Tensor, fraction: float = 0.75) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-dimension "median interval" of *public* document embeddings ``[n, d]``.

    For each dimension keeps the ``m = ceil(fraction * n)`` values closest to the
    median (the mean of the two middle values when n is even) and returns
    ``(lo, hi)``, the min and max of those, as float64 ``[d]`` tensors. Rounding
    up means the box never holds fewer than ``fraction`` of the values; a
    distance tie at the edge goes to the lower value. With distinct values exactly
    m values of each column lie in [lo_d, hi_d].

    The box is a mechanism parameter, so it must come from public data only: a box
    fitted on the documents being sanitized leaks them outside the guarantee.
    """
    x = check_embeddings(public_docs, "public_docs")
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"public_docs needs at least 2 documents to fit a box, got {n}")
    f = float(fraction)
    if not 0.0 < f <= 1.0:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction!r}")
    m = max(1, math.ceil(f * n - 1e-9))  # the guard keeps 0.7 * 10 = 7.000000000000001 at 7
    s = x.to(torch.float64).sort(dim=0).values
    median = (s[(n - 1) // 2] + s[n // 2]) / 2
    # Stable sort on distance over sorted values: ties keep the lower value first.
    nearest = (s - median).abs().argsort(dim=0, stable=True)[:m]
    kept = s.gather(0, nearest)
    return kept.min(dim=0).values, kept.max(dim=0).values


def _check_box(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    for name, t in (("lo", lo), ("hi", hi)):
        if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.numel() == 0:
            raise ValueError(
                f"{name} must be a non-empty 1-D tensor [d], got "
                f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}"
            )
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} contains NaN or infinite values")
    if lo.shape != hi.shape:
        raise ValueError(f"lo and hi must have the same shape, got {tuple(lo.shape)} and {tuple(hi.shape)}")
    lo64 = lo.detach().to(device="cpu", dtype=torch.float64).clone()
    hi64 = hi.detach().to(device="cpu", dtype=torch.float64).clone()
    bad = (hi64 <= lo64).nonzero().flatten().tolist()
    if bad:
        raise ValueError(
            f"the box needs lo < hi in every dimension; {len(bad)} dimension(s) have lo >= hi "
            f"(first: {bad[:5]}). A zero-width dimension would get zero noise"
        )
    return lo64, hi64


class Truncation(DocumentMechanism):
    """Clip sentences to a public box, average, add Lap(d * w_d / (k epsilon)) per coordinate.

    Parameters
    ----------
    epsilon : float
        Pure SentDP parameter: the cost of replacing one sentence of a document.
    lo, hi : Tensor [d]
        The public clipping box, ``lo < hi`` in every dimension (see :func:`median_box`
        and :meth:`from_public`).
    """

    name = "truncation"

    def __init__(self, epsilon: float, lo: torch.Tensor, hi: torch.Tensor) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.lo, self.hi = _check_box(lo, hi)
        self.width = self.hi - self.lo

    @classmethod
    def from_public(cls, epsilon: float, public_docs: torch.Tensor, fraction: float = 0.75) -> Truncation:
        """The mechanism with the :func:`median_box` of public document embeddings ``[n, d]``."""
        return cls(epsilon, *median_box(public_docs, fraction))

    @property
    def dim(self) -> int:
        return self.lo.numel()

    @property
    def guarantee(self) -> Guarantee:
        """Pure epsilon per sentence: one sentence moves each mean coordinate by <= w_d/k,
        an L1 loss of sum_d (w_d/k) / b_d = epsilon."""
        return Guarantee(notion="pure", epsilon=self.epsilon, granularity="sentence")

    def document_guarantee(self, num_sentences: int) -> Guarantee:
        """Pure ``num_sentences * epsilon``: the whole mean moves by <= w_d per coordinate (tight)."""
        return compose_units(self.guarantee, num_sentences, "document")

    def scale(self, num_sentences: int | torch.Tensor) -> torch.Tensor:
        """Laplace scales ``b_d = d * w_d / (k * epsilon)``, float64: ``[d]`` for an int k,
        ``[n, d]`` (on the tensor's device) for a tensor of n sentence counts."""
        if isinstance(num_sentences, torch.Tensor):
            k = num_sentences.to(torch.float64).unsqueeze(1)
            return self.dim * self.width.to(k.device) / (k * self.epsilon)
        if isinstance(num_sentences, bool) or not isinstance(num_sentences, int) or num_sentences < 1:
            raise ValueError(f"num_sentences must be an integer >= 1, got {num_sentences!r}")
        return self.dim * self.width / (num_sentences * self.epsilon)

    def _clipped_means(self, docs: list[torch.Tensor], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Clipped means [n, d] (float64) and sentence counts [n] of checked documents on ``device``.

        Documents of equal length are stacked to ``[n_k, k, d]`` and reduced together: the
        Python loop runs over distinct lengths, never over sentences. (A flat segment sum
        with index_add_/scatter_add_ works too, but on CPU those enter a thread pool even
        for tiny inputs and cost milliseconds per call on a busy machine.)
        """
        groups: dict[int, list[int]] = {}
        for i, doc in enumerate(docs):
            groups.setdefault(doc.shape[0], []).append(i)
        lo, hi = self.lo.to(device), self.hi.to(device)
        means = torch.empty((len(docs), self.dim), dtype=torch.float64, device=device)
        for k, rows in groups.items():
            block = torch.stack([docs[i] for i in rows]).to(device=device, dtype=torch.float64)
            means[torch.tensor(rows, device=device)] = block.clamp_(lo, hi).sum(dim=1) / k  # block is a fresh copy
        counts = torch.tensor([doc.shape[0] for doc in docs], dtype=torch.int64, device=device)
        return means, counts

    def clipped_means(self, docs: list[torch.Tensor]) -> torch.Tensor:
        """The noise-free centre of each release (float64 ``[n, d]``). Not a release: no privacy."""
        docs = check_documents(docs, dim=self.dim)
        if not docs:
            return torch.empty((0, self.dim), dtype=torch.float64)
        return self._clipped_means(docs, docs[0].device)[0]

    @torch.no_grad()
    def sanitize(self, docs: list[torch.Tensor], generator: torch.Generator | None = None) -> torch.Tensor:
        """One independent release ``[n, d]`` per document (each ``[k_i, d]``, k_i >= 2).

        Sampled in float64 on the generator's device; returned in the documents'
        (promoted) floating dtype on the first document's device. Rounding to that
        dtype is post-processing and costs nothing. An empty list gives a float64 ``[0, d]``.
        """
        docs = check_documents(docs, dim=self.dim)
        if not docs:
            return torch.empty((0, self.dim), dtype=torch.float64)
        device = sample_device(docs[0].device, generator)
        means, counts = self._clipped_means(docs, device)
        noise = laplace(tuple(means.shape), 1.0, generator, device) * self.scale(counts)
        dtype = reduce(torch.promote_types, (doc.dtype for doc in docs))
        return (means + noise).to(device=docs[0].device, dtype=dtype)

    def log_density(self, doc: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Exact log-density (float64) of release ``y`` (``[d]`` or ``[m, d]``) given ``doc`` ``[k, d]``.

        Returns ``[]`` or ``[m]``: sum_d -log(2 b_d) - |y_d - c_d| / b_d with c the clipped mean.
        """
        (doc,) = check_documents([doc], dim=self.dim)
        centre, counts = self._clipped_means([doc], torch.device("cpu"))
        b = self.scale(counts)[0]
        if not isinstance(y, torch.Tensor) or y.dim() not in (1, 2) or y.shape[-1] != self.dim:
            raise ValueError(
                f"y must be a tensor [{self.dim}] or [m, {self.dim}], got "
                f"{tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__}"
            )
        y = y.detach().to(device="cpu", dtype=torch.float64)
        return -torch.log(2 * b).sum() - ((y - centre[0]).abs() / b).sum(dim=-1)


__all__ = ["Truncation", "median_box"]
