"""Word level: the pair of words, the statistic and the claim of a word-level mechanism's audit.

Part of :mod:`mechanisms.audit` (its docstring states the audit's guarantee)."""

from __future__ import annotations

from typing import Any

import torch

from mechanisms.audit.pairs import (
    claimed_epsilon,
    pair_distance,
)
from mechanisms.audit.sampling import (
    _flat,
    audit_pair,
    fixed_threshold_options,
)
from mechanisms.audit.statistics import (
    AuditResult,
    Sampler,
    Statistic,
)

from ..guarantee import Guarantee

# --------------------------------------------------------------------------- word level
WORD_PAIR_SEARCH = 4096
"""The default word pair is searched among the first this many words (GloVe: the most frequent)."""


def _word_geometry(mech: Any) -> tuple[str, torch.Tensor | None]:
    """("l1" | "l2" | "mahalanobis" | "projection", whitening or None): the norm whose difference
    ||y - x'|| - ||y - x|| orders the privacy loss of ``mech``'s noisy vector (see :func:`word_statistic`)."""
    from mechanisms.words import CMP, Mahalanobis, TrLaplace, WordLaplace

    if isinstance(mech, Mahalanobis):
        return "mahalanobis", mech.whitening
    if isinstance(mech, CMP):
        return "l2", None
    if isinstance(mech, (WordLaplace, TrLaplace)):
        return "l1", None
    return "projection", None  # WordGaussian (exact likelihood ratio) and any other noise


def word_pair(mech: Any, search: int = WORD_PAIR_SEARCH, *, alphabetic: bool = False) -> tuple[int, int]:
    """The two words (ids) whose perturbed vectors lie farthest apart in the mechanism's own geometry.

    Among the first ``search`` real words of ``mech.space`` (the whole vocabulary
    when smaller): L1 for the Laplace-type noise (word_laplace, trlaplace: the
    loss bound ||x - x'||_1 / b), the Mahalanobis distance for ``mahalanobis``, L2
    otherwise, on the vectors the mechanism perturbs (clipped when it clips).
    For the pure / approximate guarantees this is the pair closest to the
    calibration point; for the metric ones it maximises eps * d(w, w').
    ``alphabetic``: only words of letters (a one-word document the tokenizer
    counts as one word, as the end-to-end audit needs).
    """
    count = min(int(search), mech.space.num_words)
    vectors = mech.input_vectors(torch.device("cpu"))[:count]
    ids = torch.arange(count)
    if alphabetic:
        ids = torch.tensor([i for i in range(count) if mech.space.words[i].isalpha()], dtype=torch.int64)
        vectors = vectors[ids]
    kind, whitening = _word_geometry(mech)
    if whitening is not None:
        vectors = vectors @ whitening
    far = torch.cdist(vectors, vectors, p=1.0 if kind == "l1" else 2.0)
    i, j = divmod(int(far.argmax()), far.shape[1])
    return int(ids[i]), int(ids[j])


def word_pair_claim(mech: Any, guarantee: Guarantee, w: int, w_prime: int) -> tuple[float | None, float]:
    """(distance, claimed epsilon) of one word's guarantee for the pair of word ids (w, w').

    Metric guarantees: eps * d(phi(w), phi(w')) in the guarantee's metric (the
    Mahalanobis one after whitening), phi being the unclipped public vectors;
    pure and approximate ones: eps.
    """
    table = mech.space.vectors.to(torch.float64)
    x, x_prime = table[w], table[w_prime]
    if guarantee.notion == "metric" and guarantee.metric == "mahalanobis" and hasattr(mech, "whitening"):
        distance = float(((x - x_prime) @ mech.whitening).norm())
        return distance, float(guarantee.epsilon) * distance
    return pair_distance(guarantee, x, x_prime), claimed_epsilon(guarantee, x, x_prime)


def word_statistic(mech: Any, x: torch.Tensor, x_prime: torch.Tensor) -> Statistic:
    """The likelihood-ratio statistic of the noisy vector y for the pair (x, x') (fixed before sampling).

    * cmp: ||y - x'||_2 - ||y - x||_2 (the loss is eps times it);
    * mahalanobis: the same after whitening by Sigma_lambda^(-1/2);
    * word_laplace: ||y - x'||_1 - ||y - x||_1 (loss: it over the Laplace scale);
    * trlaplace: the same over lambda on the common support, and +-(2 ||x - x'||_1 /
      lambda + 1) when y lies outside the support of x' (resp. x), i.e. the privacy
      loss with +-inf replaced by finite markers;
    * otherwise (word_gaussian, where it is exactly the likelihood ratio): the
      projection onto (x - x') / ||x - x'||.

    The norm differences are rounded to 1e-9 of the pair's distance. The L1
    difference has atoms at +-||x - x'||_1 (y beyond x or x' in every
    coordinate), where float64 rounding of x + z and x' + z differs between the
    two inputs; a threshold just off the atom then separates them on rounding
    bits alone (Mironov 2012), e.g. epsilon_lb 1.10 > 1 for word_laplace on an
    antipodal pair in R^2. The word release is the decoded word, not these bits,
    so the audit measures the mathematical mechanism.
    """
    from mechanisms.words import TrLaplace

    kind, whitening = _word_geometry(mech)
    x, x_prime = x.reshape(1, -1).to(torch.float64), x_prime.reshape(1, -1).to(torch.float64)
    if kind == "projection":
        a = (x - x_prime).reshape(-1)
        a = a / a.norm().clamp_min(1e-300)
        return lambda y: _flat(y) @ a.to(y.device)
    if whitening is not None:
        x, x_prime = x @ whitening, x_prime @ whitening
    order = 1.0 if kind == "l1" else 2.0
    support = mech.params[:2] if isinstance(mech, TrLaplace) else None
    quantum = 1e-9 * max(float(torch.linalg.vector_norm(x - x_prime, order)), 1e-300)

    def statistic(y: torch.Tensor) -> torch.Tensor:
        y = _flat(y)
        if whitening is not None:
            y = y @ whitening.to(y.device)
        xd, pd = x.to(y.device), x_prime.to(y.device)
        diff = torch.linalg.vector_norm(y - pd, order, dim=1) - torch.linalg.vector_norm(y - xd, order, dim=1)
        diff = torch.round(diff / quantum) * quantum
        if support is None:
            return diff
        lam, a = support
        loss = diff / lam
        marker = 2.0 * float((xd - pd).abs().sum()) / lam + 1.0
        loss = torch.where(((y - pd).abs() > a).any(dim=1), marker, loss)
        return torch.where(((y - xd).abs() > a).any(dim=1), -marker, loss)

    return statistic


def _support_markers(mech: Any, x: torch.Tensor, x_prime: torch.Tensor) -> list[float] | None:
    """TrLaplace: thresholds that isolate the +-marker values of :func:`word_statistic` (the support leaks)."""
    from mechanisms.words import TrLaplace

    if not isinstance(mech, TrLaplace):
        return None
    lam = mech.params[0]
    marker = 2.0 * float((x - x_prime).abs().sum()) / lam + 1.0
    return [marker - 0.5, -marker + 0.5]


def _audit_word(
    mech: Any, guarantee: Guarantee, num_samples: int, seed: int, pair: Any, common: dict[str, Any]
) -> AuditResult:
    if not (hasattr(mech, "space") and (hasattr(mech, "perturb") or hasattr(mech, "sanitize_ids"))):
        raise ValueError(f"word mechanism {mech.name!r} exposes neither perturb nor sanitize_ids: cannot audit it")
    w, w_prime = word_pair(mech) if pair is None else (int(pair[0]), int(pair[1]))
    if w == w_prime:
        raise ValueError("the two words of the pair must differ")
    space = mech.space
    distance, claimed = word_pair_claim(mech, guarantee, w, w_prime)  # phi(w) unclipped: the metric space

    if hasattr(mech, "perturb"):  # the noisy vector: the decoding to a word is post-processing
        inputs = mech.input_vectors(torch.device("cpu"))
        xi, xpi = inputs[w], inputs[w_prime]

        def sampler(word: int) -> Sampler:
            def draw(n: int, gen: torch.Generator) -> torch.Tensor:
                return mech.perturb(torch.full((n,), word, dtype=torch.int64, device=gen.device), gen)

            return draw

        result = audit_pair(
            sampler(w),
            sampler(w_prime),
            num_samples,
            seed,
            statistic=word_statistic(mech, xi, xpi),
            extra_thresholds=_support_markers(mech, xi, xpi),
            delta=float(guarantee.delta),
            claimed_epsilon=claimed,
            **common,
        )
    else:  # only the output word is exposed: T = 1{output == w}

        def id_sampler(word: int) -> Sampler:
            def draw(n: int, gen: torch.Generator) -> torch.Tensor:
                return mech.sanitize_ids(torch.full((n,), word, dtype=torch.int64, device=gen.device), gen)

            return draw

        common = fixed_threshold_options(common)
        result = audit_pair(
            id_sampler(w),
            id_sampler(w_prime),
            num_samples,
            seed,
            statistic=lambda out: (out == w).to(torch.float64),
            thresholds=[0.5],
            delta=float(guarantee.delta),
            claimed_epsilon=claimed,
            **common,
        )
    return result.with_info(
        input_dim=space.dim,
        output_dim=space.dim if hasattr(mech, "perturb") else 1,
        pair_distance=distance,
        words=(space.words[w], space.words[w_prime]),
    )
