"""Sentence level: a sentence mechanism on its default pair (or a given one), released through ``sanitize``.

Part of :mod:`mechanisms.audit` (its docstring states the audit's guarantee)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from mechanisms.audit.pairs import claimed_epsilon, default_pair, pair_distance
from mechanisms.audit.sampling import audit_pair
from mechanisms.audit.statistics import AuditResult, Sampler

from ..guarantee import Guarantee


def _audit_sentence(
    mech: Any,
    guarantee: Guarantee,
    sanitize: Callable[..., torch.Tensor],
    num_samples: int,
    seed: int,
    pair: Any,
    dim: int,
    common: dict[str, Any],
) -> AuditResult:
    """The pair ``default_pair(mech, dim)`` or ``pair`` (two vectors of one shape), N releases of each,
    thresholds on :func:`audit_pair`'s default projection statistic chosen on its pilot sample."""
    if pair is None:
        x, x_prime = default_pair(mech, dim)
    else:
        x, x_prime = (torch.as_tensor(p, dtype=torch.float64).reshape(-1) for p in pair)
        if x.shape != x_prime.shape:
            raise ValueError("the two inputs of the pair must have the same shape")
    m = int(x.numel())

    def sentence_sampler(v: torch.Tensor) -> Sampler:
        def draw(n: int, gen: torch.Generator) -> torch.Tensor:
            rows = v.to(gen.device).unsqueeze(0).expand(n, m).contiguous()
            return sanitize(rows, generator=gen)

        return draw

    probe = torch.Generator(device=common["device"]).manual_seed(0)
    out_dim = int(sentence_sampler(x)(1, probe).reshape(1, -1).shape[1])
    result = audit_pair(
        sentence_sampler(x),
        sentence_sampler(x_prime),
        num_samples,
        seed,
        delta=float(guarantee.delta),
        claimed_epsilon=claimed_epsilon(guarantee, x, x_prime),
        **common,
    )
    return result.with_info(input_dim=m, output_dim=out_dim, pair_distance=pair_distance(guarantee, x, x_prime))
