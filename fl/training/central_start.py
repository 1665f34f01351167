"""Where a user-level central run starts: the server model and M1, as the ServerApp builds them and as
:mod:`fl.training.public_central` emulates them on public data."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fl.config import CentralConfig
from fl.encoding.encoder import best_device
from fl.maps import input_map as maps
from fl.maps.minibatch import server_adam
from fl.maps.pipeline import ServerModel, build_model, train_epochs
from fl.maps.public_model import PublicModel
from fl.maps.public_start import (
    PublicSpec,
    cached_public_model,
    public_embeddings,
    supervised_start,
    train_public_start,
)


@dataclass
class CentralStart:
    """The head (seeded, or trained on the public split), M1 when the server provides it, a sentence
    saying how they were obtained, and the model fitted on the public data alone (the public logistic
    regression, held against the run; ``None`` without public data)."""

    model: ServerModel
    matrix: torch.Tensor | None
    text: str
    public_model: PublicModel | None = None


def central_start(
    public: PublicSpec, central: CentralConfig, map_dim: int, encoder_dim: int, num_classes: int
) -> CentralStart:
    """The start of user-level DP-FedAvg: a seeded head, M1 by ``map-in`` (``public``: M1, M2 and the
    head trained on the public split's clean embeddings, M1 then frozen; ``supervised``: the public
    logistic regression's affine map); with ``central-start = "public"`` the head is then fitted on the
    public split's clean embeddings (``public-epochs`` epochs of Adam at ``learning-rate``), so that the
    central side starts from the public data the local side fits on. Reads public documents only.

    Parameters
    ----------
    public : PublicSpec
        The run's public split and what is built from it (``PublicSpec.from_config(cfg)``): its documents,
        their embeddings (encoder and cache) and the public model's cache are read through
        :mod:`fl.maps.public_start`. This function itself reads ``users.seed`` (the head's and the batch
        order's seed), ``release`` (``map-in``, ``map-seed``, ``public-epochs``), ``server`` (``device``,
        ``learning-rate``, ``batch-size``, ``hidden-dim``) and, through ``data``, whether there are public
        documents.
    central : CentralConfig
        The run's central section: ``central-start`` (``"public"``: the head is fitted on the public split).
    map_dim : int
        m', M1's output dimension (the head's input).
    encoder_dim : int
        d, the encoder's embedding dimension (M1's input).
    num_classes : int
        Classes of the task.
    """
    from mechanisms.identity import NoPrivacy

    release, server = public.release, public.server
    model = build_model(map_dim, encoder_dim, num_classes, hidden_dim=server.hidden_dim, seed=public.users.seed)
    matrix = None
    text = f"seeded random initialisation (seed {public.users.seed}), M1 = {release.map_in}"
    no_noise = NoPrivacy(level="sentence")  # central mode: no local sanitizer (the "none" mechanism)
    device = torch.device(best_device(server.device))
    gen = torch.Generator().manual_seed(int(public.users.seed))
    if release.map_in == "public":
        start_map = maps.input_map("public", encoder_dim, map_dim, release.map_seed)
        assert start_map is not None
        matrix, info = train_public_start(public, model.to(device), start_map, no_noise, device, gen)
        text = (
            f"M1, M2 and the classifier trained on {info['public_documents']} public documents "
            f"({info['public_epochs']} epochs, clean embeddings), M1 then frozen"
        )
    elif release.map_in == "supervised":
        matrix, info = supervised_start(public, no_noise, num_classes, map_dim, device, gen)
        text = (
            f"seeded random initialisation (seed {public.users.seed}); M1 = the public logistic regression's affine "
            f"map on {info['public_documents']} public documents (m' = {info['map_dim']}, scale "
            f"{info['map_scale']:g}), frozen"
        )
    public_model = None
    if public.has_public:
        x, y = public_embeddings(public, device)
        public_model = cached_public_model(public, x, y, num_classes)
        if central.central_start == "public" and release.map_in != "public":  # "public" trained it already
            epochs = int(release.public_epochs)
            m1 = matrix  # as the nodes map their embeddings (a random M1 they derive from its public seed)
            if m1 is None and release.map_in == "random":
                m1 = maps.input_map("random", encoder_dim, map_dim, release.map_seed)
            rows = maps.apply_input_map(x.cpu(), m1).to(device=device, dtype=torch.float32)
            model = model.to(device)
            optimizer = server_adam(model.parameters(), server.learning_rate, device)
            train_epochs(model, optimizer, rows, y.to(device), epochs, int(server.batch_size), gen)
            text += (
                f"; M2 and the classifier then fitted on the {len(y)} public documents' clean embeddings "
                f"({epochs} epochs, central-start = public): the public data the local side fits on"
            )
    return CentralStart(model, matrix, text, public_model)
