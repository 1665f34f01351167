"""The downstream pipeline of Du et al. (2023) with the maps kept honest.

Client side: the input map M1 (d -> m', ``fl.maps.input_map``, which also gives the
dimensions m' and of a release) then normalisation; the sanitizer follows.
Unless ``map-in = "leaky"``, M1 does not depend on private data, so the
mechanism's guarantee holds for the pulled-back metric
``d_M1(x, x') = d(n(M1 x), n(M1 x'))`` (docs/SPEC.md §3.3).

Server side: M2 (m' -> d), tanh, and an MLP classifier, trained only on
released (sanitized) data, which is post-processing.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import numpy as np
import torch
from torch import nn

from fl.config import ServerConfig
from fl.maps.minibatch import TrainJob, run_job, server_adam
from fl.threads import sized_threads


class ServerModel(nn.Module):
    """M2 (m' -> d) + tanh, then an MLP classifier (d -> hidden -> K)."""

    def __init__(self, m_prime: int, d: int, hidden: int, num_classes: int) -> None:
        super().__init__()
        self.restore = nn.Linear(m_prime, d)  # M2
        self.classifier = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.tanh(self.restore(x)))


def build_model(m_prime: int, d: int, num_classes: int, *, hidden_dim: int, seed: int) -> ServerModel:
    """The server model (:class:`ServerModel`) with a seeded initialisation.

    Parameters
    ----------
    m_prime : int
        m', the width of a release (M2's input).
    d : int
        The encoder's embedding dimension (M2's output).
    num_classes : int
        Classes of the task.
    hidden_dim : int
        The classifier's hidden width (``server.hidden_dim``, the run's ``hidden-dim``).
    seed : int
        Seeds torch's global generator before the layers are built (``users.seed``, the run's ``seed``):
        the same seed gives the same initial weights.
    """
    torch.manual_seed(int(seed))
    return ServerModel(m_prime, d, int(hidden_dim), num_classes)


def empty_head(server_model: str, m_prime: int, d: int, hidden: int, num_classes: int) -> nn.Module:
    """An unfitted model of the kind ``server-model`` names, to load a state dict into: the MLP
    (:class:`ServerModel`) or the ``class-means`` linear head (``fl.maps.class_means.LinearHead``).
    Both ends build the model they exchange with this one function."""
    if server_model == "class-means":
        from fl.maps.class_means import LinearHead

        return LinearHead(m_prime, num_classes)
    return ServerModel(m_prime, d, hidden, num_classes)


#: Set in the greenlets of a shared federation's points (``strategies.points``): their server training
#: goes to the federation, which trains the points' models side by side (``fl.maps.parallel``), each
#: exactly as here. Unset everywhere else.
POINT_TRAINING: ContextVar[Callable[[TrainJob], float] | None] = ContextVar("point_training", default=None)


def train_epochs(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    epochs: int,
    batch_size: int,
    generator: torch.Generator,
    progress: Any = None,
    forward: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> float:
    """Minibatch cross-entropy training (``fl.maps.minibatch.run_job``); returns the last epoch's mean loss.

    ``x``/``y`` already live on the model's device. ``forward`` maps a batch of ``x`` to logits
    (default: ``model``); the optimizer may hold more parameters than the model's
    (``fl.maps.input_map.train_public_map`` trains M1 too)."""
    job = TrainJob(model, optimizer, x, y, int(epochs), int(batch_size), generator, progress, forward)
    hook = POINT_TRAINING.get()
    if hook is not None and forward is None:  # a point of a shared federation: trained beside the others
        return hook(job)
    with sized_threads(model, batch_size, x.device):  # a small model's steps on one thread (fl.threads)
        return run_job(job)


def train_and_score(
    z: torch.Tensor,
    labels: torch.Tensor,
    z_val: torch.Tensor,
    y_val: torch.Tensor,
    d: int,
    num_classes: int,
    epochs: int,
    generator: torch.Generator,
    *,
    server: ServerConfig,
    seed: int,
) -> float:
    """Accuracy on (``z_val``, ``y_val``) of a fresh server model (the run's hidden width, Adam at its
    learning rate, its batch size) trained ``epochs`` epochs on releases ``z`` with ``labels``: the run's
    server step, emulated on public documents (``fl.maps.public_start``, ``fl.maps.recipes``).

    Parameters
    ----------
    z, labels : torch.Tensor
        The releases the model trains on and their labels, on the device the model trains on.
    z_val, y_val : torch.Tensor
        The releases it is scored on and their true labels.
    d : int
        The encoder's embedding dimension (M2's output).
    num_classes : int
        Classes of the task.
    epochs : int
        Epochs of training.
    generator : torch.Generator
        The batch order's generator (advanced by the training).
    server : ServerConfig
        The run's server section: ``hidden-dim``, ``learning-rate`` and ``batch-size``.
    seed : int
        The run's ``seed`` (``users.seed``): the model's initialisation (torch's global generator is left
        as it was).
    """
    with torch.random.fork_rng(devices=[]):  # build_model seeds the global generator: leave it as it was
        model = build_model(z.shape[1], d, num_classes, hidden_dim=server.hidden_dim, seed=seed).to(z.device)
    optimizer = server_adam(model.parameters(), server.learning_rate, z.device)
    train_epochs(model, optimizer, z, labels, epochs, int(server.batch_size), generator)
    return float((predict(model, z_val) == y_val).double().mean())


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch_size: int = 8192) -> torch.Tensor:
    """Argmax class of each row."""
    model.eval()
    with sized_threads(model, min(batch_size, x.shape[0]), x.device):
        out = [model(x[i : i + batch_size]).argmax(dim=1) for i in range(0, x.shape[0], batch_size)]
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.int64, device=x.device)


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> np.ndarray:
    """Counts C[i, j] of true class i predicted as j."""
    flat = np.asarray(y_true, dtype=np.int64) * num_classes + np.asarray(y_pred, dtype=np.int64)
    return np.bincount(flat, minlength=num_classes * num_classes).reshape(num_classes, num_classes)


def scores(confusion: np.ndarray) -> dict[str, float]:
    """Accuracy and macro-F1 from a confusion matrix (F1 of an absent, unpredicted class is skipped)."""
    total = confusion.sum()
    tp = np.diag(confusion).astype(float)
    support, predicted = confusion.sum(axis=1), confusion.sum(axis=0)
    present = (support + predicted) > 0
    f1 = np.where(present, 2 * tp / np.maximum(support + predicted, 1), 0.0)
    return {
        "accuracy": float(tp.sum() / total) if total else float("nan"),
        "macro_f1": float(f1[present].mean()) if present.any() else float("nan"),
    }
