"""Word-level sanitizers: perturb a word's vector in a public space, map it back
to the nearest vocabulary word (docs/SPEC.md §5, §7).

    import mechanisms
    m = mechanisms.create("cmp", epsilon=10)          # GloVe 6B 50d, loaded on first use
    m.sanitize_text(["a charming and often affecting journey ."], generator=g)
    m.sanitize_ids(ids, generator=g)                  # ids of m.space, <unk> included
    m.guarantee                                       # per word
    m.document_guarantee(20)                          # a 20-word document

Mechanisms: ``cmp`` (Feyisetan et al. 2020), ``mahalanobis`` (Xu et al. 2020),
``trlaplace`` (Huang et al. 2024), ``word_laplace`` and ``word_gaussian`` (its
baselines). Spaces: :mod:`.vocab`; tokenizer: :mod:`mechanisms.tokenize` (re-exported here); exact nearest
neighbour and diameter: :mod:`.nearest`; N_w / S_w: :mod:`.metrics`.
"""

from __future__ import annotations

from ..tokenize import detokenize, tokenize
from .additive import WordGaussian, WordLaplace
from .cmp import CMP
from .mahalanobis import Mahalanobis
from .metrics import rewrite_statistics, support_sizes, unchanged_fraction, word_statistics
from .nearest import NearestWords, diameter
from .trlaplace import TrLaplace, trlaplace_delta, trlaplace_param_dim, trlaplace_variance
from .vocab import UNK_TOKEN, WordSpace, load_glove, load_minilm, load_space

__all__ = [
    "CMP",
    "Mahalanobis",
    "NearestWords",
    "TrLaplace",
    "UNK_TOKEN",
    "WordGaussian",
    "WordLaplace",
    "WordSpace",
    "detokenize",
    "diameter",
    "load_glove",
    "load_minilm",
    "load_space",
    "rewrite_statistics",
    "support_sizes",
    "tokenize",
    "trlaplace_delta",
    "trlaplace_param_dim",
    "trlaplace_variance",
    "unchanged_fraction",
    "word_statistics",
]
