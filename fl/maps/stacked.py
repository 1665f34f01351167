"""Several server models trained as one: the points of a sweep that share a federation
(``strategies.points``) train their models stacked, one optimizer step for all of them.

:func:`train_stacked` runs exactly :func:`fl.maps.pipeline.train_epochs` for each model (each its own
data, generator and optimizer state): each model's forward pass on its own batch, one backward pass
for the sum of the models' losses and one Adam step over every model's parameters. Each model ends
with the parameters, optimizer state and loss it would have had trained alone, bit for bit: the
matrix products are the ones a run alone computes (a ``vmap``-ed or batched product reduces in
another order and moves the floats), a sum's gradient is each term's own, and Adam is elementwise
(``tests/fl/maps/test_stacked.py`` checks it). What it saves is one backward call and one optimizer
step per model; at the server model's size that is a few per cent, not more.

Written by hand: no library trains independent models with one optimizer step and each its own
state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from fl.threads import sized_threads

#: Adam's settings that must agree for one stacked optimizer to take every model's step.
_ADAM_SETTINGS = ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach", "capturable",
                  "differentiable", "fused", "decoupled_weight_decay")  # fmt: skip


@dataclass
class TrainJob:
    """One call of :func:`fl.maps.pipeline.train_epochs` (its arguments; ``forward`` is the model's own)."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    x: torch.Tensor
    y: torch.Tensor
    epochs: int
    batch_size: int
    generator: torch.Generator
    progress: Callable[[], Any] | None = None


def _adam_state(job: TrainJob) -> tuple[Any, ...] | None:
    """What must agree across jobs for their optimizers to stack (``None``: this one cannot)."""
    opt = job.optimizer
    if type(opt) is not torch.optim.Adam or len(opt.param_groups) != 1:
        return None
    group = opt.param_groups[0]
    params = list(job.model.parameters())
    if len(group["params"]) != len(params) or any(a is not b for a, b in zip(group["params"], params, strict=True)):
        return None  # the optimizer holds other parameters (M1 in the public start) or a subset
    steps = {float(opt.state[p]["step"]) for p in params if p in opt.state}
    if len(steps) > 1 or (steps and any(p not in opt.state for p in params)):
        return None
    return (tuple(group.get(k) for k in _ADAM_SETTINGS), steps.pop() if steps else None)


def stack_key(job: TrainJob) -> tuple[Any, ...] | None:
    """Jobs with equal keys train stacked; ``None``: the job trains alone."""
    adam = _adam_state(job)
    if adam is None or any(True for _ in job.model.buffers()):
        return None
    shapes = tuple((k, tuple(p.shape), p.dtype, p.requires_grad) for k, p in job.model.named_parameters())
    return (
        type(job.model),
        shapes,
        adam,
        tuple(job.x.shape),
        job.x.dtype,
        tuple(job.y.shape),
        str(job.x.device),
        int(job.epochs),
        int(job.batch_size),
    )


def train_stacked(jobs: Sequence[TrainJob]) -> list[float]:
    """Train every job's model as :func:`fl.maps.pipeline.train_epochs` would (same batches from each
    job's generator, same Adam steps), stacked; each job's last-epoch mean loss. The jobs must share
    one :func:`stack_key`."""
    if len({stack_key(j) for j in jobs}) != 1 or stack_key(jobs[0]) is None:
        raise ValueError("these training jobs do not stack (different models, optimizers, data shapes or epochs)")
    # The threads one job alone would get (fl.threads), so the stacked floats are the ones alone gives.
    with sized_threads(jobs[0].model, int(jobs[0].batch_size), jobs[0].x.device):
        return _train_stacked(jobs)


def _train_stacked(jobs: Sequence[TrainJob]) -> list[float]:
    own = [list(j.model.parameters()) for j in jobs]
    group = jobs[0].optimizer.param_groups[0]
    settings = {k: group[k] for k in _ADAM_SETTINGS if k in group}
    # One Adam over every model's parameters, each keeping its own state (the same dicts, carried
    # over from and back to the job's optimizer): Adam is elementwise, so its step per tensor is
    # the one the job's optimizer takes alone.
    optimizer = torch.optim.Adam([p for ps in own for p in ps], **settings)
    for j, ps in zip(jobs, own, strict=True):
        for p in ps:
            if p in j.optimizer.state:
                optimizer.state[p] = j.optimizer.state[p]
    for j in jobs:
        j.model.train()
    loss_fn = nn.CrossEntropyLoss()
    n, points, size = jobs[0].x.shape[0], len(jobs), int(jobs[0].batch_size)
    last = [float("nan")] * points
    for _ in range(int(jobs[0].epochs)):
        orders = [torch.randperm(n, generator=j.generator).to(j.x.device) for j in jobs]
        totals = [0.0] * points
        for start in range(0, n, size):
            optimizer.zero_grad(set_to_none=True)
            # Each model's forward on its own batch (the products of a run alone: a vmapped or
            # batched product reduces in another order), one backward for all: the gradient of a
            # sum of losses is each model's own gradient, exactly.
            losses = []
            for j, order in zip(jobs, orders, strict=True):
                idx = order[start : start + size]
                losses.append(loss_fn(j.model(j.x[idx]), j.y[idx]))
            torch.stack(losses).sum().backward()
            optimizer.step()
            rows = min(size, n - start)
            for i, value in enumerate(torch.stack(losses).detach().tolist()):
                totals[i] += value * rows
        last = [t / max(n, 1) for t in totals]
        for j in jobs:
            if j.progress is not None:
                j.progress()
    for j, ps in zip(jobs, own, strict=True):  # each optimizer holds its models' states, as alone
        for p in ps:
            j.optimizer.state[p] = optimizer.state[p]
        j.model.eval()
    return last
