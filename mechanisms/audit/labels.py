"""Label level: randomized response on the pair of labels (0, 1) with T = 1{output == first label}.

Part of :mod:`mechanisms.audit` (its docstring states the audit's guarantee)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from mechanisms.audit.pairs import _check_prior, claimed_epsilon
from mechanisms.audit.sampling import audit_pair, fixed_threshold_options
from mechanisms.audit.statistics import AuditResult, Sampler

from ..guarantee import Guarantee
from ..rr_prior import LabelPrior


def _audit_label(
    mech: Any,
    guarantee: Guarantee,
    sanitize: Callable[..., torch.Tensor],
    num_samples: int,
    seed: int,
    pair: Any,
    num_classes: int,
    prior: Any,
    common: dict[str, Any],
) -> AuditResult:
    """The label pair (0, 1) or ``pair``, released through ``sanitize`` (with the public ``prior``, if any),
    tested at the one threshold 0.5 of T = 1{output == y0} (no pilot: the statistic has two values)."""
    k = int(num_classes)
    y0, y1 = (0, 1) if pair is None else (int(pair[0]), int(pair[1]))
    if y0 == y1:
        raise ValueError("the two labels of the pair must differ")
    prior_row = None if prior is None else _check_prior(mech, prior, k)

    def label_sampler(label: int) -> Sampler:
        def draw(n: int, gen: torch.Generator) -> torch.Tensor:
            y = torch.full((n,), label, dtype=torch.int64, device=gen.device)
            if prior_row is None:
                return sanitize(y, num_classes=k, generator=gen)
            probs = prior_row.to(gen.device).unsqueeze(0).expand(n, k)
            return sanitize(y, num_classes=k, generator=gen, prior=LabelPrior(probs, "public"))

        return draw

    def is_first(out: torch.Tensor) -> torch.Tensor:
        return (out == y0).to(torch.float64)

    result = audit_pair(
        label_sampler(y0),
        label_sampler(y1),
        num_samples,
        seed,
        statistic=is_first,
        thresholds=[0.5],
        delta=float(guarantee.delta),
        claimed_epsilon=claimed_epsilon(guarantee),
        **fixed_threshold_options(common),
    )
    return result.with_info(num_classes=k, prior=None if prior_row is None else prior_row.tolist())
