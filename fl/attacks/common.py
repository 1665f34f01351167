"""Small pieces the attack models share."""

from __future__ import annotations

import torch


class Standardise(torch.nn.Module):
    """x -> (x - mean) / std with the statistics of the attacker's training set (kept as buffers)."""

    mean: torch.Tensor  # buffers (register_buffer below): declared for the type checker
    std: torch.Tensor

    def __init__(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)

    @classmethod
    def fit(cls, x: torch.Tensor) -> Standardise:
        return cls(x.mean(0), x.std(0).clamp_min(1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std
