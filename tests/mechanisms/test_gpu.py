"""GPU path of the sentence mechanism (run with ``pytest -m gpu`` on a CUDA machine)."""

from __future__ import annotations

import math

import pytest
import torch

import mechanisms


@pytest.mark.gpu
def test_purkayastha_on_cuda_matches_reference_moments() -> None:
    """Sampling with a CUDA generator gives the spec §1.5 law at (16, 10) and stays on the device."""
    x = torch.randn(1, 16, device="cuda").expand(200_000, 16).contiguous()
    gen = torch.Generator(device="cuda").manual_seed(0)
    y = mechanisms.create("purkayastha", epsilon=10.0).sanitize(x, generator=gen)
    assert y.device.type == "cuda"
    cos = (y * torch.nn.functional.normalize(x, dim=1)).sum(1)
    theta = torch.arccos(cos.clamp(-1, 1)).double()
    assert abs(float(theta.mean()) - 0.98327) < 5 * 0.21486 / math.sqrt(200_000)
