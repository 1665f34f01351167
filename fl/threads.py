"""How many torch threads a phase computes with, chosen by the size of its work.

torch parallelises each operation over its intra-op threads (OpenMP), which meet at a barrier after
every operation. For small operations (a 100k-parameter head on a batch of 64: a few million
multiply-adds) the barrier costs more than the work, and on a machine where another process keeps
each core busy it costs far more: a thread that is not scheduled holds up every barrier for a whole
time slice. Measured on 2 cores with a busy process on each (``benchmarks/bench_loaded.py``): the
cached quickstart, all small operations, took 3x its idle time with torch's 2 threads.

So work below :data:`PARALLEL_FROM` multiply-adds per step runs on one thread (on a CPU; a GPU's
kernels do not use these threads), and larger work (an encoder's forward pass) keeps the process's
setting. One thread for small work also makes its float results the same on every machine, whatever
its core count (a parallel reduction's order depends on the thread count).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

#: Multiply-adds per training step from which a phase keeps the process's torch threads (2^26, about
#: 67 million: a 1M-parameter model on a batch of 64). Below it, one thread.
PARALLEL_FROM = float(1 << 26)


def step_size(model: nn.Module, batch_size: int) -> float:
    """Multiply-adds of one forward pass over a batch: ``batch_size`` times the model's parameters
    (exact for linear layers, the models this decides for)."""
    return float(batch_size) * float(sum(p.numel() for p in model.parameters()))


def threads_for(work: float, device: torch.device | str = "cpu") -> int:
    """The torch threads for a step of ``work`` multiply-adds: 1 below :data:`PARALLEL_FROM` on a CPU,
    else the process's current setting."""
    if torch.device(device).type != "cpu" or work >= PARALLEL_FROM:
        return torch.get_num_threads()
    return 1


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Compute with ``count`` torch threads inside the block; the previous setting is restored after."""
    previous = torch.get_num_threads()
    if count == previous:
        yield
        return
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextmanager
def blas_threads_for(work: float) -> Iterator[None]:
    """numpy's and scipy's BLAS (OpenBLAS) on one thread inside the block when ``work`` multiply-adds per
    operation is below :data:`PARALLEL_FROM` (scikit-learn's lbfgs on public embeddings: matrix-vector
    products); through threadpoolctl, which scikit-learn installs. Otherwise nothing changes."""
    if work >= PARALLEL_FROM:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@contextmanager
def sized_threads(model: nn.Module, batch_size: int, device: torch.device | str = "cpu") -> Iterator[None]:
    """:func:`torch_threads` at :func:`threads_for` the model's step on a batch of ``batch_size``."""
    with torch_threads(threads_for(step_size(model, batch_size), device)):
        yield
