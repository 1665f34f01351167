"""Thread counts chosen by the size of the work (fl.threads): small steps on one thread, large ones keep the
process's setting, and every setting is restored."""

from __future__ import annotations

import torch
from threadpoolctl import threadpool_info
from torch import nn

from fl.maps.pipeline import train_epochs
from fl.threads import PARALLEL_FROM, blas_threads_for, step_size, threads_for, torch_threads


def test_small_work_gets_one_thread_and_large_work_the_process_setting() -> None:
    with torch_threads(2):
        assert threads_for(PARALLEL_FROM - 1) == 1
        assert threads_for(PARALLEL_FROM) == 2
        assert threads_for(1.0, "cuda") == 2  # a GPU's kernels do not use the intra-op threads
    torch.manual_seed(0)
    head = nn.Sequential(nn.Linear(384, 256), nn.Tanh(), nn.Linear(256, 2))  # about 100k parameters
    assert step_size(head, 64) == 64 * sum(p.numel() for p in head.parameters()) < PARALLEL_FROM


def test_the_setting_is_restored_after_the_block_even_on_error() -> None:
    before = torch.get_num_threads()
    try:
        with torch_threads(1):
            assert torch.get_num_threads() == 1
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert torch.get_num_threads() == before


def test_a_small_head_trains_on_one_thread() -> None:
    seen: list[int] = []
    torch.manual_seed(0)
    head = nn.Linear(16, 2)
    head.register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
    x, y = torch.randn(64, 16, generator=torch.Generator().manual_seed(0)), torch.zeros(64, dtype=torch.int64)
    with torch_threads(2):
        optimizer = torch.optim.Adam(head.parameters())
        train_epochs(head, optimizer, x, y, 2, 16, torch.Generator().manual_seed(1))
        assert torch.get_num_threads() == 2  # restored
    assert seen and set(seen) == {1}


def test_blas_goes_to_one_thread_for_small_work_only() -> None:
    def blas() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    with blas_threads_for(1_000.0):
        assert blas() <= {1}
    outside = blas()
    with blas_threads_for(PARALLEL_FROM):
        assert blas() == outside
