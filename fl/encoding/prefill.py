"""A cold simulation's encoding, done once before its nodes start, with every core.

A simulated node embeds its users' texts through the shared embedding cache (:mod:`fl.encoding.encoder`), on
the torch threads its node has (``node-cpus``, 1 by default: a node is one device). On a cold cache that
put the whole dataset's encoding on one core: the quickstart spent 6 minutes embedding 67,000 phrases at
about 175 texts/s. :func:`prefill` encodes the texts the nodes will miss in the launching process first, on
its torch threads (every core unless ``OMP_NUM_THREADS`` says otherwise), into the same cache; the nodes
then read them. The embeddings are the same function of the same texts (the cache is keyed by encoder and
text, whoever computed the entry): what changes is where a simulation spends its encoder time. On real
devices each node encodes its own texts, as before.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import numpy as np

from fl.config import EncoderConfig
from fl.data.columns import columns
from fl.encoding.encoder import EmbeddingCache, best_device, embed_texts, model_id

log = logging.getLogger(__name__)


def _splits(ds: Any) -> list[Any]:
    return [part for name in ("train", "test", "public") if (part := getattr(ds, name, None)) is not None and len(part)]


def texts_to_encode(ds: Any) -> list[str]:
    """Every distinct text of a loaded dataset's splits (train, test, public), in first-seen order."""
    texts: dict[str, None] = {}
    for part in _splits(ds):
        column = columns(part)[0] if hasattr(part, "select_columns") else part["text"]
        texts.update(dict.fromkeys(str(t) for t in column))
    return list(texts)


def _marker(ds: Any, encoder: EncoderConfig) -> Path | None:
    """The file that says an earlier run prefilled this dataset's texts for this encoder: named by the
    splits' ``datasets`` fingerprints (a hash of their source and every transform, the same in every
    process); ``None`` when a split has none. A warm run then skips hashing its 68,000 texts (0.9 s)."""
    prints = [str(getattr(part, "_fingerprint", "") or "") for part in _splits(ds)]
    if not prints or not all(prints):
        return None
    material = "|".join([model_id(encoder.encoder), *prints]).encode()
    return Path(encoder.cache_folder) / "prefilled" / hashlib.sha256(material).hexdigest()[:32]


def prefill(ds: Any, encoder: EncoderConfig, device: str, level: str) -> int:
    """Encode into the cache the texts of ``ds`` the nodes would embed and the cache lacks; returns how
    many were encoded (0 when the cache holds them all: then only their keys were hashed).

    Only where a node embeds each text whole with the published encoder (``doc-embedding = "whole"``,
    ``encoder-tuning = "none"``, the sentence and word levels): the document level embeds sentences, and a
    publicly tuned encoder exists only once the server has tuned it."""
    if level == "document" or encoder.doc_embedding != "whole" or encoder.encoder_tuning != "none":
        return 0
    if not _splits(ds):  # no text splits (the synthetic users are vectors): nothing to encode, no cache to read
        return 0
    marker = _marker(ds, encoder)
    if marker is not None and marker.is_file():
        return 0
    texts = texts_to_encode(ds)
    cache = EmbeddingCache.shared(encoder.cache_folder, model_id(encoder.encoder))
    missing = cache.missing(texts)
    if not missing:
        _mark(marker)
        return 0
    import torch

    where = best_device(device)
    print(
        f"sanitas: encoding {len(missing):,} texts once with {encoder.encoder} on {where} "
        f"({torch.get_num_threads()} threads); later runs read them from the cache",
        flush=True,
    )
    embed_texts([texts[i] for i in np.asarray(missing)], encoder, where, progress=True)
    _mark(marker)
    return len(missing)


def _mark(marker: Path | None) -> None:
    """Leave ``marker`` (a cache entry deleted later is then encoded by the node that misses it, as before)."""
    if marker is not None:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()


__all__ = ["prefill", "texts_to_encode"]
