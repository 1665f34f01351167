"""A start from public data only: M1 (and, for ``map-in = "public"``, M2 and the classifier)
built from the public split.

``map-in = "supervised"`` (:func:`supervised_start`): M1 is the affine map of
:func:`fl.maps.input_map.supervised_map`, the public logistic regression's logits and a
constant coordinate whose scale is chosen on a public hold-out by emulating the
run (its mechanism, epsilon and server model) on public documents
(:func:`choose_map_scale`). The server model starts fresh.

With ``map-in = "public"`` both modes can start from the same public model: the
local-DP strategy trains it through its sentence mechanism (so the model learns
to cope with the noise), central mode trains it on the clean public embeddings
(no local sanitizer there). Only public documents are used, so the result is
public: it costs no privacy and is sent to the nodes in the clear.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fl.config import RunConfig, ServerConfig
from fl.config.specs import DocumentSpec
from fl.data import datasets as data
from fl.encoding.encoder import embed_texts
from fl.maps import input_map as maps
from fl.maps.pipeline import train_and_score
from fl.maps.public_model import PublicModel
from fl.reporting.progress import bar as progress_bar

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PublicSpec(DocumentSpec):
    """What a start from public data reads of a run (:class:`~fl.config.specs.DocumentSpec`): the public split
    (``data``; ``users``: its seed and the users it is drawn beside; ``release``: the level, and ``map-in``,
    ``map-scale``, ``public-epochs`` and the sentence mechanism's keys), the encoder that embeds it and the cache
    it is kept in (``encoder``), and the server model's training (``server``: ``batch-size``, ``learning-rate``,
    ``hidden-dim``, ``server-epochs``). Frozen and hashable, like its sections."""

    server: ServerConfig

    @classmethod
    def from_config(cls, cfg: RunConfig) -> PublicSpec:
        """The public-start inputs of a resolved run config."""
        return cls(cfg.data, cfg.users, cfg.encoder, cfg.release, cfg.server)


def public_embeddings(public: PublicSpec, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The public split's document embeddings (float32) and labels, on ``device``.

    ``public``: the run's data, users and release sections say which documents are public (and at which
    level), its encoder section embeds them (through the embedding cache). ``ValueError`` without public
    documents."""
    split = data.load(public.data, public.users, public.release.level).public
    if split is None or len(split) == 0:
        raise ValueError(
            f"map-in = {public.release.map_in!r} builds M1 from the public split: set public-size > 0, "
            f"public-fraction > 0 or public-dataset"
        )
    emb = embed_texts(split["text"][:], public.encoder, str(device))
    x = torch.as_tensor(np.asarray(emb), dtype=torch.float32, device=device)
    y = torch.as_tensor(np.asarray(split["label"][:], dtype=np.int64), device=device)
    return x, y


def train_public_start(
    public: PublicSpec,
    model: torch.nn.Module,
    start_map: torch.Tensor,
    mech: maps.SentenceRelease,
    device: torch.device,
    generator: torch.Generator,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Train M1 (from ``start_map``), M2 and the classifier on the public split, ``public-epochs``
    epochs of Adam at ``learning-rate`` (``model`` is trained in place); returns the frozen M1
    (float64, CPU) and what was done (documents, epochs, last loss).

    ``public``: the run's public split and encoder (:func:`public_embeddings`), ``release.public_epochs``,
    ``server.batch_size`` and ``server.learning_rate``; ``mech`` is the noise M1 is trained through
    (``generator`` draws it and the batch order)."""
    x, y = public_embeddings(public, device)
    epochs = int(public.release.public_epochs)
    with progress_bar(total=epochs, desc=f"training M1 on {len(y)} public documents", leave=False) as bar:
        matrix, loss = maps.train_public_map(
            start_map,
            model,
            x,
            y,
            mech,
            epochs,
            int(public.server.batch_size),
            public.server.learning_rate,
            generator,
            progress=lambda: bar.update(1),
        )
    return matrix, {"public_documents": int(len(y)), "public_epochs": epochs, "public_loss": loss}


#: map-in = "supervised", map-scale = 0: the share of the public split held out to choose the scale,
#: and how many releases of each held-out (and fitting) document the choice averages over.
VALIDATION_FRACTION = 0.2
VALIDATION_DRAWS = 4


def public_validation_accuracy(
    matrix: torch.Tensor,
    fit: tuple[torch.Tensor, torch.Tensor],
    held_out: tuple[torch.Tensor, torch.Tensor],
    mech: maps.SentenceRelease,
    num_classes: int,
    generator: torch.Generator,
    draws: int = VALIDATION_DRAWS,
    *,
    server: ServerConfig,
    seed: int,
) -> float:
    """Accuracy of the run's pipeline emulated on public documents only: ``draws`` sanitized
    releases of each ``fit`` document through ``matrix`` train a fresh server model
    (``server-epochs`` epochs, the run's batch size, learning rate and hidden width), which is
    scored on ``draws`` sanitized releases of each ``held_out`` document.

    ``server``: the run's server section (``server-epochs``, ``batch-size``, ``learning-rate``,
    ``hidden-dim``); ``seed``: the run's ``seed`` (the server model's initialisation); ``mech`` sanitizes
    the releases, drawn from ``generator`` (which also orders the batches)."""
    (xf, yf), (xv, yv) = fit, held_out
    device = xf.device

    def released(x: torch.Tensor) -> torch.Tensor:
        rows = maps.apply_input_map(x.repeat(draws, 1), matrix).to(device)
        return mech.sanitize(rows, generator=generator).to(torch.float32)

    zf, zv = released(xf), released(xv)
    epochs = int(server.server_epochs)
    return train_and_score(
        zf,
        yf.repeat(draws),
        zv,
        yv.repeat(draws),
        xf.shape[1],
        num_classes,
        epochs,
        generator,
        server=server,
        seed=seed,
    )


def choose_map_scale(
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    m_prime: int,
    mech: maps.SentenceRelease,
    generator: torch.Generator,
    candidates: tuple[float, ...] = maps.SCALE_CANDIDATES,
    *,
    server: ServerConfig,
    seed: int,
) -> tuple[float, dict[str, Any]]:
    """The supervised map's scale, chosen on a seeded public hold-out (``VALIDATION_FRACTION`` of the
    public split): for each candidate, the map is fitted on the rest of the public split and scored
    by :func:`public_validation_accuracy` under the run's own mechanism and epsilon. Ties go to the
    smaller scale. Only public documents are read.

    ``x``, ``y``: the public embeddings and labels; ``m_prime``: the map's dimension; ``mech``: the run's
    sentence mechanism; ``generator``: the hold-out's draw, the releases' noise and the batch order;
    ``server`` and ``seed``: the run's server section and ``seed`` (:func:`public_validation_accuracy`)."""
    n = int(y.shape[0])
    n_val = max(1, round(VALIDATION_FRACTION * n))
    if n - n_val < 2:
        raise ValueError(f"choosing map-scale needs more public documents than {n}: set map-scale > 0")
    order = torch.randperm(n, generator=generator).to(x.device)
    val, fit = order[:n_val], order[n_val:]
    table = {}
    desc = f"choosing map-scale on {n_val} public hold-out documents"
    for scale in progress_bar(candidates, desc=desc, unit="candidates", leave=False):
        matrix = maps.supervised_map(x[fit], y[fit], num_classes, m_prime, scale)
        table[scale] = public_validation_accuracy(
            matrix, (x[fit], y[fit]), (x[val], y[val]), mech, num_classes, generator, server=server, seed=seed
        )
    best = max(candidates, key=lambda c: (table[c], -c))
    return best, {
        "validation_documents": n_val,
        "validation_draws": VALIDATION_DRAWS,
        "validation_accuracy": {f"{c:g}": round(a, 4) for c, a in table.items()},
    }


def _read_entry(path: Path) -> dict[str, Any] | None:
    """The cache entry at ``path`` when its checksum vouches for it (``fl.encoding.cache_files``); ``None``
    when there is none, or it is unreadable or damaged (a warning is logged and the caller recomputes it).
    Entries hold plain tensors and strings only (``weights_only``)."""
    from fl.encoding.cache_files import unseal

    if not path.is_file():
        return None
    try:
        opened = unseal(torch.load(path, weights_only=True), path)
    except (OSError, RuntimeError, ValueError, EOFError) as err:
        log.warning("cache entry %s unreadable (%s); recomputing it", path, err)
        return None
    return opened[0] if opened is not None and opened[1] else None


def _scale_keys(public: PublicSpec) -> dict[str, str]:
    """The run's keys the scale choice reads besides its tensors: the server model's training
    (``server-epochs``, ``batch-size``, ``learning-rate``, ``hidden-dim``), the ``seed`` that initialises it,
    and the sentence mechanism's keys (its options change a release where its guarantee's description may
    not); with the validation's constants."""
    server, release = public.server, public.release
    return {
        "server": repr([server.server_epochs, server.batch_size, server.learning_rate, server.hidden_dim]),
        "seed": repr(public.seed),
        "sentence": repr([release.sentence_mechanism, release.sentence_epsilon, release.sentence_options]),
        "validation": repr([VALIDATION_FRACTION, VALIDATION_DRAWS]),
    }


def cached_map_scale(
    public: PublicSpec,
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    m_prime: int,
    mech: maps.SentenceRelease,
    generator: torch.Generator,
) -> tuple[float, dict[str, Any]]:
    """:func:`choose_map_scale`, computed once per input: the choice is a deterministic function of
    the public embeddings and labels, the run's server training, seed and sentence mechanism keys
    (:func:`_scale_keys`), the mechanism and the generator's state, so it is kept under
    ``<cache-dir>/public-start/`` (``public.encoder.cache_folder``) keyed by the digest of all of them,
    with the generator's state after the choice (restored on a hit, so the run continues exactly as if it
    had chosen again). A sweep's runs at one seed and epsilon, and every re-run, choose once.
    A damaged entry is discarded and recomputed (``fl.encoding.cache_files``)."""
    from fl.encoding.cache_files import atomic_write, content_digest, seal

    key = content_digest(
        {
            "x": x,
            "y": y,
            "num_classes": num_classes,
            "m_prime": m_prime,
            "mechanism": repr(mech.guarantee.to_dict()) + type(mech).__name__,
            "generator": generator.get_state(),
            "config": _scale_keys(public),
            "device": str(x.device),
            "candidates": repr(maps.SCALE_CANDIDATES),
        }
    )
    path = public.encoder.cache_folder / "public-start" / f"map-scale-{key[:32]}.pt"
    entry = _read_entry(path)
    if entry is not None:
        generator.set_state(entry["generator"])
        return float(entry["scale"]), json.loads(entry["chosen"])
    scale, chosen = choose_map_scale(
        x, y, num_classes, m_prime, mech, generator, server=public.server, seed=public.seed
    )
    entry = seal({"scale": repr(scale), "chosen": json.dumps(chosen), "generator": generator.get_state()})
    atomic_write(path, lambda fh: torch.save(entry, fh))
    return scale, chosen


def supervised_start(
    public: PublicSpec,
    mech: maps.SentenceRelease,
    num_classes: int,
    m_prime: int,
    device: torch.device,
    generator: torch.Generator,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """M1 of ``map-in = "supervised"`` (:func:`fl.maps.input_map.supervised_map`) from the public split only,
    with ``map-scale`` (``public.release.map_scale``; 0: chosen by :func:`choose_map_scale` under ``mech``,
    through :func:`cached_map_scale`); returns the frozen affine M1 ([d + 1, m'] float64, CPU) and what was
    done. ``public``: the run's public split, encoder and server training."""
    x, y = public_embeddings(public, device)
    scale = float(public.release.map_scale)
    info: dict[str, Any] = {"public_documents": int(len(y)), "map": "supervised", "map_dim": int(m_prime)}
    if scale == 0:
        scale, chosen = cached_map_scale(public, x, y, num_classes, m_prime, mech, generator)
        info["map_scale_chosen_on_public_validation"] = chosen
    info["map_scale"] = scale
    return maps.supervised_map(x, y, num_classes, m_prime, scale), info


def cached_public_model(public: PublicSpec, x: torch.Tensor, y: torch.Tensor, num_classes: int) -> PublicModel:
    """:func:`fl.maps.public_model.fit_public_model` on the public split (folds by source group), computed
    once per public split and encoder: kept under ``<cache-dir>/public-start/`` (``public.encoder.cache_folder``)
    keyed by the digest of the embeddings, labels and grid (the embeddings are the public texts', so they fix
    the texts' source groups too; the groups, :func:`fl.data.datasets.public_groups` of ``public``'s data, users
    and level, are only computed when the model is fitted; a damaged entry is recomputed)."""
    from fl.encoding.cache_files import atomic_write, content_digest, seal
    from fl.maps import public_model as pm

    key = content_digest({"x": x, "y": y, "k": num_classes, "grid": repr(pm.C_GRID), "folds": pm.FOLDS})
    path = public.encoder.cache_folder / "public-start" / f"public-model-{key[:32]}.pt"
    e = _read_entry(path)
    if e is not None:
        cv = float(e["cv"])
        return pm.PublicModel(e["weight"].numpy(), e["bias"].numpy(), float(e["l2"]), None if cv < 0 else cv)
    with progress_bar(total=1, desc=f"fitting the public model on {len(y)} public documents", leave=False) as bar:
        groups = data.public_groups(
            public.data, public.users, public.release.level
        )  # folds by source group (fl.data.sources.containment_groups)
        model = pm.fit_public_model(x, y, num_classes, groups if len(groups) == len(y) else None)
        bar.update(1)
    entry = {
        "weight": torch.as_tensor(model.weight),
        "bias": torch.as_tensor(model.bias),
        "l2": repr(model.l2),
        "cv": repr(-1.0 if model.cv_accuracy is None else model.cv_accuracy),
    }
    atomic_write(path, lambda fh: torch.save(seal(entry), fh))
    return model


def projection_start(
    public: PublicSpec, num_classes: int, m_prime: int, device: torch.device
) -> tuple[torch.Tensor, PublicModel, dict[str, Any]]:
    """M1 of ``map-in = "projection"`` (:func:`fl.maps.public_model.projection_map`) from the public split
    only, with the public model it starts from; returns (frozen affine M1 [d + 1, m'] float64, the public
    model, what was done). ``public``: the run's public split and encoder (:func:`public_embeddings`,
    :func:`cached_public_model`)."""
    from fl.maps.public_model import projection_map

    x, y = public_embeddings(public, device)
    model = cached_public_model(public, x, y, num_classes)
    info: dict[str, Any] = {
        "public_documents": int(len(y)),
        "map": "projection",
        "map_dim": int(m_prime),
        "public_model_l2": model.l2,
        "public_model_cv_accuracy": model.cv_accuracy,
    }
    return projection_map(x, model, m_prime), model, info
