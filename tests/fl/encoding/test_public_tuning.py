"""Public fine-tuning of the encoder (``fl.encoding.public_tuning``): only public documents reach it, the
artifact is named by the digest of its whole folder and checked where it is loaded, a recipe is tuned once,
and a recipe entry is reused only for the same inputs and an unaltered published folder."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from fl import config as config_mod
from fl import wire
from fl.data import datasets as data
from fl.encoding import public_tuning
from fl.encoding.encoder import folder_digest, model_id, resolve_model
from fl.encoding.public_tuning import TuningSpec, _recipe, published_encoder, tune_public
from tests.support.run_data import load_run

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
    train = data.load(cfg.data, cfg.users, cfg.release.level).train
    return [str(t) for t in train["text"]], [int(y) for y in train["label"]]


def _cfg(dataset: Path, cache: Path, **extra: object) -> config_mod.RunConfig:
    return config_mod.resolve({**TINY, "dataset": str(dataset), "cache-dir": str(cache), **extra})


def test_only_public_documents_reach_the_tuning(tmp_path: Path, data_dir: Path) -> None:
    """A private document changed: the tuned encoder's digest is unchanged. A public document changed:
    it changes (the power check: the digest does depend on the data it was tuned on)."""
    texts, labels = _corpus(data_dir)
    first = _write(tmp_path / "a.jsonl", texts, labels)
    ds = load_run(_cfg(first, tmp_path / "c0"))
    public = set(ds.public["text"])
    private = [i for i, t in enumerate(texts) if t not in public]
    shown = [i for i, t in enumerate(texts) if t in public]
    assert private and shown
    base = tune_public(TuningSpec.from_config(_cfg(first, tmp_path / "c1")), progress=False)

    changed = list(texts)
    changed[private[0]] = "an entirely different private sentence that nobody else holds ."
    second = _write(tmp_path / "b.jsonl", changed, labels)
    assert set(load_run(_cfg(second, tmp_path / "c0")).public["text"]) == public  # same public split
    assert tune_public(TuningSpec.from_config(_cfg(second, tmp_path / "c2")), progress=False).digest == base.digest

    changed = list(texts)
    changed[shown[0]] = "an entirely different public sentence ."
    third = _write(tmp_path / "c.jsonl", changed, labels)
    assert tune_public(TuningSpec.from_config(_cfg(third, tmp_path / "c3")), progress=False).digest != base.digest


def test_the_artifact_is_its_digest_reused_by_recipe_and_checked_on_load(tmp_path: Path, data_dir: Path) -> None:
    texts, labels = _corpus(data_dir)
    dataset = _write(tmp_path / "a.jsonl", texts, labels)
    cfg = _cfg(dataset, tmp_path / "cache")
    tuned = tune_public(TuningSpec.from_config(cfg), progress=False)
    assert tuned.folder.name == tuned.digest and len(tuned.digest) == 64
    n = len(data.load(cfg.data, cfg.users, cfg.release.level).public)
    assert tuned.info["public_documents"] == n and tuned.info["holdout_documents"] == round(0.25 * n)
    assert [e["epoch"] for e in tuned.info["epochs"]] == [1] and tuned.info["epoch_kept"] == 1
    assert folder_digest(tuned.folder)[0] == tuned.digest  # the digest of every file of the folder
    assert model_id(str(tuned.folder)) == f"sanitas-encoder|{tuned.digest}"  # the embedding cache's key
    assert published_encoder(tuned.folder.parent, tuned.digest) == str(tuned.folder)
    again = tune_public(TuningSpec.from_config(cfg), progress=False)
    assert again.digest == tuned.digest and again.info.get("reused") is True
    # a folder whose files are not its name's: refused where it is loaded
    fake = "0" * 64
    shutil.copytree(tuned.folder, tuned.folder.parent / fake)
    with pytest.raises(ValueError, match=f"expected {fake}, found {tuned.digest}"):
        published_encoder(tuned.folder.parent, fake)
    with pytest.raises(ValueError, match="not published"):
        published_encoder(tuned.folder.parent, "1" * 64)


def test_lora_adapters_are_merged_into_a_plain_encoder(tmp_path: Path, data_dir: Path) -> None:
    texts, labels = _corpus(data_dir)
    dataset = _write(tmp_path / "a.jsonl", texts, labels)
    tuned = tune_public(
        TuningSpec.from_config(_cfg(dataset, tmp_path / "cache", **{"tuning-part": "lora", "tuning-lora-rank": 2}))
    )
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


# ---------------------------------------------------------------- the recipe cache: reused only for the same inputs


def _fake_fine_tune(calls: list[tuple[list[str], list[int], int]]) -> Any:
    """``fine_tune`` without training: records its inputs and shifts one weight by an amount that depends
    on them (texts, labels, classes, seed), so that other inputs give another encoder, the same ones the same."""

    def fake(model: Any, texts: Any, labels: Any, num_classes: int, *, seed: int, **kwargs: Any) -> Any:
        calls.append((list(texts), np.asarray(labels).tolist(), int(seed)))
        material = json.dumps([list(texts), np.asarray(labels).tolist(), int(num_classes), int(seed)]).encode()
        shift = 1e-3 * (1 + int.from_bytes(hashlib.sha256(material).digest()[:2], "little"))
        with torch.no_grad():
            model[0].auto_model.embeddings.LayerNorm.bias[0] += shift
        return model.eval(), {"public_documents": len(texts), "epochs": [], "epoch_kept": 1}

    return fake


def test_every_input_of_the_recipe_changes_its_key(tmp_path: Path, data_dir: Path) -> None:
    """The recipe key (the name of the recipe entry) changes with the public texts, their order, the labels,
    the seed, a tuning key, the number of classes, the device type and the base encoder's files (its
    tokenizer configuration, not only its weights); it is the same for the same inputs."""
    texts, labels = _corpus(data_dir, 12)
    cfg = _cfg(_write(tmp_path / "a.jsonl", texts, labels), tmp_path / "cache")
    key = _recipe(TuningSpec.from_config(cfg), texts, labels, 2, "cpu")
    assert _recipe(TuningSpec.from_config(cfg), list(texts), list(labels), 2, "cpu") == key
    other_text = ["a different public sentence .", *texts[1:]]
    other_label = [1 - labels[0], *labels[1:]]
    joined = [texts[0] + texts[1][:3], texts[1][3:], *texts[2:]]  # the same characters, cut elsewhere
    variants = {
        "text": _recipe(TuningSpec.from_config(cfg), other_text, labels, 2, "cpu"),
        "order": _recipe(TuningSpec.from_config(cfg), texts[::-1], labels[::-1], 2, "cpu"),
        "cut": _recipe(TuningSpec.from_config(cfg), joined, labels, 2, "cpu"),
        "label": _recipe(TuningSpec.from_config(cfg), texts, other_label, 2, "cpu"),
        "seed": _recipe(TuningSpec.from_config(cfg.replace(seed=4)), texts, labels, 2, "cpu"),
        "epochs": _recipe(TuningSpec.from_config(cfg.replace(**{"tuning-epochs": 2})), texts, labels, 2, "cpu"),
        "classes": _recipe(TuningSpec.from_config(cfg), texts, labels, 3, "cpu"),
        "device": _recipe(TuningSpec.from_config(cfg), texts, labels, 2, "cuda:0"),
    }
    assert len({key, *variants.values()}) == 1 + len(variants), variants
    # texts and labels are framed (length-prefixed): no two lists of documents read as the same stream
    assert _recipe(TuningSpec.from_config(cfg), ["a1b", "c"], [0, 1], 2, "cpu") != _recipe(
        TuningSpec.from_config(cfg), ["a", "b1c"], [0, 1], 2, "cpu"
    )
    # the base encoder: a copy of the packaged folder is the same base; its tokenizer edited is another
    base = tmp_path / "base"
    shutil.copytree(resolve_model("all-MiniLM-L6-v2"), base)
    assert _recipe(TuningSpec.from_config(cfg.replace(encoder=str(base))), texts, labels, 2, "cpu") == key
    tokenizer = base / "tokenizer_config.json"
    tokenizer.write_text(tokenizer.read_text().replace("true", "false", 1))
    assert _recipe(TuningSpec.from_config(cfg.replace(encoder=str(base))), texts, labels, 2, "cpu") != key


def test_changed_public_data_or_seed_is_tuned_anew_not_reused(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same recipe is reused (not tuned again); the labels, a public text or the seed changed: a new
    recipe entry and a new encoder, tuned from the new inputs, never the old encoder."""
    calls: list[tuple[list[str], list[int], int]] = []
    monkeypatch.setattr(public_tuning, "fine_tune", _fake_fine_tune(calls))
    texts, labels = _corpus(data_dir)
    cache = tmp_path / "cache"
    cfg = _cfg(_write(tmp_path / "a.jsonl", texts, labels), cache)
    first = tune_public(TuningSpec.from_config(cfg), progress=False)
    assert len(calls) == 1 and "reused" not in first.info
    again = tune_public(TuningSpec.from_config(cfg), progress=False)
    assert len(calls) == 1 and again.digest == first.digest and again.info["reused"] is True

    public = set(data.load(cfg.data, cfg.users, cfg.release.level).public["text"])  # type: ignore[index]
    shown = next(i for i, t in enumerate(texts) if t in public)
    flipped = list(labels)
    flipped[shown] = 1 - flipped[shown]
    changed = list(texts)
    changed[shown] = "an entirely different public sentence ."
    runs = {
        "labels": _cfg(_write(tmp_path / "labels.jsonl", texts, flipped), cache),
        "text": _cfg(_write(tmp_path / "text.jsonl", changed, labels), cache),
        "seed": cfg.replace(seed=4),
    }
    digests = {first.digest}
    for what, run in runs.items():
        tuned = tune_public(TuningSpec.from_config(run), progress=False)
        assert "reused" not in tuned.info, what
        assert tuned.digest not in digests, what  # not the old encoder
        digests.add(tuned.digest)
    assert len(calls) == 1 + len(runs)
    assert calls[1][1] != calls[0][1] and calls[2][0] != calls[0][0] and calls[3][2] == 4  # the new inputs
    assert len(list((cache / "encoders" / "recipes").glob("*.json"))) == 1 + len(runs)
    assert published_encoder(cache / "encoders", first.digest) == str(first.folder)  # the old one left as it was


def test_a_recipe_entry_whose_folder_was_altered_is_tuned_and_published_again(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A recipe entry is reused only if the published folder it names still has its digest: with
    tokenizer_config.json edited on disk, the run says so, tunes again and publishes the encoder anew (the
    altered folder replaced, the same digest back); an entry that names another recipe is not reused either."""
    calls: list[tuple[list[str], list[int], int]] = []
    monkeypatch.setattr(public_tuning, "fine_tune", _fake_fine_tune(calls))
    texts, labels = _corpus(data_dir)
    cfg = _cfg(_write(tmp_path / "a.jsonl", texts, labels), tmp_path / "cache")
    first = tune_public(TuningSpec.from_config(cfg), progress=False)
    tokenizer = first.folder / "tokenizer_config.json"
    original = tokenizer.read_bytes()
    tokenizer.write_bytes(original.replace(b'"do_lower_case": true', b'"do_lower_case": false'))
    with pytest.raises(ValueError, match=f"expected {first.digest}"):
        published_encoder(first.folder.parent, first.digest)

    with caplog.at_level(logging.WARNING, logger="fl.encoding.public_tuning"):
        second = tune_public(TuningSpec.from_config(cfg), progress=False)
    assert len(calls) == 2 and "reused" not in second.info
    warnings = " ".join(r.getMessage() for r in caplog.records)
    assert "not reusable" in warnings and f"expected {first.digest}" in warnings and "replacing it" in warnings
    assert second.digest == first.digest and tokenizer.read_bytes() == original
    assert published_encoder(second.folder.parent, second.digest) == str(second.folder)
    assert not list(first.folder.parent.glob(".*"))  # no staging or altered folder left behind
    assert tune_public(TuningSpec.from_config(cfg), progress=False).info["reused"] is True and len(calls) == 2

    (entry,) = (first.folder.parent / "recipes").glob("*.json")
    known = json.loads(entry.read_text())
    entry.write_text(json.dumps({**known, "recipe": "0" * 64}))  # an entry copied from another recipe
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fl.encoding.public_tuning"):
        assert "reused" not in tune_public(TuningSpec.from_config(cfg), progress=False).info
    assert len(calls) == 3 and "is for the recipe 0000" in caplog.text


@pytest.mark.slow
def test_a_tuned_encoder_altered_on_disk_is_refused_by_the_node_and_tuned_again(tmp_path: Path, data_dir: Path) -> None:
    """The real tuning end to end: the node refuses the published folder once a byte of its tokenizer
    changed; the next run tunes again (deterministically: the same digest) and the node accepts it."""
    from flwr.app import ConfigRecord, RecordDict

    from clients.node import with_published_encoder

    texts, labels = _corpus(data_dir)
    cfg = _cfg(_write(tmp_path / "a.jsonl", texts, labels), tmp_path / "cache")
    tuned = tune_public(TuningSpec.from_config(cfg), progress=False)
    request = SimpleNamespace(content=RecordDict({wire.ENCODER: ConfigRecord({"digest": tuned.digest})}))
    assert with_published_encoder(cfg, request).encoder.encoder == str(tuned.folder)  # type: ignore[arg-type]
    vocab = tuned.folder / "tokenizer.json"
    vocab.write_bytes(vocab.read_bytes().replace(b'"[UNK]"', b'"[UNQ]"', 1))
    with pytest.raises(ValueError, match=f"expected {tuned.digest}, found .*tokenizer.json"):
        with_published_encoder(cfg, request)  # type: ignore[arg-type]
    again = tune_public(TuningSpec.from_config(cfg), progress=False)
    assert again.digest == tuned.digest and "reused" not in again.info
    assert with_published_encoder(cfg, request).encoder.encoder == str(tuned.folder)  # type: ignore[arg-type]


def test_tuning_through_the_noise_reads_releases_and_passes_gradients_straight_through() -> None:
    """tuning-noise: the head reads a sanitized release of a trainable map of the embedding; two forward
    passes of the same embedding differ (fresh noise), and the loss's gradient reaches the map and the
    embedding (straight-through: the encoder learns from it). Without noise the head reads s * G(x)."""
    from fl.encoding.public_tuning import _Readout
    from mechanisms import create

    gen = torch.Generator().manual_seed(0)
    emb = torch.nn.functional.normalize(torch.randn(8, 16, generator=gen), dim=1).requires_grad_(True)
    readout = _Readout(16, 2, create("purkayastha", epsilon=2.0), 4, seed=0)
    with torch.no_grad():
        readout.head.weight.copy_(torch.randn(2, 4, generator=gen))
    first, second = readout(emb), readout(emb)
    assert first.shape == (8, 2) and not torch.allclose(first, second)
    torch.nn.functional.cross_entropy(first, torch.zeros(8, dtype=torch.long)).backward()
    assert readout.map.weight.grad is not None and float(readout.map.weight.grad.abs().sum()) > 0
    assert emb.grad is not None and float(emb.grad.abs().sum()) > 0
    plain = _Readout(16, 2, None, 0, seed=0)
    assert not hasattr(plain, "map") and torch.equal(plain(emb), torch.zeros(8, 2))  # zero-initialised head


def test_tuning_through_the_noise_keys_its_recipe_on_the_mechanism(tmp_path: Path, data_dir: Path) -> None:
    texts, labels = _corpus(data_dir)
    cfg = _cfg(_write(tmp_path / "d.jsonl", texts, labels), tmp_path / "cache", **{"tuning-noise": True})
    key = _recipe(TuningSpec.from_config(cfg), texts, labels, 2, "cpu")
    assert _recipe(TuningSpec.from_config(cfg.replace(**{"sentence-epsilon": 3.0})), texts, labels, 2, "cpu") != key
    assert _recipe(TuningSpec.from_config(cfg.replace(**{"map-dim": 8})), texts, labels, 2, "cpu") != key
    plain = cfg.replace(**{"tuning-noise": False})
    assert _recipe(TuningSpec.from_config(plain), texts, labels, 2, "cpu") != key
    assert _recipe(
        TuningSpec.from_config(plain.replace(**{"sentence-epsilon": 3.0})), texts, labels, 2, "cpu"
    ) == _recipe(
        TuningSpec.from_config(plain), texts, labels, 2, "cpu"
    )  # without the noise the mechanism is not an input of the tuning
    with pytest.raises(config_mod.ConfigError, match="gradient path"):
        config_mod.validate(cfg.replace(**{"sentence-mechanism": "class_rr"}))
