"""Documents as sentence embeddings: layout, means, selection, embedding through the cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fl import config
from fl.encoding.documents import SentenceDocs, embed_sentences


def _docs() -> SentenceDocs:
    emb = torch.arange(12, dtype=torch.float32).view(6, 2)
    return SentenceDocs(emb, np.array([0, 2, 5, 6]))


def test_layout_means_and_selection() -> None:
    docs = _docs()
    assert len(docs) == 3 and docs.dim == 2 and docs.num_sentences.tolist() == [2, 3, 1]
    assert docs.owners().tolist() == [0, 0, 1, 1, 1, 2]
    assert torch.equal(docs.docs([1])[0], docs.emb[2:5])
    expected = torch.stack([docs.emb[0:2].mean(0), docs.emb[2:5].mean(0), docs.emb[5:6].mean(0)])
    assert torch.allclose(docs.means(), expected)
    sub = docs.select([2, 0])
    assert sub.num_sentences.tolist() == [1, 2] and torch.equal(sub.emb, docs.emb[[5, 0, 1]])
    assert torch.allclose(docs.means(docs.emb * 2), 2 * expected)
    with pytest.raises(ValueError, match="offsets"):
        SentenceDocs(docs.emb, np.array([0, 2, 7]))


def test_embed_sentences_splits_and_uses_the_encoder(tmp_path: Path) -> None:
    cfg = config.resolve({"cache-dir": str(tmp_path)})
    docs = embed_sentences(["It rains. It pours!", "One.", "Abc? Def ghi. Jk lm."], cfg.encoder, "cpu", progress=False)
    assert docs.num_sentences.tolist() == [2, 1, 3] and docs.emb.shape == (6, 384)
    again = embed_sentences(["It pours!"], cfg.encoder, "cpu", progress=False)
    assert torch.allclose(again.emb[0], docs.emb[1])  # one sentence, one embedding, whatever the document
