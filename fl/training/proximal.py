"""FedProx's proximal term on a node's local training (Li et al. 2020, "Federated Optimization in
Heterogeneous Networks", https://arxiv.org/abs/1812.06127, eq. 2): the local objective is
``loss(w) + mu / 2 * ||w - w_global||^2``, whose gradient adds ``mu * (w - w_global)``.

Flower's ``FedProx`` sends ``proximal-mu`` with every training request and leaves the term to the nodes;
:class:`ProximalOptimizer` adds it to the gradients before the wrapped optimizer's step, so any training
loop that calls ``zero_grad`` and ``step`` (``fl.maps.pipeline.train_epochs``) trains the proximal objective.
Written here: only that one addition; the step is the wrapped torch optimizer's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

#: The key Flower's FedProx puts in the training request's config.
PROXIMAL_MU = "proximal-mu"


class ProximalOptimizer:
    """``optimizer`` stepping ``loss + mu / 2 * ||w - anchor||^2`` over ``params`` (anchored where they are now)."""

    def __init__(self, optimizer: torch.optim.Optimizer, params: Iterable[torch.Tensor], mu: float) -> None:
        if not mu >= 0:
            raise ValueError(f"proximal-mu must be >= 0, got {mu}")
        self.optimizer = optimizer
        self.params = [p for p in params if p.requires_grad]
        self.anchors = [p.detach().clone() for p in self.params]
        self.mu = float(mu)

    @property
    def param_groups(self) -> list[dict]:
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self) -> None:
        """The wrapped step, after adding ``mu * (w - anchor)`` to every parameter's gradient."""
        if self.mu > 0:
            for p, a in zip(self.params, self.anchors, strict=True):
                if p.grad is not None:
                    p.grad.add_(p - a, alpha=self.mu)
        self.optimizer.step()


def proximal_mu(config: Mapping[str, object]) -> float:
    """The request's ``proximal-mu`` (0 when the strategy sends none)."""
    value = config.get(PROXIMAL_MU, 0.0)
    return float(value) if isinstance(value, int | float) else 0.0


def with_proximal_term(optimizer: torch.optim.Optimizer, params: Iterable[torch.Tensor], mu: float):
    """``optimizer`` itself when ``mu`` is 0, else a :class:`ProximalOptimizer` around it."""
    return optimizer if mu == 0 else ProximalOptimizer(optimizer, params, mu)
