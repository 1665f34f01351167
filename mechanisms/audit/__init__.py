"""Empirical privacy audit of a mechanism on one pair of neighbouring inputs
(docs/SPEC.md §11.1 item 8, §15.6; Jagielski et al. 2020, Nasr et al. 2021 "adversary
instantiation": a threshold distinguisher with Clopper-Pearson bounds).

:func:`audit_mechanism` picks a worst-case-style pair and a statistic from the mechanism's
``level`` (sentence, label, word, document); :func:`audit_pair` turns N releases of each input
into ``epsilon_lb``, a Clopper-Pearson lower bound (Bonferroni over thresholds chosen on an
independent pilot sample) on the epsilon the pair needs.

Guarantee: if the mechanism really is (eps, delta)-LDP on the pair, P[epsilon_lb > eps] <= alpha.
It is a sanity lower bound, not a proof of privacy: ``epsilon_lb <= claimed`` says only that this
statistic, on this pair, with N samples, found no violation, and its power is limited (it stays
well below a claimed eps when the loss reaches eps only on rare outputs). The derivation, the
pairs and statistics per level, and the claimed epsilon of a pair: docs/SPEC.md §15.6.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from mechanisms.audit.documents import _audit_document, document_pair
from mechanisms.audit.labels import _audit_label
from mechanisms.audit.pairs import (
    _no_sanitize,
    claimed_epsilon,
    default_pair,
    pair_distance,
)
from mechanisms.audit.sampling import (
    audit_pair,
    quantile_grid,
)
from mechanisms.audit.sentences import _audit_sentence
from mechanisms.audit.statistics import (
    DEFAULT_ALPHA,
    DEFAULT_CHUNK,
    DEFAULT_THRESHOLDS,
    AuditResult,
    Sampler,
    Statistic,
    clopper_pearson,
    cp_lower,
    cp_upper,
    threshold_audit,
    threshold_counts,
)
from mechanisms.audit.words import (
    WORD_PAIR_SEARCH,
    _audit_word,
    word_pair,
    word_pair_claim,
    word_statistic,
)

from ..base import Mechanism
from ..guarantee import Guarantee


def audit_mechanism(
    mech: Mechanism,
    num_samples: int = 10**6,
    seed: int = 0,
    *,
    dim: int = 16,
    num_classes: int = 2,
    pair: tuple[Any, Any] | None = None,
    prior: Any = None,
    alpha: float = DEFAULT_ALPHA,
    pilot_samples: int | None = None,
    num_thresholds: int = DEFAULT_THRESHOLDS,
    chunk_size: int = DEFAULT_CHUNK,
    device: torch.device | str = "cpu",
    claim: Guarantee | None = None,
    num_sentences: int = 2,
    secure: bool = False,
) -> AuditResult:
    """Audit ``mech`` on its worst-case-style pair (sentence, label, word or document level).

    Parameters
    ----------
    mech : Mechanism
        Any registered mechanism of level "sentence" or "label" (including
        "none", whose claimed epsilon is inf).
    num_samples, seed :
        N releases per input; seed of the generator (deterministic result).
    dim : int
        Sentence level: input dimension m (the output dimension may differ).
    num_classes : int
        Label level: K.
    pair : (x, x') or None
        Override the pair: two [dim] tensors (sentence; inputs must already lie
        in the mechanism's domain for the claimed epsilon to mean anything), or
        two ints (label). Default: :func:`default_pair` / labels (0, 1).
    prior : sequence of K floats or None
        Label level only: a public prior over the K labels (finite,
        non-negative, positive sum; normalised here), given to every release as
        ``mechanisms.rr_prior.LabelPrior(prior per row, "public")``. The
        mechanism's ``sanitize`` must accept a ``prior`` argument (ValueError
        otherwise). ``None``: the mechanism's default (no prior).
    alpha, pilot_samples, num_thresholds, chunk_size, device :
        As in :func:`audit_pair`.
    claim : Guarantee or None
        Audit against this guarantee instead of ``mech.guarantee`` (power checks:
        a mechanism built at 3x its epsilon against the 1x claim). Its epsilon
        (times d(x, x') for a metric claim) and delta are what the audit tests.
    num_sentences : int
        Document level: k, the length of the default pair's documents.
    secure : bool
        Draw every release from ``secure-rng``'s ChaCha20 keystream (keyed by ``seed``).

    Notes
    -----
    Word level: ``pair`` is two word ids (default :func:`word_pair`); the release
    audited is the noisy vector (``perturb``), the decoding to a word being
    post-processing; the statistic is :func:`word_statistic`. Only a mechanism
    without ``perturb`` is audited on its output word (T = 1{output == w}).
    Document level: ``pair`` is two [k, d] documents that differ in exactly one
    sentence (default :func:`document_pair`); a mechanism with an exact public
    output law (``log_probs``: deepcandidate) is audited on the released index
    with T = log P_x(i) - log P_x'(i) and thresholds between its distinct
    values (no pilot); one with ``log_density`` (truncation) with the exact
    log-likelihood ratio of the release.
    """
    guarantee = mech.guarantee if claim is None else claim
    if prior is not None and mech.level != "label":
        raise ValueError("a label prior only applies to label mechanisms")
    # Label and sentence mechanisms release through ``sanitize``; word and document mechanisms are
    # audited through their own entry points and never call it.
    sanitize: Callable[..., torch.Tensor] = getattr(mech, "sanitize", _no_sanitize)
    common: dict[str, Any] = {
        "alpha": alpha,
        "pilot_samples": pilot_samples,
        "num_thresholds": num_thresholds,
        "chunk_size": chunk_size,
        "device": device,
        "secure": secure,
    }
    if mech.level == "label":
        result = _audit_label(mech, guarantee, sanitize, num_samples, seed, pair, num_classes, prior, common)
    elif mech.level == "word":
        result = _audit_word(mech, guarantee, num_samples, seed, pair, common)
    elif mech.level == "document":
        result = _audit_document(mech, guarantee, num_samples, seed, pair, num_sentences, common)
    elif mech.level == "sentence":
        result = _audit_sentence(mech, guarantee, sanitize, num_samples, seed, pair, dim, common)
    else:
        raise ValueError(f"audit_mechanism handles sentence, label, word and document mechanisms, not {mech.level!r}")
    return result.with_info(mechanism=mech.name, level=mech.level, guarantee=guarantee.to_dict())


__all__ = [
    "audit_mechanism",
    "AuditResult",
    "DEFAULT_ALPHA",
    "DEFAULT_CHUNK",
    "DEFAULT_THRESHOLDS",
    "Sampler",
    "Statistic",
    "WORD_PAIR_SEARCH",
    "audit_pair",
    "claimed_epsilon",
    "clopper_pearson",
    "cp_lower",
    "cp_upper",
    "default_pair",
    "document_pair",
    "pair_distance",
    "quantile_grid",
    "threshold_audit",
    "threshold_counts",
    "word_pair",
    "word_pair_claim",
    "word_statistic",
]
