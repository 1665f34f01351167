"""A cold simulation's encoding in the launcher (fl.encoding.prefill): what it encodes, that a node then reads
it from the cache, and that the every-core embeddings equal a one-thread node's own to the encoder tests'
tolerance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fl import config
from fl.encoding import encoder
from fl.encoding.prefill import prefill, texts_to_encode

SPLITS = {
    "train": {"text": ["a fine film .", "a dull film .", "a fine film ."]},
    "test": {"text": ["not bad at all", "a dull film ."]},
    "public": {"text": ["the best of the year"]},
}


class _Dataset:
    def __init__(self) -> None:
        for name, split in SPLITS.items():
            setattr(self, name, split)


def _encoder(tmp_path: Path, **keys: object) -> config.EncoderConfig:
    return config.as_run_config(config.resolve({"dataset": "sst2", "cache-dir": str(tmp_path), **keys})).encoder


def test_prefill_encodes_each_missing_text_once_and_a_node_then_reads_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert texts_to_encode(_Dataset()) == ["a fine film .", "a dull film .", "not bad at all", "the best of the year"]
    enc = _encoder(tmp_path)
    assert prefill(_Dataset(), enc, "cpu", "sentence") == 4
    assert prefill(_Dataset(), enc, "cpu", "sentence") == 0  # the second run finds them all
    prefilled = encoder.embed_texts(texts_to_encode(_Dataset()), enc, "cpu", progress=False)
    with torch.no_grad():  # what a one-thread node computes itself
        previous = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            own = encoder.load_encoder(enc.encoder, "cpu").encode(texts_to_encode(_Dataset()), convert_to_numpy=True)
        finally:
            torch.set_num_threads(previous)
    np.testing.assert_allclose(prefilled, own, atol=2e-5)

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the node should have read the cache")

    monkeypatch.setattr(encoder, "load_encoder", boom)
    encoder.embed_texts(SPLITS["test"]["text"], enc, "cpu", progress=False)


def test_prefill_leaves_what_it_cannot_know_to_the_nodes(tmp_path: Path) -> None:
    assert prefill(_Dataset(), _encoder(tmp_path), "cpu", "document") == 0  # nodes embed sentences
    assert prefill(_Dataset(), _encoder(tmp_path, **{"doc-embedding": "sentence-mean"}), "cpu", "sentence") == 0
    assert not any((tmp_path / "embeddings").rglob("*.npy"))
    from fl.data.synthetic import SyntheticDataset

    vectors = SyntheticDataset(num_train=10, num_test=5, dim=4, seed=0)
    assert prefill(vectors, _encoder(tmp_path / "other"), "cpu", "sentence") == 0
    assert not (tmp_path / "other").exists()  # the cache was not even opened


def test_a_prefilled_dataset_is_marked_and_a_warm_run_skips_its_texts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    class Splits:
        train = datasets.Dataset.from_dict({"text": ["a fine film .", "a dull film ."], "label": [1, 0]})
        test = datasets.Dataset.from_dict({"text": ["not bad at all"], "label": [1]})

    enc = _encoder(tmp_path)
    assert prefill(Splits(), enc, "cpu", "sentence") == 3
    assert len(list((tmp_path / "prefilled").iterdir())) == 1

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("a marked dataset needs no look at its texts")

    monkeypatch.setattr(encoder.EmbeddingCache, "missing", boom)
    assert prefill(Splits(), enc, "cpu", "sentence") == 0
    Splits.test = datasets.Dataset.from_dict({"text": ["another text"], "label": [0]})  # other data: looked at
    with pytest.raises(AssertionError, match="needs no look"):
        prefill(Splits(), enc, "cpu", "sentence")
