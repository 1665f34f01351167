"""Base classes and input checks shared by every mechanism.

A mechanism is pure torch: it never knows it runs inside a federation. It
states its :class:`~mechanisms.guarantee.Guarantee` and samples with an explicit
``torch.Generator`` so that runs are reproducible and noise is independent
across rows and calls (never seeded from the data).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from .guarantee import Guarantee, compose_units
from .levels import LEVELS  # noqa: F401 - mechanisms.base.LEVELS, as before
from .tokenize import detokenize, tokenize


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float, or raise ``ValueError`` unless 0 < eps < inf.

    There is no "epsilon <= 0 switches privacy off" convention (a bug of the
    Sentence-LDP code, docs/SPEC.md §13.1): use the ``"none"`` mechanism for that.
    """
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {epsilon!r}") from None
    if math.isnan(eps) or math.isinf(eps) or eps <= 0.0:
        raise ValueError(
            f"{name} must be > 0 and finite, got {epsilon!r} (use the 'none' mechanism to release without privacy)"
        )
    return eps


def check_embeddings(x: torch.Tensor, name: str = "x") -> torch.Tensor:
    """Check a batch of embeddings ``[n, m]`` (m >= 2, finite) and detach it."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape [n, m], got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name} must have shape [n, m], got shape {tuple(x.shape)}")
    if x.shape[1] < 2:
        raise ValueError(f"{name} must have dimension m >= 2, got m = {x.shape[1]}")
    if not torch.is_floating_point(x):
        raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}")
    x = x.detach()
    # One reduction instead of an isfinite scan: a NaN or infinite entry makes the sum NaN or
    # infinite (in any summation order); only a sum that overflows needs the exact scan.
    if not bool(torch.isfinite(x.sum())) and not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).any(dim=1).sum())
        raise ValueError(f"{name} contains NaN or infinite values in {bad} row(s)")
    return x


def check_labels(y: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Check integer labels in ``[0, num_classes)`` with ``num_classes >= 2``."""
    if not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    if not isinstance(y, torch.Tensor) or y.dim() != 1:
        raise ValueError("labels must be a 1-D LongTensor")
    if y.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise ValueError(f"labels must be an integer tensor, got {y.dtype}")
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes}), got range [{int(y.min())}, {int(y.max())}]")
    return y.detach().to(torch.int64)


def normalize_rows(x: torch.Tensor) -> torch.Tensor:
    """Project rows onto the unit sphere; rows of norm < 1e-12 map to e1.

    Mapping (near-)zero rows to a fixed public vector is a deterministic map and
    costs no privacy; ``F.normalize`` would instead return a zero vector, and a
    sphere mechanism's output would then leave the sphere (docs/SPEC.md §1.2).
    """
    norms = x.norm(dim=1, keepdim=True)
    tiny = norms.squeeze(1) < 1e-12
    out = x / norms.clamp_min(1e-300)
    if bool(tiny.any()):
        e1 = torch.zeros_like(x[0])
        e1[0] = 1.0
        out[tiny] = e1
    return out


def _inverse_row_norms(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(1 / ||row||, rows of norm < 1e-12)`` of a float64 [n, m] tensor; the inverse is 0 on those rows."""
    norms = torch.linalg.vector_norm(x, dim=1)
    tiny = norms < 1e-12
    inv = norms.clamp_min_(1e-300).reciprocal_()
    return inv.masked_fill_(tiny, 0.0), tiny


def add_unit_rows_(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``y += normalize_rows(x)`` in place, in float64 (``y`` float64 [n, m], ``x`` of any float dtype)."""
    x64 = x.to(device=y.device, dtype=torch.float64)
    inv, tiny = _inverse_row_norms(x64)
    y.addcmul_(x64, inv.unsqueeze(1))
    if bool(tiny.any()):
        y[tiny, 0] += 1.0  # the public vector e1
    return y


def normalize_rows_(y: torch.Tensor) -> torch.Tensor:
    """``normalize_rows(y)`` in place (``y`` float64; rows of norm < 1e-12 become e1)."""
    inv, tiny = _inverse_row_norms(y)
    y.mul_(inv.unsqueeze(1))
    if bool(tiny.any()):
        y[tiny, 0] = 1.0  # the row is 0 after the product: e1
    return y


def unit_rows_for_sampling(
    x: torch.Tensor, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor, torch.device]:
    """Checked, detached ``x``, its rows on the unit sphere in float64 on the sampling device, and that device."""
    x = check_embeddings(x)
    device = sample_device(x.device, generator)
    return x, normalize_rows(x.to(device=device, dtype=torch.float64)), device


def sample_device(x_device: torch.device, generator: torch.Generator | None) -> torch.device:
    """Device to draw random numbers on: the generator's device when one is given."""
    return generator.device if generator is not None else x_device


class Mechanism(ABC):
    """A local randomizer with a stated guarantee.

    Subclasses set ``name`` and ``level`` and implement ``guarantee``.
    """

    name: ClassVar[str] = ""
    level: ClassVar[str] = ""

    @property
    @abstractmethod
    def guarantee(self) -> Guarantee:
        """The guarantee of one release (one row of one call)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.guarantee.describe()})"


class SentenceMechanism(Mechanism):
    """Sanitizes sentence embeddings: one row = one privacy unit."""

    level: ClassVar[str] = "sentence"
    #: Whether :meth:`clean` carries the gradient of a release with respect to its input, which training
    #: through the mechanism needs (:func:`straight_through`: ``map-in = "public"`` or ``"leaky"``,
    #: ``tuning-noise``). Declared by the mechanism so that a config asking for it is refused in one line
    #: before any work (``fl.config.rules``); ``tests/mechanisms/test_declarations.py`` checks it is true.
    gradient_path: ClassVar[bool] = True

    def output_dim(self, d: int) -> int:
        """Columns of a release of d-dimensional inputs (d unless the mechanism projects)."""
        return d

    def clean(self, x: torch.Tensor) -> torch.Tensor:
        """The noise-free counterpart of a release of unit rows ``x``, differentiable.

        Not a release: it only routes gradients in straight-through training on
        public data (``fl.maps.input_map``). The identity unless the mechanism projects.
        """
        return x

    def unbiased_moments(self, d: int) -> float | None:
        """E||release||^2 for a unit input of dimension ``d`` when every release is an unbiased estimate
        of its input (E[release | u] = u for each unit row u); ``None`` when it is not.

        What a server needs to average releases without bias and to know the variance of the average
        (``fl.maps.class_means``): declared by the mechanism, so no caller tests mechanism names.
        """
        return None

    def second_moment_law(self, d: int) -> tuple[float, float] | None:
        """(a, b) with E[z z^T | u] = a u u^T + b I for every unit input u of dimension ``d`` (z the release),
        when the mechanism's releases are unbiased and their second moment has that form; ``None`` otherwise.

        What a server needs to debias the releases' second moments, (mean z z^T - b I) / a = an unbiased
        estimate of the inputs' mean u u^T (``fl.maps.class_means.release_covariance``)."""
        return None

    @abstractmethod
    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Return one independent release per row of ``x`` ([n, m]), without a
        gradient path to ``x``."""


def straight_through(mech: Any, h: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """The sanitized value of ``h`` in the forward pass, the gradient of the
    noise-free output ``mech.clean(h)`` in the backward pass (``mech``: a sentence
    mechanism, or the ``none`` mechanism standing in for one).

    This is how Du et al.'s Sentence-LDP code (docs/SPEC.md §3.1) lets gradients
    "flow through the noise" (for planar Laplace, mu + Z, it is the exact
    Jacobian). Use it only on public data (``map-in = "public"``, ``tuning-noise``)
    or in the ``leaky`` mode: the gradient it produces is not private.
    """
    noisy = mech.sanitize(h.detach(), generator=generator).to(h.dtype)
    clean = mech.clean(h)
    return clean + (noisy - clean).detach()


class LabelMechanism(Mechanism):
    """Sanitizes class labels: one entry = one privacy unit."""

    level: ClassVar[str] = "label"

    @abstractmethod
    def sanitize(self, y: torch.Tensor, num_classes: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Return one independent release per entry of ``y`` (LongTensor [n])."""


@dataclass(frozen=True)
class WordRewrite:
    """A word-level rewrite of some texts: the released texts and, for diagnostics, the ids.

    ``input_ids`` / ``output_ids`` are the space ids of every word token of every
    text, in order (``unk`` marks out-of-vocabulary inputs); ``num_words[i]`` is
    the number of word tokens of text i, the privacy units its guarantee composes.
    """

    texts: list[str]
    input_ids: torch.Tensor
    output_ids: torch.Tensor
    num_words: torch.Tensor
    unk: int


class WordMechanism(Mechanism):
    """Sanitizes the words of texts: one word token = one privacy unit.

    A word mechanism perturbs the vector of each word in a public word space
    (``self.space``, a :class:`mechanisms.words.WordSpace`) and maps the noisy
    vector back to a vocabulary word. ``guarantee`` is per word;
    :meth:`document_guarantee` composes it over the words of a document
    (docs/SPEC.md §0.1, §0.3). Only the words are protected: the separators
    between them (whitespace, punctuation), hence the number and positions of
    the words, are released as they are, and neighbouring documents are
    documents of the same length.
    """

    level: ClassVar[str] = "word"
    epsilon: float  # the per-word epsilon, set by each mechanism's constructor

    @property
    @abstractmethod
    def space(self):  # -> mechanisms.words.WordSpace
        """The public word space the mechanism perturbs in and projects back to."""

    @abstractmethod
    def sanitize_ids(self, ids: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """One independent release per entry of ``ids`` (LongTensor [m] of space ids,
        ``space.unk`` included): the ids of the output words, never ``unk``."""

    def rewrite(self, texts: list[str], generator: torch.Generator | None = None) -> WordRewrite:
        """Rewrite each text word by word, keeping the ids (for N_w and the per-document word count).

        Out-of-vocabulary words go through ``<unk>`` and are perturbed like any
        other word. All words of all texts are sanitized in one vectorized call.
        """
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError("texts must be a list of str (wrap a single text in a list)")
        split = [tokenize(t) for t in texts]
        space = self.space
        ids = space.lookup([tok for tokens, _ in split for tok in tokens])
        out_ids = self.sanitize_ids(ids, generator).cpu()
        words = space.decode(out_ids)
        out, pos = [], 0
        for tokens, separators in split:
            out.append(detokenize(words[pos : pos + len(tokens)], separators))
            pos += len(tokens)
        num_words = torch.tensor([len(tokens) for tokens, _ in split], dtype=torch.int64)
        return WordRewrite(texts=out, input_ids=ids, output_ids=out_ids, num_words=num_words, unk=space.unk)

    def sanitize_text(self, texts: list[str], generator: torch.Generator | None = None) -> list[str]:
        """Rewrite each text word by word (one output word per input word, separators kept).

        Out-of-vocabulary words go through ``<unk>`` and are perturbed like any
        other word. All words of all texts are sanitized in one vectorized call.
        """
        return self.rewrite(texts, generator).texts

    def document_guarantee(self, num_words: int) -> Guarantee:
        """Guarantee for a whole document of ``num_words`` words (basic composition, docs/SPEC.md §0.3).

        metric eps*d per word -> eps * sum_i d(w_i, w'_i) over equal-length documents
        (metric ``<metric>_sum``, diameter num_words * D); pure eps -> num_words * eps;
        (eps, delta) -> (num_words * eps, min(1, num_words * delta)).
        """
        if isinstance(num_words, bool) or not isinstance(num_words, int) or num_words < 0:
            raise ValueError(f"num_words must be an integer >= 0, got {num_words!r}")
        return compose_units(self.guarantee, num_words, "document")


def check_documents(docs: list[torch.Tensor], dim: int | None = None, min_sentences: int = 2) -> list[torch.Tensor]:
    """Check a batch of documents given as sentence embeddings (``[k_i, d]`` each) and detach them.

    Every document needs ``k_i >= min_sentences`` (SentDP is about replacing one
    sentence of several: a one-sentence document has no private release here;
    the pipeline drops or refuses such documents by its ``short-documents``
    policy), the same ``d`` (``dim`` when given), finite floating values.
    """
    if isinstance(docs, torch.Tensor) or not isinstance(docs, list | tuple):
        raise TypeError("docs must be a list of tensors [k_i, d] (one per document)")
    out = []
    for i, doc in enumerate(docs):
        if not isinstance(doc, torch.Tensor) or doc.dim() != 2:
            raise ValueError(
                f"document {i} must be a tensor [k, d], got "
                f"{tuple(doc.shape) if isinstance(doc, torch.Tensor) else type(doc).__name__}"
            )
        if doc.shape[0] < min_sentences:
            raise ValueError(
                f"document {i} has {doc.shape[0]} sentence(s): sentence-level DP needs at least "
                f"{min_sentences} (drop or refuse such documents before sanitizing)"
            )
        if dim is not None and doc.shape[1] != dim:
            raise ValueError(f"document {i} has sentence embeddings of dimension {doc.shape[1]}, expected {dim}")
        if not torch.is_floating_point(doc):
            raise ValueError(f"document {i} must be a floating-point tensor, got {doc.dtype}")
        if not bool(torch.isfinite(doc).all()):
            raise ValueError(f"document {i} contains NaN or infinite values")
        out.append(doc.detach())
    return out


class DocumentMechanism(Mechanism):
    """Sanitizes whole documents given as their sentence embeddings (Meehan et al. 2022, SentDP).

    One call releases one output per document. ``guarantee`` is per *sentence*:
    neighbouring documents have the same number of sentences k and differ in one
    sentence (k is revealed). :meth:`document_guarantee` covers replacing the
    whole document.
    """

    level: ClassVar[str] = "document"
    #: How :meth:`document_guarantee`'s pure epsilon grows with the k sentences, in words (reports).
    whole_document: ClassVar[str] = "k * epsilon"

    @abstractmethod
    def sanitize(self, docs: list[torch.Tensor], generator: torch.Generator | None = None) -> torch.Tensor:
        """One independent release per document of ``docs`` (each ``[k_i, d]``, k_i >= 2)."""

    @abstractmethod
    def document_guarantee(self, num_sentences: int) -> Guarantee:
        """The guarantee against replacing all ``num_sentences`` sentences of a document."""
