"""The server's optimizer step: torch's Adam and SGD arithmetic, without torch's ``Optimizer`` class.

Building a ``torch.optim.Optimizer`` imports ``torch._dynamo`` (torch.compile's tracer: its
``add_param_group`` and ``step`` are guarded against tracing), 1.4-1.6 s on 2 cores the first time a
process does it: a tenth of a 30-round user-level central run, for a step nobody compiles.
:class:`ServerOptimizer` keeps the state torch's ``Adam`` and ``SGD`` keep (per parameter: a step
count, the two moments) and calls the very functions their ``step`` calls
(``torch.optim.adam.adam``, ``torch.optim.sgd.sgd``) with the same arguments, so every step is bit for
bit ``torch.optim.Adam``'s or ``torch.optim.SGD``'s (``tests/fl/test_server_optimizer.py``). Written
here: only that bookkeeping; the arithmetic and the choice of kernel (single-tensor or foreach) are
torch's. It has the two methods the server calls, ``zero_grad`` and ``step``, as an ``Optimizer`` does,
so a checkpoint holding a torch optimizer from an older run still resumes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch.optim.adam import adam
from torch.optim.sgd import sgd

#: torch.optim.Adam's defaults (betas, eps); weight decay, amsgrad and maximize are off.
BETAS = (0.9, 0.999)
EPS = 1e-8


@dataclass
class ParamGroup:
    """Parameters stepped at one step size."""

    params: list[torch.Tensor]
    lr: float


class ServerOptimizer:
    """Adam (``kind = "adam"``) or plain SGD (``"sgd"``, no momentum) over parameter groups.

    ``groups`` are dicts with ``"params"`` and optionally ``"lr"`` (default ``lr``), as torch's
    optimizers take them. A parameter whose ``grad`` is ``None`` is skipped by :meth:`step`, as torch
    skips it.
    """

    def __init__(self, groups: Iterable[dict[str, Any]], lr: float, kind: str) -> None:
        if kind not in ("adam", "sgd"):
            raise ValueError(f"kind must be 'adam' or 'sgd', got {kind!r}")
        self.kind = kind
        self.param_groups = [ParamGroup(list(g["params"]), float(g.get("lr", lr))) for g in groups]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient (``set_to_none=False``: set it to zeros)."""
        for group in self.param_groups:
            for p in group.params:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One step of every group whose parameters have a gradient (torch's step, under ``no_grad``)."""
        for group in self.param_groups:
            params = [p for p in group.params if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params if p.grad is not None]
            if self.kind == "sgd":
                sgd(
                    params,
                    grads,
                    [None] * len(params),
                    weight_decay=0.0,
                    momentum=0.0,
                    lr=group.lr,
                    dampening=0.0,
                    nesterov=False,
                    maximize=False,
                )
                continue
            for p in params:
                if p not in self.state:  # as torch.optim.Adam._init_group (not capturable, not fused)
                    self.state[p] = {
                        "step": torch.tensor(0.0, dtype=torch.get_default_dtype(), device="cpu"),
                        "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                        "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                    }
            states = [self.state[p] for p in params]
            adam(
                params,
                grads,
                [s["exp_avg"] for s in states],
                [s["exp_avg_sq"] for s in states],
                [],
                [s["step"] for s in states],
                amsgrad=False,
                has_complex=any(torch.is_complex(p) for p in params),
                beta1=BETAS[0],
                beta2=BETAS[1],
                lr=group.lr,
                weight_decay=0.0,
                eps=EPS,
                maximize=False,
            )
