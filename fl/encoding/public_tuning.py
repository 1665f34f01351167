"""Public fine-tuning of the client encoder G (``encoder-tuning = "public"``), published by its hash.

Before round 1 the server fine-tunes the sentence encoder with a classification head on the
*public* split only, picks the epoch on a seeded public hold-out, and publishes the tuned
encoder as a content-addressed artifact: a sentence-transformers folder under
``<cache-dir>/encoders/<digest>`` whose name is the digest of the whole folder a node loads
(``fl.encoding.published.folder_digest``: every file, the weights, the tokenizer files, the
model, pooling and sentence-transformers configuration and ``modules.json``, by relative
path, length and SHA-256 of its bytes; only the manifest :data:`MANIFEST`, which records
the digest and each file's hash, is left out). Every node loads the encoder the server names
by that digest and checks the files it is about to load against it
(:func:`published_encoder`, ``fl.encoding.encoder.load_encoder``), refusing a folder of
another digest; the embedding cache is keyed by it (``fl.encoding.encoder.model_id``), so a
sweep over epsilon fine-tunes and encodes once.

What is trained (``tuning-part``): ``"all"`` weights, the ``"top"`` ``tuning-layers``
transformer layers, or ``"lora"`` adapters (``peft``, rank ``tuning-lora-rank``) on the query
and value projections of the top ``tuning-layers`` layers, merged into the weights before
publishing. Only public documents reach the tuning (a private document changed leaves the
digest unchanged; tests/fl/encoding/test_public_tuning.py), so the encoder is public like M1 and the
local guarantee is unchanged; the run's statement names the encoder by its digest.

A recipe (the base encoder's files, the public split's texts and labels in order, the number
of classes, the tuning keys, the seed, the device type and the library versions) maps to the
digest it produced (``<cache-dir>/encoders/recipes/<recipe>.json``): a second run with the
same recipe loads the published encoder instead of tuning again. Any input changed is another
recipe (tuned anew); an entry that does not name its own recipe, or whose published folder no
longer matches its digest, is not reused: the encoder is tuned and published again (the
altered folder replaced) and a warning says so.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from fl.config import SECTIONS, EncoderConfig, RunConfig
from fl.config.specs import DocumentSpec
from fl.encoding.cache_files import atomic_write
from fl.encoding.encoder import embedding_dim, model_id, resolve_model
from fl.encoding.published import (
    MANIFEST,
    Fingerprint,
    check_published,
    folder_digest,
    folder_fingerprint,
    is_digest,
    published_digest,
)
from mechanisms.base import SentenceMechanism, straight_through

log = logging.getLogger(__name__)

PARTS = ("all", "top", "lora")
#: tuning-learning-rate = 0: the step size of each part (Adam), the usual values for a MiniLM/BERT
#: encoder: small for all weights, larger for a few top layers, larger still for LoRA adapters.
DEFAULT_LR = {"all": 3e-5, "top": 1e-4, "lora": 1e-3}
HEAD_LR = 1e-3  # the classification head's step size (it starts from zero)
LOGIT_SCALE = 20.0  # the head reads s * G(x) (G's output has unit norm): a cosine classifier's scale
#: The keys the public tuning depends on (with the seed): the encoder section's ``tuning-*`` keys.
TUNING_KEYS = tuple(k for k in SECTIONS["encoder"] if k.startswith("tuning-"))
#: With tuning-noise, the keys of the mechanism the tuning runs through.
NOISE_KEYS = ("sentence-mechanism", "sentence-epsilon", "sentence-options", "map-dim")


def part_learning_rate(encoder: EncoderConfig, part: str | None = None) -> float:
    """``tuning-learning-rate``, or the default of ``part`` (default: ``tuning-part``) when it is 0."""
    lr = float(encoder.tuning_learning_rate)
    return lr if lr > 0 else DEFAULT_LR[part or encoder.tuning_part]


@dataclass(frozen=True)
class TunedEncoder:
    """A published encoder: its digest, its folder, and what was done to make it."""

    digest: str
    folder: Path
    info: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The run's statement of the encoder (summary.json)."""
        return {"tuning": "public", "digest": self.digest, "folder": str(self.folder), **self.info}


def transformer_layers(model: Any) -> nn.ModuleList:
    """The transformer layers of a sentence-transformers BERT-like encoder (``encoder.layer``)."""
    inner = model[0].auto_model
    inner = getattr(inner, "base_model", inner)  # a peft model
    inner = getattr(inner, "model", inner)
    encoder = getattr(inner, "encoder", None)
    layers = getattr(encoder, "layer", None)
    if layers is None:
        raise ValueError(
            f"encoder tuning of parts needs a BERT-like encoder (encoder.layer), got {type(inner).__name__}"
        )
    return layers


def top_layers(model: Any, layers: int) -> list[nn.Module]:
    """The top ``layers`` transformer layers of ``model``; ``ValueError`` unless 1 <= layers <= its depth."""
    stack = transformer_layers(model)
    if not 1 <= layers <= len(stack):
        raise ValueError(f"tuning-layers must lie in [1, {len(stack)}] for this encoder, got {layers}")
    return list(stack)[len(stack) - layers :]


def lora_config(rank: int, layers: list[int] | None = None) -> Any:
    """LoRA adapters (peft) on the query and value projections of the layers numbered ``layers``
    (``None``: of every layer of the module they are injected into)."""
    from peft import LoraConfig

    return LoraConfig(
        r=int(rank),
        lora_alpha=2 * int(rank),
        lora_dropout=0.0,
        target_modules=["query", "value"],
        layers_to_transform=layers,
    )


def trainable_part(model: Any, part: str, layers: int, rank: int) -> list[nn.Parameter]:
    """Make ``part`` of ``model`` trainable (everything else frozen) and return its parameters.

    ``"lora"`` wraps the inner transformer with peft adapters (merge them with :func:`merge_adapters`)."""
    if part not in PARTS:
        raise ValueError(f"tuning-part must be one of {PARTS}, got {part!r}")
    for p in model.parameters():
        p.requires_grad_(part == "all")
    if part == "all":
        return [p for p in model.parameters()]
    top = top_layers(model, layers)
    if part == "top":
        params = [p for layer in top for p in layer.parameters()]
        for p in params:
            p.requires_grad_(True)
        return params
    from peft import get_peft_model

    depth = len(transformer_layers(model))
    model[0].auto_model = get_peft_model(model[0].auto_model, lora_config(rank, list(range(depth - layers, depth))))
    return [p for p in model.parameters() if p.requires_grad]


def merge_adapters(model: Any) -> Any:
    """Fold peft LoRA adapters into the weights (a plain encoder again); other models unchanged."""
    inner = model[0].auto_model
    if hasattr(inner, "merge_and_unload"):
        model[0].auto_model = inner.merge_and_unload()
    return model


def _embed(model: Any, texts: Sequence[str], device: str) -> torch.Tensor:
    features = model.preprocess(list(texts))
    features = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
    return model(features)["sentence_embedding"]


class _Readout(nn.Module):
    """What the tuning head reads: ``s * G(x)`` (a cosine classifier), or with ``noise`` the release of a
    trainable map of it (normalised, sanitized forward, straight-through backward). Zero-initialised head."""

    def __init__(self, d: int, num_classes: int, noise: SentenceMechanism | None, noise_dim: int, seed: int) -> None:
        super().__init__()
        self.noise = noise
        width = d
        if noise is not None:
            if noise_dim < 2:
                raise ValueError(f"tuning through the noise needs a map dimension >= 2, got {noise_dim}")
            self.map = nn.Linear(d, noise_dim, bias=False)
            width = noise.output_dim(noise_dim)
            self.gen = torch.Generator().manual_seed(seed + 1)  # the tuning's own noise: public data only
        self.head = nn.Linear(width, num_classes)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, emb: torch.Tensor) -> torch.Tensor:
        if self.noise is None:
            return self.head(LOGIT_SCALE * emb)
        h = nn.functional.normalize(self.map(emb), dim=1)
        return self.head(LOGIT_SCALE * straight_through(self.noise, h, self.gen))


@torch.no_grad()
def _accuracy(
    model: Any, head: nn.Module, texts: Sequence[str], labels: torch.Tensor, batch: int, device: str
) -> float:
    model.eval()
    right = 0
    for start in range(0, len(texts), batch):
        logits = head(LOGIT_SCALE * _embed(model, texts[start : start + batch], device))
        right += int((logits.argmax(1).cpu() == labels[start : start + batch]).sum())
    return right / max(1, len(texts))


def fine_tune(
    model: Any,
    texts: Sequence[str],
    labels: np.ndarray,
    num_classes: int,
    *,
    part: str,
    layers: int,
    rank: int,
    epochs: int,
    lr: float,
    batch_size: int,
    holdout: float,
    seed: int,
    device: str = "cpu",
    progress: bool = True,
    noise: SentenceMechanism | None = None,
    noise_dim: int = 0,
) -> tuple[Any, dict[str, Any]]:
    """Fine-tune ``model`` (a sentence-transformers encoder, modified in place) with a linear head on
    (``texts``, ``labels``), keeping the epoch with the best accuracy on a seeded ``holdout`` share.

    With ``noise`` (the run's sentence mechanism; DP-Forward's idea, Du et al. 2023b, applied where it
    costs nothing: on public data), the head reads the release, not the embedding: a trainable map to
    ``noise_dim`` dimensions, normalised, sanitized in the forward pass and passed straight through in
    the backward pass (the gradient of ``noise.clean``), so the encoder learns features that survive the
    noise; the hold-out accuracy that picks the epoch is scored on releases too.

    Deterministic given its arguments on one machine (seeded head, dropout and batch order). Returns
    the tuned encoder (adapters merged) and what was done: documents, per-epoch hold-out accuracy,
    the epoch kept, seconds."""
    from fl.reporting.progress import bar as progress_bar

    started = time.time()
    labels = np.asarray(labels, dtype=np.int64)
    n = len(texts)
    gen = torch.Generator().manual_seed(int(seed))
    order = torch.randperm(n, generator=gen).numpy()
    n_hold = min(n - 1, max(1, round(holdout * n))) if holdout > 0 else 0
    hold, fit = order[:n_hold], order[n_hold:]
    fit_texts, hold_texts = [texts[i] for i in fit], [texts[i] for i in hold]
    fit_y, hold_y = torch.as_tensor(labels[fit]), torch.as_tensor(labels[hold])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        params = trainable_part(model, part, layers, rank)
        model.to(device)
        readout = _Readout(embedding_dim(model), num_classes, noise, noise_dim, int(seed)).to(device)
        optimizer = torch.optim.AdamW(
            [{"params": params, "lr": lr}, {"params": list(readout.parameters()), "lr": HEAD_LR}], weight_decay=0.0
        )
        history: list[dict[str, Any]] = []
        best_state, best_acc, best_epoch = None, -1.0, 0
        steps = math.ceil(len(fit) / batch_size)
        for epoch in range(1, epochs + 1):
            model.train()
            perm = torch.randperm(len(fit), generator=gen)
            epoch_started, total = time.time(), 0.0
            desc = f"tuning the encoder ({part}), epoch {epoch}"
            with progress_bar(total=steps, desc=desc, disable=not progress) as bar:
                for start in range(0, len(fit), batch_size):
                    idx = perm[start : start + batch_size]
                    emb = _embed(model, [fit_texts[i] for i in idx.tolist()], device)
                    loss = nn.functional.cross_entropy(readout(emb), fit_y[idx].to(device))
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                    total += float(loss.detach()) * len(idx)
                    bar.update(1)
            acc = _accuracy(model, readout, hold_texts, hold_y, 128, device) if n_hold else float("nan")
            history.append(
                {
                    "epoch": epoch,
                    "loss": round(total / max(1, len(fit)), 5),
                    "holdout_accuracy": round(acc, 5),
                    "seconds": round(time.time() - epoch_started, 1),
                }
            )
            log.info(
                "encoder tuning epoch %d: loss %.4f, public hold-out accuracy %.4f", epoch, history[-1]["loss"], acc
            )
            if not n_hold or acc > best_acc:
                best_acc, best_epoch = acc, epoch
                best_state = copy.deepcopy({k: v for k, v in model.state_dict().items()}) if epochs > 1 else None
        if best_state is not None and best_epoch != epochs:
            model.load_state_dict(best_state)
    model = merge_adapters(model).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    info = {
        "part": part,
        "layers": layers if part != "all" else None,
        "lora_rank": rank if part == "lora" else None,
        "trainable_parameters": int(sum(p.numel() for p in params)),
        "learning_rate": lr,
        "batch_size": batch_size,
        "public_documents": n,
        "fit_documents": len(fit),
        "holdout_documents": n_hold,
        "noise": None
        if noise is None
        else {"mechanism": noise.name, "guarantee": noise.guarantee.describe(), "map_dim": noise_dim},
        "epochs": history,
        "epoch_kept": best_epoch,
        "seconds": round(time.time() - started, 1),
    }
    return model, info


def _base_identity(name: str) -> str:
    """What the recipe knows of the base encoder: the digest of every file of its folder
    (``fl.encoding.published.folder_digest``; its tokenizer and configuration as well as its weights),
    or its name when it is not a local folder."""
    path = Path(resolve_model(name))
    if published_digest(path) is not None:
        return model_id(name)  # a published encoder: its digest, checked
    if path.is_dir():
        return f"folder|{_base_digest(str(path.resolve()), folder_fingerprint(path, follow_links=True))}"
    return f"name|{name}"


@lru_cache(maxsize=8)
def _base_digest(folder: str, fingerprint: Fingerprint) -> str:
    """``folder_digest`` of a base encoder's folder, hashed again only when a file of it changed on disk."""
    return folder_digest(Path(folder), follow_links=True)[0]


def _versions() -> str:
    """The versions of the libraries the tuning runs on, read from the installed distributions' metadata
    (importing sentence-transformers only to read its version would cost seconds on every warm run)."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:  # peft: only tuning-part = "lora" needs it
            return "none"

    return (
        f"torch {torch.__version__}|transformers {of('transformers')}|"
        f"sentence-transformers {of('sentence-transformers')}|peft {of('peft')}"
    )


def _recipe(
    tuning: TuningSpec, texts: Sequence[str], labels: np.ndarray | Sequence[int], num_classes: int, device: str
) -> str:
    """The digest of everything the tuning depends on: the base encoder's files, the public texts and
    labels in order, the number of classes, the tuning keys, the seed, where it runs (the device
    type and the CPU threads) and the library versions."""
    h = hashlib.sha256(b"sanitas-tuning-recipe-v2\0")
    h.update(_base_identity(tuning.encoder.encoder).encode() + b"\0")
    encoder_keys, release_keys = tuning.encoder.flat(), tuning.release.flat()
    keys: dict[str, Any] = {k: encoder_keys[k] for k in TUNING_KEYS}
    keys["seed"] = tuning.seed
    if tuning.encoder.tuning_noise:  # tuned through the run's mechanism: its keys are inputs of the tuning too
        keys.update({k: release_keys[k] for k in NOISE_KEYS})
    h.update(json.dumps({**keys, "num-classes": int(num_classes)}, sort_keys=True).encode() + b"\0")
    h.update(f"{_versions()}|device {torch.device(device).type}|threads {torch.get_num_threads()}\0".encode())
    labels = np.asarray(labels).tolist()
    h.update(f"{len(texts)} {len(labels)}\0".encode())
    for text, label in zip(texts, labels, strict=True):
        raw = text.encode("utf-8")
        h.update(f"{int(label)}|{len(raw)}|".encode() + raw)
    return h.hexdigest()


def encoders_root(encoder: EncoderConfig) -> Path:
    """Where published encoders live: ``<cache-dir>/encoders``."""
    return encoder.cache_folder / "encoders"


def publish(model: Any, root: Path, base: str, info: Mapping[str, Any]) -> TunedEncoder:
    """Save ``model`` under ``root/<digest>``, the digest of the folder as saved
    (``fl.encoding.published.folder_digest``: every file), with its manifest (the digest, each file's
    length and SHA-256, ``base`` and ``info``). A folder of that digest already there is kept when
    its files match it (the same encoder) and replaced, with a warning, when they do not."""
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".staging-{time.time_ns()}"
    model.save(str(staging), create_model_card=False)  # a model card is documentation, and not reproducible
    digest, files = folder_digest(staging)
    manifest = {"digest": digest, "base": base, "files": files, "info": dict(info)}
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
    folder = root / digest
    if folder.is_dir():
        try:
            check_published(folder, digest)
            shutil.rmtree(staging)  # the same encoder is published already
            return TunedEncoder(digest, folder, dict(info))
        except ValueError as err:
            log.warning("the published encoder %s is altered (%s): replacing it", folder, err)
            aside = root / f".altered-{digest[:16]}-{time.time_ns()}"
            folder.rename(aside)
            shutil.rmtree(aside, ignore_errors=True)
    try:
        staging.rename(folder)
    except OSError:  # another run published this digest meanwhile: its folder must match too
        shutil.rmtree(staging, ignore_errors=True)
        check_published(folder, digest)
    return TunedEncoder(digest, folder, dict(info))


def published_encoder(root: Path, digest: str) -> str:
    """The folder of the published encoder ``digest`` under ``root``, its files checked against the
    digest (``fl.encoding.published.check_published``: hashed again whenever a file of it changed
    on disk). ``ValueError``, naming the expected and the found digest, when it is missing or
    does not match."""
    if not is_digest(digest):
        raise ValueError(f"not an encoder digest: {digest!r}")
    folder = root / digest
    if not (folder / MANIFEST).is_file():
        raise ValueError(f"the tuned encoder {digest[:16]} is not published under {root} (no {MANIFEST})")
    check_published(folder, digest)
    return str(folder)


def _reusable(root: Path, recipe: str, recipe_file: Path) -> TunedEncoder | None:
    """The published encoder the recipe entry ``recipe_file`` names, if it may be reused: the entry names
    this recipe and the folder of its digest matches that digest. ``None`` (with a warning) otherwise."""
    if not recipe_file.is_file():
        return None
    try:
        known = json.loads(recipe_file.read_text())
        if known.get("recipe") != recipe:
            raise ValueError(f"the entry is for the recipe {str(known.get('recipe'))[:16]}")
        published_encoder(root, known["digest"])
        info = dict(known["info"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        log.warning("recipe %s not reusable (%s): tuning and publishing the encoder again", recipe[:16], err)
        return None
    log.info("public-tuned encoder %s reused (same recipe)", known["digest"][:16])
    return TunedEncoder(known["digest"], root / known["digest"], {**info, "reused": True})


def _noise(tuning: TuningSpec, num_classes: int) -> dict[str, Any]:
    """``tuning-noise``: the run's sentence mechanism and map dimension for :func:`fine_tune`."""
    if not tuning.encoder.tuning_noise:
        return {}
    m_prime = int(tuning.release.map_dim)
    noise = tuning.release.mechanism("sentence", input_dim=m_prime, num_classes=num_classes)
    return {"noise": noise, "noise_dim": m_prime}


def tuned_encoder(tuning: TuningSpec, device: str, progress: bool = True) -> EncoderConfig:
    """The encoder section the run's nodes embed with: with ``encoder-tuning = "public"`` the public-tuned
    encoder (``encoder`` = its published folder; :func:`tune_public`, from the recipe cache when it was tuned
    before), else ``tuning.encoder`` itself. For drivers that read public embeddings as the run will
    (``sanitas tune``, ``sanitas compare``), which pass it on to what embeds. ``device``: where the run's
    server tunes (``best_device`` of its ``device``): the recipe depends on where it runs, so a driver must
    tune there too, or it would choose on another encoder than the run's."""
    if tuning.encoder.encoder_tuning != "public":
        return tuning.encoder
    return replace(tuning.encoder, encoder=str(tune_public(tuning, device, progress).folder))


@dataclass(frozen=True)
class TuningSpec(DocumentSpec):
    """What public tuning reads of a run (:class:`~fl.config.specs.DocumentSpec`): the encoder section (the
    base encoder and the ``tuning-*`` keys), the data it loads the public split from (``data``, ``users``: the
    seed; ``level``), and, with ``tuning-noise``, the release section whose sentence mechanism the tuning runs
    through."""

    @classmethod
    def from_config(cls, cfg: RunConfig) -> TuningSpec:
        """The tuning inputs of a resolved run config."""
        return cls(cfg.data, cfg.users, cfg.encoder, cfg.release)


def tune_public(tuning: TuningSpec, device: str = "cpu", progress: bool = True) -> TunedEncoder:
    """The run's public-tuned encoder: from the recipe cache, or tuned now on the public split and
    published. Reads the public split only."""
    from fl.data import datasets as data

    ds = data.load(tuning.data, tuning.users, tuning.release.level)
    public = getattr(ds, "public", None)
    if public is None or len(public) == 0:
        raise ValueError(
            "encoder-tuning = 'public' tunes the encoder on the public split: set public-size > 0, "
            "public-fraction > 0 or public-dataset"
        )
    texts = [str(t) for t in public["text"][:]]
    labels = np.asarray(public["label"][:], dtype=np.int64)
    root = encoders_root(tuning.encoder)
    recipe = _recipe(tuning, texts, labels, int(ds.num_classes), device)
    recipe_file = root / "recipes" / f"{recipe}.json"
    reused = _reusable(root, recipe, recipe_file)
    if reused is not None:
        return reused
    from sentence_transformers import SentenceTransformer  # seconds to import: only when tuning

    encoder = tuning.encoder
    base = SentenceTransformer(resolve_model(encoder.encoder), device=device)
    model, info = fine_tune(
        base,
        texts,
        labels,
        int(ds.num_classes),
        part=encoder.tuning_part,
        layers=int(encoder.tuning_layers),
        rank=int(encoder.tuning_lora_rank),
        epochs=int(encoder.tuning_epochs),
        lr=part_learning_rate(encoder),
        batch_size=int(encoder.tuning_batch_size),
        holdout=float(encoder.tuning_holdout),
        seed=tuning.seed,
        device=device,
        progress=progress,
        **_noise(tuning, int(ds.num_classes)),
    )
    info = {"base": encoder.encoder, **info}
    tuned = publish(model.to("cpu"), root, encoder.encoder, info)
    recipe_file.parent.mkdir(parents=True, exist_ok=True)
    entry = {"recipe": recipe, "digest": tuned.digest, "info": info}
    atomic_write(recipe_file, lambda fh: fh.write(json.dumps(entry).encode()))
    log.info("public-tuned encoder published as %s (%s)", tuned.digest[:16], tuned.folder)
    return tuned
