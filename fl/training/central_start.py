"""Where a user-level central run starts: the server model and M1, as the ServerApp builds them and as
:mod:`fl.training.public_central` emulates them on public data."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fl.config import RunConfig
from fl.encoding.encoder import best_device
from fl.maps import input_map as maps
from fl.maps.pipeline import ServerModel, build_model
from fl.maps.public_start import supervised_start, train_public_start


@dataclass
class CentralStart:
    """The head (seeded, or trained on the public split), M1 when the server provides it, and a sentence
    saying how they were obtained."""

    model: ServerModel
    matrix: torch.Tensor | None
    text: str


def central_start(cfg: RunConfig, map_dim: int, encoder_dim: int, num_classes: int) -> CentralStart:
    """The start of user-level DP-FedAvg: a seeded head, M1 by ``map-in`` (``public``: M1, M2 and the
    head trained on the public split's clean embeddings, M1 then frozen; ``supervised``: the public
    logistic regression's affine map). Reads public documents only."""
    from mechanisms.identity import NoPrivacy

    model = build_model(cfg, map_dim, encoder_dim, num_classes)
    matrix = None
    text = f"seeded random initialisation (seed {cfg.users.seed}), M1 = {cfg.release.map_in}"
    no_noise = NoPrivacy(level="sentence")  # central mode: no local sanitizer (the "none" mechanism)
    device = torch.device(best_device(cfg.server.device))
    gen = torch.Generator().manual_seed(int(cfg.users.seed))
    if cfg.release.map_in == "public":
        start_map = maps.input_map("public", encoder_dim, map_dim, cfg.release.map_seed)
        assert start_map is not None
        matrix, info = train_public_start(cfg, model.to(device), start_map, no_noise, device, gen)
        text = (
            f"M1, M2 and the classifier trained on {info['public_documents']} public documents "
            f"({info['public_epochs']} epochs, clean embeddings), M1 then frozen"
        )
    elif cfg.release.map_in == "supervised":
        matrix, info = supervised_start(cfg, no_noise, num_classes, map_dim, device, gen)
        text = (
            f"seeded random initialisation (seed {cfg.users.seed}); M1 = the public logistic regression's affine "
            f"map on {info['public_documents']} public documents (m' = {info['map_dim']}, scale "
            f"{info['map_scale']:g}), frozen"
        )
    return CentralStart(model, matrix, text)
