"""What a run leaves for the attacks: ``RESULTS/attack/state.pt``.

The final server model (weights and shape), M1 (public: the input map the
nodes applied), and which training documents the model learnt from
(``members``: rows of the loaded training split; in the local mode the
documents whose releases the server stored, in the central modes every
training document, since any user may have been sampled). The server knows
all of it; nothing here comes from a node beyond what it sent. Written once,
atomically, when the run completes; ``sanitas attack`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import torch
from torch import nn

from fl.encoding.cache_files import atomic_write
from fl.maps.class_means import LinearHead
from fl.maps.pipeline import ServerModel, empty_head

STATE_FILE = Path("attack") / "state.pt"
VERSION = 1


@dataclass
class AttackState:
    model_state: dict[str, torch.Tensor]
    m_prime: int
    d: int
    hidden: int
    num_classes: int
    matrix: torch.Tensor | None  # M1 [d, m'] (None: identity)
    members: np.ndarray  # int64 rows of the training split the model learnt from
    members_are: str  # how ``members`` was determined (mode-dependent)
    kind: str = "mlp"  # server-model: "mlp" (ServerModel) or "class-means" (LinearHead)

    def model(self) -> nn.Module:
        """The final server model, in eval mode on the CPU."""
        model = empty_head(self.kind, self.m_prime, self.d, self.hidden, self.num_classes)
        model.load_state_dict(self.model_state)
        return model.eval()

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / STATE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "version": VERSION,
            "model_state": {k: v.detach().cpu() for k, v in self.model_state.items()},
            "shape": (self.m_prime, self.d, self.hidden, self.num_classes),
            "matrix": None if self.matrix is None else self.matrix.detach().cpu(),
            "members": np.asarray(self.members, dtype=np.int64),
            "members_are": self.members_are,
            "kind": self.kind,
        }
        atomic_write(path, lambda fh: torch.save(payload, fh))
        return path

    @classmethod
    def load(cls, folder: str | Path) -> AttackState:
        path = Path(folder) / STATE_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: the run left no attack state (runs save it when they complete; "
                "a run from before this feature, or one whose strategy is not ReleaseTraining or a central "
                "DP-FedAvg, has none)"
            )
        raw = torch.load(path, weights_only=False, map_location="cpu")
        if raw.get("version") != VERSION:
            raise ValueError(f"{path}: attack state version {raw.get('version')!r}, expected {VERSION}")
        m_prime, d, hidden, k = raw["shape"]
        return cls(
            raw["model_state"],
            m_prime,
            d,
            hidden,
            k,
            raw["matrix"],
            raw["members"],
            raw["members_are"],
            raw.get("kind", "mlp"),
        )


def from_model(model: nn.Module, matrix: torch.Tensor | None, members: np.ndarray, members_are: str) -> AttackState:
    """The state of a trained ``ServerModel`` or ``class-means`` ``LinearHead``."""
    if isinstance(model, LinearHead):
        m_prime, k = int(model.linear.in_features), int(model.linear.out_features)
        state = {key: v.detach().cpu().clone() for key, v in model.state_dict().items()}
        return AttackState(
            state, m_prime, m_prime, 0, k, matrix, np.asarray(members, np.int64), members_are, "class-means"
        )
    assert isinstance(model, ServerModel)
    return AttackState(
        {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        int(model.restore.in_features),
        int(model.restore.out_features),
        # ServerModel.classifier is Sequential(Linear, ReLU, Linear); indexing a Sequential is typed Module.
        int(cast(nn.Linear, model.classifier[0]).out_features),
        int(cast(nn.Linear, model.classifier[-1]).out_features),
        matrix,
        np.asarray(members, dtype=np.int64),
        members_are,
    )
