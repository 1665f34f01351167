"""The per-user loop the vectorized user updates are checked against."""

from __future__ import annotations

import copy

import torch


def loop_reference(
    model: torch.nn.Module,
    x: torch.Tensor | tuple[torch.Tensor, ...],
    y: torch.Tensor,
    owner: torch.Tensor,
    users: int,
    steps: int,
    lr: float,
    clip: float,
) -> tuple[dict[str, torch.Tensor], list[float]]:
    """One user at a time with a real SGD optimizer over the trainable parameters: the plain,
    unvectorized definition. ``x`` is the model's input, or a tuple of its inputs."""
    inputs = x if isinstance(x, tuple) else (x,)
    start = {k: p.detach().clone() for k, p in model.named_parameters() if p.requires_grad}
    total = {k: torch.zeros_like(v) for k, v in start.items()}
    norms = []
    for u in range(users):
        local = copy.deepcopy(model)
        params = dict(local.named_parameters())
        opt = torch.optim.SGD([params[k] for k in start], lr=lr)
        mine = owner == u
        for _ in range(steps):
            if not mine.any():
                break
            opt.zero_grad()
            torch.nn.functional.cross_entropy(local(*(t[mine] for t in inputs)), y[mine]).backward()
            opt.step()
        delta = {k: params[k].detach() - v for k, v in start.items()}
        norm = torch.cat([d.reshape(-1) for d in delta.values()]).norm()
        norms.append(float(norm))
        scale = min(1.0, clip / max(float(norm), 1e-12))
        for k in total:
            total[k] += scale * delta[k]
    return total, norms
