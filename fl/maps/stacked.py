"""Several server models trained as one: the points of a sweep that share a federation
(``strategies.points``) train their models stacked, one optimizer step for all of them.

:func:`train_stacked` runs exactly :func:`fl.maps.pipeline.train_epochs` for each model (each its own
data, generator and optimizer state), with the models' parameters stacked along a leading axis and
the models' forward and backward passes vectorized over it (``torch.func.vmap`` over
``torch.func.functional_call``; each point's batch loss taken on its own, in the order of a run
alone), and one Adam step over the stacked parameters. Each model ends with
the parameters, optimizer state and loss it would have had trained alone, bit for bit: every
operation is either computed per slice (the matrix products) or elementwise (Adam), so stacking
changes no float (``tests/fl/maps/test_stacked.py`` checks it). What it saves is the Python and
dispatch work of one step per model: a 5-point sweep takes one step where it took five.

Written by hand: ``torch.func.stack_module_state`` stacks parameters but not optimizer states, and
no library trains independent models with stacked optimizer states.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, vmap

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
    base = jobs[0].model
    names = [k for k, _ in base.named_parameters()]
    own = [dict(j.model.named_parameters()) for j in jobs]
    stacked = {k: torch.stack([o[k].detach() for o in own]).requires_grad_(own[0][k].requires_grad) for k in names}
    group = jobs[0].optimizer.param_groups[0]
    settings = {k: group[k] for k in _ADAM_SETTINGS if k in group}
    optimizer = torch.optim.Adam([stacked[k] for k in names], **settings)
    first = jobs[0].optimizer.state
    if own[0][names[0]] in first:  # every job has trained before: carry their states over, stacked
        for k in names:
            states = [j.optimizer.state[o[k]] for j, o in zip(jobs, own, strict=True)]
            optimizer.state[stacked[k]] = {
                "step": states[0]["step"].clone(),
                **{s: torch.stack([st[s] for st in states]) for s in states[0] if s != "step"},
            }
    for j in jobs:
        j.model.train()
    loss_fn = nn.CrossEntropyLoss()

    def logits(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(base, params, (x,))

    batched = vmap(logits)
    n, points = jobs[0].x.shape[0], len(jobs)
    xs, ys = torch.stack([j.x for j in jobs]), torch.stack([j.y for j in jobs])
    rows = torch.arange(points, device=xs.device)[:, None]
    last = [float("nan")] * points
    for _ in range(int(jobs[0].epochs)):
        orders = torch.stack([torch.randperm(n, generator=j.generator) for j in jobs]).to(xs.device)
        totals = [0.0] * points
        for start in range(0, n, int(jobs[0].batch_size)):
            idx = orders[:, start : start + int(jobs[0].batch_size)]
            optimizer.zero_grad(set_to_none=True)
            out, yb = batched(stacked, xs[rows, idx]), ys[rows, idx]
            # Each point's loss on its own (the batch mean in the same order as alone: a vmapped mean
            # reduces in another order and moves the reported loss by an ulp).
            losses = torch.stack([loss_fn(out[i], yb[i]) for i in range(points)])
            losses.sum().backward()
            optimizer.step()
            for i, value in enumerate(losses.detach().tolist()):
                totals[i] += value * idx.shape[1]
        last = [t / max(n, 1) for t in totals]
        for j in jobs:
            if j.progress is not None:
                j.progress()
    with torch.no_grad():  # each model and optimizer as if it had trained alone
        for i, (j, o) in enumerate(zip(jobs, own, strict=True)):
            for k in names:
                o[k].copy_(stacked[k][i])
                state = optimizer.state[stacked[k]]
                j.optimizer.state[o[k]] = {
                    "step": state["step"].clone(),
                    **{s: v[i].clone() for s, v in state.items() if s != "step"},
                }
            j.model.eval()
    return last
