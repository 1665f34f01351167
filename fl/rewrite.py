"""Word-level local DP on the client: rewrite a node's documents word by word, then embed.

With ``word-mechanism`` set, a user's document is rewritten by the word
mechanism (every word perturbed in a public word space and mapped back to the
nearest vocabulary word, fresh noise per word), the frozen encoder embeds the
rewritten text, and that embedding is released with no further noise
(``sentence-mechanism = "none"``): the encoder and M1 are post-processing.

Guarantee of one release: the word mechanism's per-word guarantee composed over
the document's words (:func:`mechanisms.guarantee.compose_units`); the number
of words is not hidden (neighbouring documents have the same length). Each
release carries its word count so that the server's ledger composes exactly.

A node rewrites all documents of a split in one vectorized call per *draw*
(draw 0, and one more per round with ``fresh-noise-per-round``); a row's
release takes its rewrite from the draw in force, so each rewrite is released
at most once. Rewrites are cached per (word mechanism, epsilon, options, noise
seed, data, node, split, draw): in process always, on disk only for a fixed
``noise-seed`` (a secret seed must not name files). Only unique rewritten
texts are encoded, and the shared embedding cache is read but not grown.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mechanisms.base import WordMechanism
from mechanisms.guarantee import Guarantee

from . import datasets as data
from .config import cache_dir, make_mechanism
from .documents import embed_texts
from .encoder import best_device

log = logging.getLogger(__name__)

WORD_KEYS = ("word-mechanism", "word-epsilon", "word-options")
REWRITE_VERSION = 1  # bump when the rewrite of a (seed, document) changes


def word_mechanism(cfg: Mapping[str, Any]) -> WordMechanism:
    """The configured word mechanism (cached per process: the space and its index load once)."""
    return _mechanism(tuple((k, cfg[k]) for k in WORD_KEYS))


@lru_cache(maxsize=8)
def _mechanism(key: tuple[tuple[str, Any], ...]) -> WordMechanism:
    mech = make_mechanism(dict(key), "word")
    if not isinstance(mech, WordMechanism):
        raise ValueError(f"word-mechanism {dict(key)['word-mechanism']!r} is not a word-level mechanism")
    return mech


def delta_warning(guarantee: Guarantee, num_users: int) -> str | None:
    """A warning when a per-word delta exceeds 1/(number of users), else ``None``.

    Above 1/n a mechanism may fully expose some user's word with non-negligible
    probability over the population (Huang et al. 2024's TrLaplace at small
    epsilon has delta ~ 0.7 per word, docs/SPEC.md §7.5).
    """
    if guarantee.delta <= 0 or num_users <= 0 or guarantee.delta <= 1.0 / num_users:
        return None
    return (
        f"the word mechanism's delta per word is {guarantee.delta:.4g}, more than 1/(number of users) "
        f"= {1.0 / num_users:.3g}: with probability up to delta a word can be revealed, and a document of "
        f"k words composes to a delta of up to min(1, k * {guarantee.delta:.4g}); this (eps, delta) "
        "guarantee is weak or vacuous at this epsilon"
    )


@dataclass(frozen=True)
class RewrittenSplit:
    """Embeddings of one draw of word-level rewrites of a node's documents of one split."""

    emb: torch.Tensor  # float32 [n, d]: G(rewritten document), the release before M1
    num_words: np.ndarray  # int64 [n]: word tokens per document (the guarantee's units)


def _key(cfg: Mapping[str, Any], purpose: str, partition: tuple[int, int], draw: int) -> str:
    keys = (
        *WORD_KEYS,
        "noise-seed",
        *data.DATA_KEYS,
        "num-users",
        "partitioner",
        "dirichlet-alpha",
        "encoder",
        "doc-embedding",
    )
    material = json.dumps(
        {
            "v": REWRITE_VERSION,
            **{k: cfg[k] for k in keys},
            "purpose": purpose,
            "partition": list(partition),
            "draw": draw,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(material.encode()).hexdigest()[:32]


_MEMORY: dict[tuple[str, int], RewrittenSplit] = {}


def rewritten_split(
    cfg: Mapping[str, Any], texts: list[str], purpose: str, partition: tuple[int, int], draw: int, seed: int
) -> RewrittenSplit:
    """Rewrite ``texts`` (a node's documents of ``purpose``) with a generator seeded by ``seed``, then embed.

    ``seed`` is the node's secret-derived seed of this (split, draw); the cache
    key is the public configuration plus ``noise-seed``, so on disk only a fixed
    ``noise-seed`` is cached (then ``seed`` is a function of the key).
    """
    key = _key(cfg, purpose, partition, draw)
    memo = (key, seed)
    if memo in _MEMORY:
        return _MEMORY[memo]
    path = cache_dir(cfg) / "rewrites" / f"{key}.npz"
    persist = cfg["noise-seed"] >= 0
    if persist and path.is_file():
        with np.load(path) as z:
            if int(z["n"]) == len(texts):
                out = RewrittenSplit(torch.as_tensor(z["emb"]), z["num_words"])
                _MEMORY[memo] = out
                return out
    out = _rewrite_and_embed(cfg, texts, seed, purpose)
    if persist:
        _save(path, out)
    _MEMORY[memo] = out
    return out


def _rewrite_and_embed(cfg: Mapping[str, Any], texts: list[str], seed: int, purpose: str) -> RewrittenSplit:
    if not texts:
        return RewrittenSplit(torch.zeros(0, 0), np.zeros(0, dtype=np.int64))
    mech = word_mechanism(cfg)
    start = time.perf_counter()
    rewrite = mech.rewrite(list(texts), torch.Generator().manual_seed(seed))
    num_words = rewrite.num_words.numpy()
    rewritten_at = time.perf_counter()
    emb = embed_texts(rewrite.texts, cfg, best_device(cfg["device"]), progress=True, store=False)
    log.info(
        "rewrote %d %s documents (%d words) with %s in %.1fs, encoded them in %.1fs",
        len(texts),
        purpose,
        int(num_words.sum()),
        mech.name,
        rewritten_at - start,
        time.perf_counter() - rewritten_at,
    )
    return RewrittenSplit(
        torch.as_tensor(np.asarray(emb), dtype=torch.float32).reshape(len(texts), -1), num_words.astype(np.int64)
    )


def _save(path: Path, out: RewrittenSplit) -> None:
    """Write atomically: concurrent nodes may race on the same key; the last complete file wins."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp.npz")
    with os.fdopen(fd, "wb") as fh:
        np.savez(fh, emb=out.emb.numpy(), num_words=out.num_words, n=np.array(len(out.num_words)))
    os.replace(tmp, path)


__all__ = ["RewrittenSplit", "delta_warning", "rewritten_split", "word_mechanism"]
