"""Client-side word-level rewriting: reproducible draws, the per-(mechanism, epsilon, seed) cache,
the shared embedding cache left alone, and the delta warning."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import mechanisms
from fl import config
from fl.encoding.encoder import embed_documents
from fl.levels.spec import LevelSpec
from fl.levels.word import rewrite

TEXTS = [
    "a charming and often affecting journey .",
    "the movie is bad",
    "unflinchingly bleak and desperate",
    "a charming and often affecting journey .",
]


def _cfg(cache_dir: Path, **extra: object) -> dict:
    return config.resolve(
        {
            "word-mechanism": "cmp",
            "word-epsilon": 30.0,
            "sentence-mechanism": "none",
            "word-options": "vocab_size = 5000",
            "cache-dir": str(cache_dir),
            "noise-seed": 0,
            **extra,
        }
    )


def _files(folder: Path) -> set[Path]:
    return set(folder.rglob("*.npy")) if folder.exists() else set()


def test_rewrite_is_reproducible_cached_and_leaves_the_embedding_cache_alone(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    before = _files(tmp_path / "embeddings")
    first = rewrite.rewritten_split(LevelSpec.from_config(cfg), TEXTS, "train", (0, 1), draw=0, seed=123)
    assert first.emb.shape == (4, 384) and first.emb.dtype == torch.float32
    assert first.num_words.tolist() == [6, 4, 4, 6]
    assert _files(tmp_path / "embeddings") == before  # rewrites are not added to the shared cache
    cached = list((tmp_path / "rewrites").glob("*.npz"))
    assert len(cached) == 1
    # Another process (empty memory cache) reads the same file back.
    rewrite._MEMORY.clear()
    again = rewrite.rewritten_split(LevelSpec.from_config(cfg), TEXTS, "train", (0, 1), draw=0, seed=123)
    assert torch.equal(again.emb, first.emb)
    # The released embedding is G(rewritten text): recompute it from the mechanism directly.
    mech = rewrite.word_mechanism(cfg.release)
    texts = mech.rewrite(TEXTS, torch.Generator().manual_seed(123)).texts
    direct = embed_documents(texts, "whole", cfg["encoder"], tmp_path, "cpu", 64, progress=False)
    assert np.allclose(direct, first.emb.numpy(), atol=1e-5)


def test_draws_and_configurations_get_their_own_rewrites(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, **{"word-epsilon": 0.5})  # small epsilon: almost every word changes
    a = rewrite.rewritten_split(LevelSpec.from_config(cfg), TEXTS, "train", (0, 1), draw=0, seed=1)
    b = rewrite.rewritten_split(LevelSpec.from_config(cfg), TEXTS, "train", (0, 1), draw=1, seed=2)
    assert not torch.allclose(a.emb, b.emb)
    other = rewrite.rewritten_split(
        LevelSpec.from_config(_cfg(tmp_path, **{"word-epsilon": 0.6})), TEXTS, "train", (0, 1), 0, 1
    )
    assert not torch.allclose(a.emb, other.emb)
    assert len(list((tmp_path / "rewrites").glob("*.npz"))) == 3
    # A secret seed (noise-seed = -1) is never written to disk.
    secret = _cfg(tmp_path / "secret", **{"noise-seed": -1})
    rewrite.rewritten_split(LevelSpec.from_config(secret), TEXTS, "test", (0, 1), 0, 99)
    assert not (tmp_path / "secret" / "rewrites").exists()


def test_delta_warning_above_one_over_n() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = mechanisms.create("trlaplace", epsilon=20.0).guarantee  # delta 0.0532 per word
    assert tr.delta == pytest.approx(0.0532, abs=1e-4)
    assert "0.0532" in rewrite.delta_warning(tr, 100)
    assert rewrite.delta_warning(tr, 10) is None  # 0.0532 <= 1/10
    gauss = mechanisms.Guarantee(notion="approx", epsilon=1.0, delta=1e-5, granularity="word")
    assert rewrite.delta_warning(gauss, 10_000) is None and rewrite.delta_warning(gauss, 1_000_000) is not None
    assert rewrite.delta_warning(mechanisms.create("word_laplace", epsilon=1.0).guarantee, 10**9) is None
