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
``noise-seed`` (a secret seed must not name files). A file on disk carries a
checksum of its content and is written atomically; one that is cut short,
altered or of the wrong shape is discarded and the rewrite recomputed. Only
unique rewritten texts are encoded, and the shared embedding cache is read but
not grown.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fl.config import ReleaseConfig
from fl.encoding.cache_files import atomic_write, discarded, seal, unseal
from fl.encoding.encoder import best_device, embed_texts
from fl.levels.spec import LevelSpec
from mechanisms.base import WordMechanism
from mechanisms.guarantee import Guarantee
from mechanisms.keystream import SecureGenerator

log = logging.getLogger(__name__)

REWRITE_VERSION = 2  # bump when the rewrite of a (seed, document) or the cache key's material changes


def word_mechanism(release: ReleaseConfig) -> WordMechanism:
    """The release section's word mechanism (cached per process: the space and its index load once)."""
    return _mechanism(release.word_mechanism, release.word_epsilon, release.word_options)


@lru_cache(maxsize=8)
def _mechanism(name: str, epsilon: float, options: str) -> WordMechanism:
    mech = ReleaseConfig(word_mechanism=name, word_epsilon=epsilon, word_options=options).mechanism("word")
    if not isinstance(mech, WordMechanism):
        raise ValueError(f"word-mechanism {name!r} is not a word-level mechanism")
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


def _key(spec: LevelSpec, purpose: str, partition: tuple[int, int], draw: int) -> str:
    release, users, encoder = spec.release, spec.users, spec.encoder
    material = json.dumps(
        {
            "v": REWRITE_VERSION,
            "word": [release.word_mechanism, release.word_epsilon, release.word_options],
            "noise-seed": release.noise_seed,
            "data": spec.data.flat(),  # which documents, and (num-users, partitioner) which users hold them
            "users": [users.num_users, users.partitioner, users.dirichlet_alpha, users.seed],
            "encoder": [encoder.encoder, encoder.doc_embedding],
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
    spec: LevelSpec, texts: list[str], purpose: str, partition: tuple[int, int], draw: int, seed: int
) -> RewrittenSplit:
    """Rewrite ``texts`` (a node's documents of ``purpose``) with a generator seeded by ``seed``, then embed.

    ``seed`` is the node's secret-derived seed of this (split, draw); the cache
    key is the public configuration plus ``noise-seed``, so on disk only a fixed
    ``noise-seed`` is cached (then ``seed`` is a function of the key).
    """
    key = _key(spec, purpose, partition, draw)
    memo = (key, seed)
    if memo in _MEMORY:
        return _MEMORY[memo]
    path = spec.encoder.cache_folder / "rewrites" / f"{key}.npz"
    persist = spec.release.noise_seed >= 0
    if persist and path.is_file():
        cached = _load(path, len(texts))
        if cached is not None:
            _MEMORY[memo] = cached
            return cached
    out = _rewrite_and_embed(spec, texts, seed, purpose)
    if persist:
        _save(path, out)
    _MEMORY[memo] = out
    return out


def _rewrite_and_embed(spec: LevelSpec, texts: list[str], seed: int, purpose: str) -> RewrittenSplit:
    if not texts:
        return RewrittenSplit(torch.zeros(0, 0), np.zeros(0, dtype=np.int64))
    mech = word_mechanism(spec.release)
    start = time.perf_counter()
    gen = SecureGenerator() if spec.release.secure_rng else torch.Generator().manual_seed(seed)
    rewrite = mech.rewrite(list(texts), gen)
    num_words = rewrite.num_words.numpy()
    rewritten_at = time.perf_counter()
    emb = embed_texts(rewrite.texts, spec.encoder, best_device(spec.device), progress=True, store=False)
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
    """Write a sealed entry atomically: concurrent nodes may race on one key, the last complete file wins.

    The file stays an ``.npz`` with the members ``emb``, ``num_words`` and ``n`` that
    earlier versions wrote, plus ``sha256`` (:func:`fl.encoding.cache_files.seal`).
    """
    entry = seal({"emb": out.emb.numpy(), "num_words": out.num_words, "n": np.array(len(out.num_words))})
    arrays: dict[str, Any] = {k: np.asarray(v) for k, v in entry.items()}  # numpy's stub types **kwds as allow_pickle
    atomic_write(path, lambda fh: np.savez(fh, **arrays))


def _load(path: Path, n: int) -> RewrittenSplit | None:
    """The cached rewrite of ``n`` documents at ``path``, or ``None`` (with a warning) when it must be recomputed.

    Used only if its checksum matches (a file from before checksums: if the zip's
    CRC-32s hold) and its arrays have the shapes of ``n`` documents, finite
    embeddings and non-negative word counts.
    """
    try:
        with np.load(path, allow_pickle=False) as z:  # reading every member checks its CRC-32
            saved = {name: z[name] for name in z.files}
    except Exception as err:  # any unreadable file is a miss, never a crash
        discarded(path, f"unreadable: {type(err).__name__}: {err}")
        return None
    opened = unseal(saved, path)
    if opened is None:
        return None
    entry = opened[0]
    emb, num_words, count = entry.get("emb"), entry.get("num_words"), entry.get("n")
    if emb is None or num_words is None or count is None or count.shape != () or int(count) != n:
        # A different number of documents under the same key: not this split's rewrite.
        discarded(path, f"holds {None if count is None else count} documents, expected {n}")
        return None
    if (
        emb.dtype != np.float32
        or emb.ndim != 2
        or len(emb) != n
        or not np.isfinite(emb).all()
        or num_words.shape != (n,)
        or num_words.dtype.kind not in "iu"
        or (num_words < 0).any()
    ):
        discarded(path, f"unexpected arrays: emb {emb.dtype} {emb.shape}, num_words {num_words.shape}")
        return None
    return RewrittenSplit(torch.as_tensor(emb), num_words.astype(np.int64))


__all__ = ["RewrittenSplit", "delta_warning", "rewritten_split", "word_mechanism"]
