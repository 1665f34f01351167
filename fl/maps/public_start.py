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
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fl.config import RunConfig
from fl.data import datasets as data
from fl.encoding.encoder import embed_texts
from fl.maps import input_map as maps
from fl.maps.pipeline import train_and_score
from fl.maps.public_model import PublicModel
from fl.reporting.progress import bar as progress_bar

log = logging.getLogger(__name__)


def public_embeddings(cfg: RunConfig, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The public split's document embeddings (float32) and labels, on ``device``."""
    public = data.load(cfg.data, cfg.users, cfg.release.level).public
    if public is None or len(public) == 0:
        raise ValueError(f"map-in = {cfg.release.map_in!r} builds M1 from the public split: set public-fraction > 0")
    emb = embed_texts(public["text"][:], cfg.encoder, str(device))
    x = torch.as_tensor(np.asarray(emb), dtype=torch.float32, device=device)
    y = torch.as_tensor(np.asarray(public["label"][:], dtype=np.int64), device=device)
    return x, y


def train_public_start(
    cfg: RunConfig,
    model: torch.nn.Module,
    start_map: torch.Tensor,
    mech: maps.SentenceRelease,
    device: torch.device,
    generator: torch.Generator,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Train M1 (from ``start_map``), M2 and the classifier on the public split, ``public-epochs``
    epochs of Adam at ``learning-rate`` (``model`` is trained in place); returns the frozen M1
    (float64, CPU) and what was done (documents, epochs, last loss)."""
    x, y = public_embeddings(cfg, device)
    epochs = int(cfg.release.public_epochs)
    with progress_bar(total=epochs, desc=f"training M1 on {len(y)} public documents", leave=False) as bar:
        matrix, loss = maps.train_public_map(
            start_map,
            model,
            x,
            y,
            mech,
            epochs,
            int(cfg.server.batch_size),
            cfg.server.learning_rate,
            generator,
            progress=lambda: bar.update(1),
        )
    return matrix, {"public_documents": int(len(y)), "public_epochs": epochs, "public_loss": loss}


#: map-in = "supervised", map-scale = 0: the share of the public split held out to choose the scale,
#: and how many releases of each held-out (and fitting) document the choice averages over.
VALIDATION_FRACTION = 0.2
VALIDATION_DRAWS = 4


def public_validation_accuracy(
    cfg: RunConfig,
    matrix: torch.Tensor,
    fit: tuple[torch.Tensor, torch.Tensor],
    held_out: tuple[torch.Tensor, torch.Tensor],
    mech: maps.SentenceRelease,
    num_classes: int,
    generator: torch.Generator,
    draws: int = VALIDATION_DRAWS,
) -> float:
    """Accuracy of the run's pipeline emulated on public documents only: ``draws`` sanitized
    releases of each ``fit`` document through ``matrix`` train a fresh server model
    (``server-epochs`` epochs, the run's batch size, learning rate and hidden width), which is
    scored on ``draws`` sanitized releases of each ``held_out`` document."""
    (xf, yf), (xv, yv) = fit, held_out
    device = xf.device

    def released(x: torch.Tensor) -> torch.Tensor:
        rows = maps.apply_input_map(x.repeat(draws, 1), matrix).to(device)
        return mech.sanitize(rows, generator=generator).to(torch.float32)

    zf, zv = released(xf), released(xv)
    epochs = int(cfg.server.server_epochs)
    return train_and_score(cfg, zf, yf.repeat(draws), zv, yv.repeat(draws), xf.shape[1], num_classes, epochs, generator)


def choose_map_scale(
    cfg: RunConfig,
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    m_prime: int,
    mech: maps.SentenceRelease,
    generator: torch.Generator,
    candidates: tuple[float, ...] = maps.SCALE_CANDIDATES,
) -> tuple[float, dict[str, Any]]:
    """The supervised map's scale, chosen on a seeded public hold-out (``VALIDATION_FRACTION`` of the
    public split): for each candidate, the map is fitted on the rest of the public split and scored
    by :func:`public_validation_accuracy` under the run's own mechanism and epsilon. Ties go to the
    smaller scale. Only public documents are read."""
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
            cfg, matrix, (x[fit], y[fit]), (x[val], y[val]), mech, num_classes, generator
        )
    best = max(candidates, key=lambda c: (table[c], -c))
    return best, {
        "validation_documents": n_val,
        "validation_draws": VALIDATION_DRAWS,
        "validation_accuracy": {f"{c:g}": round(a, 4) for c, a in table.items()},
    }


#: Run-config keys that cannot change the scale choice (output, federation size, simulation).
_SCALE_IRRELEVANT = frozenset(
    {"out-dir", "run-name", "reference-accuracy", "num-server-rounds", "fraction-train", "users-per-node"}
    | {"node-timeout", "backend", "node-cpus", "node-gpus", "ray-address", "fault-rate", "fault-kind"}
)


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


def cached_map_scale(
    cfg: RunConfig,
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    m_prime: int,
    mech: maps.SentenceRelease,
    generator: torch.Generator,
) -> tuple[float, dict[str, Any]]:
    """:func:`choose_map_scale`, computed once per input: the choice is a deterministic function of
    the public embeddings and labels, the run config, the mechanism and the generator's state, so
    it is kept under ``<cache-dir>/public-start/`` keyed by the digest of all of them, with the
    generator's state after the choice (restored on a hit, so the run continues exactly as if it
    had chosen again). A sweep's runs at one seed and epsilon, and every re-run, choose once.
    A damaged entry is discarded and recomputed (``fl.encoding.cache_files``)."""
    from fl.config import cache_dir
    from fl.encoding.cache_files import atomic_write, content_digest, seal

    key = content_digest(
        {
            "x": x,
            "y": y,
            "num_classes": num_classes,
            "m_prime": m_prime,
            "mechanism": repr(mech.guarantee.to_dict()) + type(mech).__name__,
            "generator": generator.get_state(),
            "config": {k: repr(v) for k, v in cfg.items() if k not in _SCALE_IRRELEVANT},
            "device": str(x.device),
            "candidates": repr(maps.SCALE_CANDIDATES),
        }
    )
    path = cache_dir(cfg) / "public-start" / f"map-scale-{key[:32]}.pt"
    entry = _read_entry(path)
    if entry is not None:
        generator.set_state(entry["generator"])
        return float(entry["scale"]), json.loads(entry["chosen"])
    scale, chosen = choose_map_scale(cfg, x, y, num_classes, m_prime, mech, generator)
    entry = seal({"scale": repr(scale), "chosen": json.dumps(chosen), "generator": generator.get_state()})
    atomic_write(path, lambda fh: torch.save(entry, fh))
    return scale, chosen


def supervised_start(
    cfg: RunConfig,
    mech: maps.SentenceRelease,
    num_classes: int,
    m_prime: int,
    device: torch.device,
    generator: torch.Generator,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """M1 of ``map-in = "supervised"`` (:func:`fl.maps.input_map.supervised_map`) from the public split only,
    with ``map-scale`` (0: chosen by :func:`choose_map_scale` under ``mech``); returns the frozen
    affine M1 ([d + 1, m'] float64, CPU) and what was done."""
    x, y = public_embeddings(cfg, device)
    scale = float(cfg.release.map_scale)
    info: dict[str, Any] = {"public_documents": int(len(y)), "map": "supervised", "map_dim": int(m_prime)}
    if scale == 0:
        scale, chosen = cached_map_scale(cfg, x, y, num_classes, m_prime, mech, generator)
        info["map_scale_chosen_on_public_validation"] = chosen
    info["map_scale"] = scale
    return maps.supervised_map(x, y, num_classes, m_prime, scale), info


def cached_public_model(cfg: RunConfig, x: torch.Tensor, y: torch.Tensor, num_classes: int) -> PublicModel:
    """:func:`fl.maps.public_model.fit_public_model` on the public split (folds by source group), computed
    once per public split and encoder: kept under ``<cache-dir>/public-start/`` keyed by the digest of the
    embeddings, labels and grid (the embeddings are the public texts', so they fix the texts' source groups too;
    the groups are only computed when the model is fitted; a damaged entry is recomputed)."""
    from fl.config import cache_dir
    from fl.encoding.cache_files import atomic_write, content_digest, seal
    from fl.maps import public_model as pm

    key = content_digest({"x": x, "y": y, "k": num_classes, "grid": repr(pm.C_GRID), "folds": pm.FOLDS})
    path = cache_dir(cfg) / "public-start" / f"public-model-{key[:32]}.pt"
    e = _read_entry(path)
    if e is not None:
        cv = float(e["cv"])
        return pm.PublicModel(e["weight"].numpy(), e["bias"].numpy(), float(e["l2"]), None if cv < 0 else cv)
    with progress_bar(total=1, desc=f"fitting the public model on {len(y)} public documents", leave=False) as bar:
        groups = data.public_groups(
            cfg.data, cfg.users, cfg.release.level
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
    cfg: RunConfig, num_classes: int, m_prime: int, device: torch.device
) -> tuple[torch.Tensor, PublicModel, dict[str, Any]]:
    """M1 of ``map-in = "projection"`` (:func:`fl.maps.public_model.projection_map`) from the public split
    only, with the public model it starts from; returns (frozen affine M1 [d + 1, m'] float64, the public
    model, what was done)."""
    from fl.maps.public_model import projection_map

    x, y = public_embeddings(cfg, device)
    model = cached_public_model(cfg, x, y, num_classes)
    info: dict[str, Any] = {
        "public_documents": int(len(y)),
        "map": "projection",
        "map_dim": int(m_prime),
        "public_model_l2": model.l2,
        "public_model_cv_accuracy": model.cv_accuracy,
    }
    return projection_map(x, model, m_prime), model, info
