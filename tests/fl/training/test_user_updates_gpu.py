"""The user-level central path on CUDA: per-user clipped sums (both the one-step ghost-norm path and
the vmap path) and the server's noisy step give the CPU's results. Skipped without CUDA."""

from __future__ import annotations

import copy

import pytest
import torch

from fl.maps.pipeline import ServerModel
from fl.training.user_updates import clipped_update_sum, pad_by_user

CUDA = torch.device("cuda")


def _case() -> tuple[ServerModel, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    torch.manual_seed(0)
    model = ServerModel(32, 64, 64, 2)
    owner = torch.randint(0, 300, (1000,), generator=g)
    x = torch.nn.functional.normalize(torch.randn(1000, 32, generator=g), dim=1)
    y = torch.randint(0, 2, (1000,), generator=g)
    return model, *pad_by_user(x, y, owner, 300)


@pytest.mark.gpu
@pytest.mark.parametrize("steps", [1, 3])  # 1: ghost norms, one forward and backward; 3: vmap over users
def test_clipped_sums_on_cuda_match_the_cpu(steps: int) -> None:
    model, xs, ys, mask = _case()
    cpu_total, cpu_norms = clipped_update_sum(model, xs, ys, mask, steps, 0.5, 0.1)
    gpu_model = copy.deepcopy(model).to(CUDA)
    total, norms = clipped_update_sum(gpu_model, xs.to(CUDA), ys.to(CUDA), mask.to(CUDA), steps, 0.5, 0.1)
    assert norms.device.type == "cuda"
    torch.testing.assert_close(norms.cpu(), cpu_norms, rtol=1e-4, atol=1e-6)
    for k, v in cpu_total.items():
        torch.testing.assert_close(total[k].cpu(), v, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_the_server_step_runs_on_cuda() -> None:
    """UserLevelDPFedAvg with device = "cuda" keeps its model on the GPU and sends CPU arrays."""
    from fl import config as config_mod
    from fl import wire
    from strategies.central_user import UserLevelDPFedAvg

    info = wire.CohortInfo(0, 10, 10, 10, 0, 5, 5, 2, 64, 32, 32)
    cfg = dict(config_mod.resolve({"mode": "central", "map-dim": 32, "hidden-dim": 64, "device": "cuda"}))
    torch.manual_seed(0)
    s = UserLevelDPFedAvg(cfg, {1: info}, ServerModel(32, 64, 64, 2))
    assert next(s.model.parameters()).device.type == "cuda"
    arrays = s._arrays()
    assert all(a.numpy().shape for a in arrays.values())
