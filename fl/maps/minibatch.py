"""The server's minibatch training: one job (a model, its optimizer, its data, its generator) and
the loop that trains it, shared by a run alone (``fl.maps.pipeline.train_epochs``) and by the points
of a sweep that train side by side (``fl.maps.parallel``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


@dataclass
class TrainJob:
    """One call of :func:`fl.maps.pipeline.train_epochs` (its arguments; ``forward`` default: the model)."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    x: torch.Tensor
    y: torch.Tensor
    epochs: int
    batch_size: int
    generator: torch.Generator
    progress: Callable[[], Any] | None = None
    forward: Callable[[torch.Tensor], torch.Tensor] | None = None


def server_adam(params: Iterable[torch.nn.Parameter], lr: float, device: torch.device | str) -> torch.optim.Adam:
    """Adam for the server's model: the fused kernel (one operation per step for every parameter) on
    the devices that have it (CPU, CUDA), else the foreach one. Fused and foreach Adam compute the
    same update in another order of floating-point operations, so results move in their last bits
    (``benchmarks/seed_equivalence.py``: within seed noise); on a CPU step of the 100k-parameter
    head the fused step is about a sixth of the step's time cheaper."""
    if torch.device(device).type in ("cpu", "cuda"):
        return torch.optim.Adam(params, lr=lr, fused=True)
    return torch.optim.Adam(params, lr=lr, foreach=True)


def run_job(job: TrainJob) -> float:
    """Minibatch cross-entropy training on the calling thread's torch settings; the last epoch's mean
    loss. Batches are index slices of a permutation drawn from ``job.generator`` (no DataLoader, no
    Python work per example); the model ends in eval mode."""
    model, optimizer, x, y = job.model, job.optimizer, job.x, job.y
    forward = job.forward or model
    model.train()
    loss_fn = nn.CrossEntropyLoss()
    n, size = x.shape[0], int(job.batch_size)
    last = float("nan")
    for _ in range(int(job.epochs)):
        order = torch.randperm(n, generator=job.generator).to(x.device)
        total = 0.0
        for start in range(0, n, size):
            idx = order[start : start + size]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(forward(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * idx.numel()
        last = total / max(n, 1)
        if job.progress is not None:
            job.progress()
    model.eval()
    return last
