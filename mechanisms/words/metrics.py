"""Diagnostics of a word-level rewrite (Feyisetan et al. 2020, docs/SPEC.md §5.1).

* N_w: the fraction of word tokens left unchanged. Per word, the empirical
  P[M(w) = w] over repeated draws (:func:`word_statistics`); over a rewrite of a
  sample of texts, the fraction of its word tokens that came out as themselves
  (:func:`rewrite_statistics`, :func:`unchanged_fraction`).
* S_w: the effective support of a fixed input word, the number of distinct
  outputs over repeated draws (docs/SPEC.md §5.1 asks for >= 1000 draws per
  word).

These are utility diagnostics computed on raw text: they are not releases and
carry no privacy guarantee.
"""

from __future__ import annotations

from typing import Any

import torch

from ..base import WordMechanism


def unchanged_fraction(input_ids: torch.Tensor, output_ids: torch.Tensor, unk: int | None = None) -> float:
    """N_w of a rewrite: the fraction of positions where output == input (an ``unk`` input never counts)."""
    if input_ids.shape != output_ids.shape:
        raise ValueError(f"shape mismatch: {tuple(input_ids.shape)} vs {tuple(output_ids.shape)}")
    if input_ids.numel() == 0:
        return float("nan")
    same = input_ids.to(output_ids.device) == output_ids
    if unk is not None:
        same &= input_ids.to(output_ids.device) != unk
    return float(same.double().mean())


def support_sizes(outputs: torch.Tensor) -> torch.Tensor:
    """Number of distinct values in each row of ``outputs`` [k, draws] (LongTensor [k])."""
    if outputs.dim() != 2 or outputs.shape[1] == 0:
        raise ValueError(f"need outputs of shape [k, draws >= 1], got {tuple(outputs.shape)}")
    s = outputs.sort(dim=1).values
    return (s[:, 1:] != s[:, :-1]).sum(dim=1) + 1


def word_statistics(
    mech: WordMechanism,
    words: list[str] | torch.Tensor,
    num_draws: int = 1000,
    generator: torch.Generator | None = None,
) -> dict[str, Any]:
    """N_w and S_w of each input word over ``num_draws`` independent draws.

    ``words`` are strings (looked up in the mechanism's space) or ids. Returns
    ``{"ids": LongTensor [k], "N_w": float64 [k], "S_w": LongTensor [k], "num_draws": int}``.
    """
    if isinstance(num_draws, bool) or int(num_draws) != num_draws or num_draws < 1:
        raise ValueError(f"num_draws must be an integer >= 1, got {num_draws!r}")
    ids = words if isinstance(words, torch.Tensor) else mech.space.lookup(list(words))
    ids = ids.to(torch.int64).reshape(-1)
    out = mech.sanitize_ids(ids.repeat_interleave(int(num_draws)), generator).cpu().view(-1, int(num_draws))
    return {
        "ids": ids,
        "N_w": (out == ids.unsqueeze(1)).double().mean(dim=1),
        "S_w": support_sizes(out),
        "num_draws": int(num_draws),
    }


def rewrite_statistics(
    mech: WordMechanism, texts: list[str], generator: torch.Generator | None = None
) -> dict[str, Any]:
    """Rewrite ``texts`` once and report N_w over their word tokens.

    Returns ``{"texts": rewritten texts, "words": word tokens, "oov": tokens that
    went through <unk>, "N_w": fraction of tokens unchanged}`` (an OOV token is
    never unchanged: its output is a vocabulary word).
    """
    r = mech.rewrite(texts, generator)
    return {
        "texts": r.texts,
        "words": int(r.input_ids.numel()),
        "oov": int((r.input_ids == r.unk).sum()),
        "N_w": unchanged_fraction(r.input_ids, r.output_ids, unk=r.unk),
    }


__all__ = ["rewrite_statistics", "support_sizes", "unchanged_fraction", "word_statistics"]
