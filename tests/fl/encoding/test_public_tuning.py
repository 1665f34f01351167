"""Public fine-tuning of the encoder (``fl.encoding.public_tuning``): only public documents reach it, the
artifact is named by its weights' digest and checked where it is loaded, a recipe is tuned once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from fl import config as config_mod
from fl.data import datasets as data
from fl.encoding.encoder import model_id
from fl.encoding.public_tuning import published_encoder, tune_public, weights_digest

TINY = {  # a few seconds on 2 cores: one top layer, one epoch, about 12 public documents
    "encoder-tuning": "public",
    "public-fraction": 0.4,
    "tuning-part": "top",
    "tuning-layers": 1,
    "tuning-epochs": 1,
    "tuning-batch-size": 4,
    "tuning-holdout": 0.25,
    "device": "cpu",
    "seed": 3,
}


def _write(path: Path, texts: list[str], labels: list[int]) -> Path:
    path.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in zip(texts, labels, strict=True)))
    return path


def _corpus(data_dir: Path, n: int = 30) -> tuple[list[str], list[int]]:
    cfg = config_mod.resolve({"dataset": "sst2", "data-dir": str(data_dir), "train-size": n, "seed": 1})
    train = data.load(cfg).train
    return [str(t) for t in train["text"]], [int(y) for y in train["label"]]


def _cfg(dataset: Path, cache: Path, **extra: object) -> config_mod.RunConfig:
    return config_mod.resolve({**TINY, "dataset": str(dataset), "cache-dir": str(cache), **extra})


def test_only_public_documents_reach_the_tuning(tmp_path: Path, data_dir: Path) -> None:
    """A private document changed: the tuned encoder's digest is unchanged. A public document changed:
    it changes (the power check: the digest does depend on the data it was tuned on)."""
    texts, labels = _corpus(data_dir)
    first = _write(tmp_path / "a.jsonl", texts, labels)
    ds = data.load(_cfg(first, tmp_path / "c0"))
    public = set(ds.public["text"])
    private = [i for i, t in enumerate(texts) if t not in public]
    shown = [i for i, t in enumerate(texts) if t in public]
    assert private and shown
    base = tune_public(_cfg(first, tmp_path / "c1"), progress=False)

    changed = list(texts)
    changed[private[0]] = "an entirely different private sentence that nobody else holds ."
    second = _write(tmp_path / "b.jsonl", changed, labels)
    assert set(data.load(_cfg(second, tmp_path / "c0")).public["text"]) == public  # same public split
    assert tune_public(_cfg(second, tmp_path / "c2"), progress=False).digest == base.digest

    changed = list(texts)
    changed[shown[0]] = "an entirely different public sentence ."
    third = _write(tmp_path / "c.jsonl", changed, labels)
    assert tune_public(_cfg(third, tmp_path / "c3"), progress=False).digest != base.digest


def test_the_artifact_is_its_digest_reused_by_recipe_and_checked_on_load(tmp_path: Path, data_dir: Path) -> None:
    texts, labels = _corpus(data_dir)
    dataset = _write(tmp_path / "a.jsonl", texts, labels)
    cfg = _cfg(dataset, tmp_path / "cache")
    tuned = tune_public(cfg, progress=False)
    assert tuned.folder.name == tuned.digest and len(tuned.digest) == 64
    n = len(data.load(cfg).public)
    assert tuned.info["public_documents"] == n and tuned.info["holdout_documents"] == round(0.25 * n)
    assert [e["epoch"] for e in tuned.info["epochs"]] == [1] and tuned.info["epoch_kept"] == 1
    from sentence_transformers import SentenceTransformer

    assert weights_digest(SentenceTransformer(str(tuned.folder), device="cpu")) == tuned.digest
    assert model_id(str(tuned.folder)) == f"sanitas-encoder|{tuned.digest}"  # the embedding cache's key
    assert published_encoder(tuned.folder.parent, tuned.digest) == str(tuned.folder)
    again = tune_public(cfg, progress=False)
    assert again.digest == tuned.digest and again.info.get("reused") is True
    # a folder whose weights are not its name's: refused where it is loaded
    fake = "0" * 64
    shutil.copytree(tuned.folder, tuned.folder.parent / fake)
    with pytest.raises(ValueError, match="has weights of digest"):
        published_encoder(tuned.folder.parent, fake)
    with pytest.raises(ValueError, match="not published"):
        published_encoder(tuned.folder.parent, "1" * 64)


def test_lora_adapters_are_merged_into_a_plain_encoder(tmp_path: Path, data_dir: Path) -> None:
    texts, labels = _corpus(data_dir)
    dataset = _write(tmp_path / "a.jsonl", texts, labels)
    tuned = tune_public(_cfg(dataset, tmp_path / "cache", **{"tuning-part": "lora", "tuning-lora-rank": 2}))
    from sentence_transformers import SentenceTransformer

    from fl.encoding.encoder import resolve_model

    model = SentenceTransformer(str(tuned.folder), device="cpu")
    base = SentenceTransformer(resolve_model("all-MiniLM-L6-v2"), device="cpu")
    assert set(model.state_dict()) == set(base.state_dict())  # no adapter left: a plain encoder
    changed = [k for k, v in model.state_dict().items() if not np.array_equal(v.numpy(), base.state_dict()[k].numpy())]
    assert changed and all(".layer.5.attention.self." in k for k in changed)  # only the top layer's q and v
    assert tuned.info["trainable_parameters"] == 2 * (384 * 2 + 2 * 384)


def test_tuning_keys_are_checked(tmp_path: Path) -> None:
    for bad, message in (
        ({"encoder-tuning": "public"}, "public-fraction > 0"),
        ({"tuning-part": "half"}, "tuning-part must be one of"),
        ({"tuning-holdout": 1.0}, "tuning-holdout must lie in"),
        ({"tuning-learning-rate": -1.0}, "tuning-learning-rate must be >= 0"),
        ({"central-train": "encoder"}, "central-train = 'encoder'"),
        ({"central-train": "encoder", "mode": "central", "central-unit": "node"}, "central-unit = 'node'"),
        ({"central-tuning-part": "all"}, "central-tuning-part must be one of"),
    ):
        with pytest.raises(config_mod.ConfigError, match=message):
            config_mod.resolve(bad)
