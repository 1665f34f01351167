"""Documents as their sentence embeddings: the input of the document-level (SentDP) mechanisms.

A :class:`SentenceDocs` holds every sentence embedding of a list of documents
in one flat tensor plus offsets, so that batched work (recoding, means) needs
no Python loop over sentences. Sentences come from the deterministic splitter
(``fl.data.sentences``) and are encoded through the shared embedding cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from fl.config import EncoderConfig
from fl.data.sentences import split_sentences
from fl.encoding.encoder import best_device, encode


@dataclass(frozen=True)
class SentenceDocs:
    """Sentence embeddings of n documents: rows ``offsets[i]:offsets[i+1]`` of ``emb`` are document i's."""

    emb: torch.Tensor  # float32 [total sentences, d]
    offsets: np.ndarray  # int64 [n + 1], offsets[0] = 0

    def __post_init__(self) -> None:
        if (
            self.offsets.ndim != 1
            or self.offsets[0] != 0
            or self.offsets[-1] != self.emb.shape[0]
            or (np.diff(self.offsets) < 0).any()
        ):
            raise ValueError("offsets must start at 0, be non-decreasing and end at the number of sentences")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def dim(self) -> int:
        return int(self.emb.shape[1])

    @property
    def num_sentences(self) -> np.ndarray:
        """Sentences per document (int64 [n])."""
        return np.diff(self.offsets)

    def owners(self) -> torch.Tensor:
        """Document index of every sentence row (LongTensor [total sentences])."""
        return torch.repeat_interleave(torch.arange(len(self)), torch.as_tensor(self.num_sentences))

    def docs(
        self, rows: Sequence[int] | np.ndarray | None = None, emb: torch.Tensor | None = None
    ) -> list[torch.Tensor]:
        """The ``[k_i, d]`` blocks of the given documents (views; ``emb`` replaces the stored rows,
        e.g. recoded sentences of the same layout)."""
        table = self.emb if emb is None else emb
        rows = range(len(self)) if rows is None else rows
        return [table[self.offsets[i] : self.offsets[i + 1]] for i in np.asarray(rows, dtype=np.int64).tolist()]

    def means(self, emb: torch.Tensor | None = None) -> torch.Tensor:
        """Per-document mean of the sentence rows (float32 [n, d]); ``emb`` as in :meth:`docs`."""
        table = (self.emb if emb is None else emb).to(torch.float64)
        sums = torch.zeros(len(self), table.shape[1], dtype=torch.float64).index_add_(0, self.owners(), table)
        counts = torch.as_tensor(self.num_sentences, dtype=torch.float64).clamp_min(1).unsqueeze(1)
        return (sums / counts).to(torch.float32)

    def select(self, rows: Sequence[int] | np.ndarray) -> SentenceDocs:
        """The documents ``rows`` (in that order) as a new :class:`SentenceDocs`."""
        rows = np.asarray(rows, dtype=np.int64)
        k = self.num_sentences[rows]
        index = (
            np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1]) for i in rows])
            if rows.size
            else np.zeros(0, dtype=np.int64)
        )
        return SentenceDocs(
            self.emb[torch.as_tensor(index, dtype=torch.int64)], np.concatenate([[0], np.cumsum(k)]).astype(np.int64)
        )


def embed_sentences(texts: Sequence[str], encoder: EncoderConfig, device: str, progress: bool = True) -> SentenceDocs:
    """Split each text into sentences and embed them with the encoder section's frozen encoder (cached), on
    ``device`` (a configured device, ``"auto"`` included: :func:`fl.encoding.encoder.best_device`)."""
    pieces = [split_sentences(t) for t in texts]
    k = np.array([len(p) for p in pieces], dtype=np.int64)
    flat = [s for p in pieces for s in p]
    if flat:
        emb = encode(
            flat,
            encoder.encoder,
            encoder.cache_folder,
            best_device(device),
            encoder.encode_batch_size,
            progress,
        )
        table = torch.as_tensor(np.asarray(emb), dtype=torch.float32)
    else:
        table = torch.zeros(0, 0, dtype=torch.float32)
    return SentenceDocs(table, np.concatenate([[0], np.cumsum(k)]).astype(np.int64))


__all__ = ["SentenceDocs", "embed_sentences"]
