"""A start from public data only: M1, M2 and the classifier trained on the public split.

Both modes can start from the same public model (``map-in = "public"``): the
local-DP strategy trains it through its sentence mechanism (so the model learns
to cope with the noise), central mode trains it on the clean public embeddings
(no local sanitizer there). Only public documents are used, so the result is
public: it costs no privacy and is sent to the nodes in the clear.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from mechanisms.base import SentenceMechanism

from . import config as config_mod
from . import datasets as data
from . import maps
from .encoder import embed_documents


def public_embeddings(cfg: Mapping[str, Any], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The public split's document embeddings (float32) and labels, on ``device``."""
    public = data.load(cfg).public
    if public is None or len(public) == 0:
        raise ValueError("map-in = 'public' trains M1 on the public split: set public-fraction > 0")
    emb = embed_documents(
        public["text"],
        cfg["doc-embedding"],
        cfg["encoder"],
        config_mod.cache_dir(cfg),
        str(device),
        cfg["encode-batch-size"],
        True,
    )
    x = torch.as_tensor(np.asarray(emb), dtype=torch.float32, device=device)
    y = torch.as_tensor(np.asarray(public["label"], dtype=np.int64), device=device)
    return x, y


def train_public_start(
    cfg: Mapping[str, Any],
    model: torch.nn.Module,
    start_map: torch.Tensor,
    mech: SentenceMechanism,
    device: torch.device,
    generator: torch.Generator,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Train M1 (from ``start_map``), M2 and the classifier on the public split, ``public-epochs``
    epochs of Adam at ``learning-rate`` (``model`` is trained in place); returns the frozen M1
    (float64, CPU) and what was done (documents, epochs, last loss)."""
    x, y = public_embeddings(cfg, device)
    epochs = int(cfg["public-epochs"])
    with tqdm(total=epochs, desc=f"training M1 on {len(y)} public documents", leave=False) as bar:
        matrix, loss = maps.train_public_map(
            start_map,
            model,
            x,
            y,
            mech,
            epochs,
            int(cfg["batch-size"]),
            cfg["learning-rate"],
            generator,
            progress=lambda: bar.update(1),
        )
    return matrix, {"public_documents": int(len(y)), "public_epochs": epochs, "public_loss": loss}
