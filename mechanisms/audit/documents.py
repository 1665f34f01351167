"""Document level: the pair of documents and the audit of a document-level mechanism.

Part of :mod:`mechanisms.audit` (its docstring states the audit's guarantee)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from mechanisms.audit.pairs import (
    claimed_epsilon,
)
from mechanisms.audit.sampling import (
    audit_pair,
    fixed_threshold_options,
)
from mechanisms.audit.statistics import (
    AuditResult,
    Sampler,
    Statistic,
)

from ..guarantee import Guarantee


# --------------------------------------------------------------------------- document level
def document_pair(mech: Any, num_sentences: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Two documents of ``num_sentences`` sentences that differ in their first sentence, float64 [k, d].

    * With a public box (``lo``, ``hi``: truncation): the other sentences sit at
      the box centre and the changed one is ``lo`` in x and ``hi`` in x': opposite
      corners, every coordinate of the clipped mean moves by w_d / k, the loss
      the noise is calibrated to (epsilon exactly).
    * With public candidates (deepcandidate): the other sentences are the mean
      candidate and the changed one is one of the two candidates farthest apart.
      This is a generic choice, not a tight one (the loss of the exponential
      mechanism reaches epsilon only when one candidate gains a unit of utility
      while all the others lose one); pass ``pair`` for a constructed tight pair.
    """
    k = int(num_sentences)
    if k < 2:
        raise ValueError(f"num_sentences must be >= 2 (SentDP), got {num_sentences!r}")
    if isinstance(getattr(mech, "lo", None), torch.Tensor) and isinstance(getattr(mech, "hi", None), torch.Tensor):
        lo, hi = mech.lo.to(torch.float64), mech.hi.to(torch.float64)
        a, b = lo, hi
        centre = (lo + hi) / 2
    elif isinstance(getattr(mech, "candidates", None), torch.Tensor):
        cand = mech.candidates.to(torch.float64)
        far = torch.cdist(cand, cand)
        i, j = divmod(int(far.argmax()), far.shape[1])
        a, b, centre = cand[i], cand[j], cand.mean(dim=0)
    else:
        raise ValueError(f"no default document pair for {mech.name!r}: pass pair=(doc, doc_prime)")
    rest = centre.unsqueeze(0).expand(k - 1, -1)
    return torch.cat([a.unsqueeze(0), rest]), torch.cat([b.unsqueeze(0), rest])


def _audit_document(
    mech: Any,
    guarantee: Guarantee,
    num_samples: int,
    seed: int,
    pair: Any,
    num_sentences: int,
    common: dict[str, Any],
) -> AuditResult:
    if pair is None:
        doc, doc_prime = document_pair(mech, num_sentences)
    else:
        doc, doc_prime = (torch.as_tensor(p, dtype=torch.float64) for p in pair)
        if doc.dim() != 2 or doc.shape != doc_prime.shape:
            raise ValueError("the two documents of the pair must be [k, d] tensors of the same shape")
        changed = int((doc != doc_prime).any(dim=1).sum())
        if changed != 1:
            raise ValueError(f"the two documents must differ in exactly one sentence (SentDP), got {changed}")
    k = int(doc.shape[0])

    def sampler(d: torch.Tensor) -> Sampler:
        def draw(n: int, gen: torch.Generator) -> torch.Tensor:
            return mech.sanitize([d.to(gen.device)] * n, generator=gen)

        return draw

    delta = float(guarantee.delta)
    claimed = claimed_epsilon(guarantee)
    if hasattr(mech, "log_probs"):  # a candidate index with a public exact law: T = log P_x(i) - log P_x'(i)
        score = (mech.log_probs(doc) - mech.log_probs(doc_prime)).to(torch.float64)
        values = np.unique(score.numpy())
        cuts = (values[1:] + values[:-1]) / 2 if values.size > 1 else values

        def statistic(out: torch.Tensor) -> torch.Tensor:
            return score.to(out.device)[out.long()]

        common = fixed_threshold_options(common)
        result = audit_pair(
            sampler(doc),
            sampler(doc_prime),
            num_samples,
            seed,
            statistic=statistic,
            thresholds=cuts,
            delta=delta,
            claimed_epsilon=claimed,
            **common,
        )
        return result.with_info(num_sentences=k, input_dim=int(doc.shape[1]), output_dim=1)
    statistic_d: Statistic | None = None
    if hasattr(mech, "log_density"):  # exact log-density of the release: the likelihood ratio
        # Rounded to 1e-9 of the claim, as in word_statistic: the log-ratio has atoms at
        # +-epsilon whose float64 rounding differs between the two documents (the release is
        # c + noise, with c differing), and a threshold just off an atom then separates them on
        # rounding bits (Mironov 2012: unrounded, truncation at eps = 1, d = 2, N = 1e5 gave
        # epsilon_lb 1.07). This audits the mathematical mechanism, not its float encoding.
        quantum = 1e-9 * max(1.0, claimed if math.isfinite(claimed) else 1.0)

        def statistic_d(y: torch.Tensor) -> torch.Tensor:
            ratio = mech.log_density(doc, y) - mech.log_density(doc_prime, y)
            return torch.round(ratio / quantum) * quantum

    result = audit_pair(
        sampler(doc),
        sampler(doc_prime),
        num_samples,
        seed,
        statistic=statistic_d,
        delta=delta,
        claimed_epsilon=claimed,
        **common,
    )
    out_dim = int(sampler(doc)(1, torch.Generator(device=common["device"]).manual_seed(0)).reshape(1, -1).shape[1])
    return result.with_info(num_sentences=k, input_dim=int(doc.shape[1]), output_dim=out_dim)
