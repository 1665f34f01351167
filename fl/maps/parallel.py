"""The server models of the points of a sweep that share a federation (``strategies.points``), trained
side by side: one OS thread per core, each training whole models exactly as a run alone does.

A server model's step is small (the 100k-parameter head on a batch of 128: a few million
multiply-adds), so a run alone trains it on one torch thread (``fl.threads``) and leaves the other
cores idle. Here each model trains on one thread of its own, with the same operations in the same
order as alone, so it ends with the parameters, optimizer state and loss it would have had alone, bit
for bit (``tests/fl/maps/test_parallel.py``); torch's kernels release the GIL, so on 2 cores 5 models
train in about 0.6 of the time one after another takes (the Python between kernels still takes turns).
Models that are not small (``fl.threads.threads_for`` > 1), or not on a CPU, train one after another
with the process's threads, as alone.

Written by hand: no library trains independent models concurrently with each its own optimizer.
(Stacking the models into batched products, as before, reduced in another order on AVX-512 and moved
their floats; on a CPU it was no faster than the models one after another.)
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from fl.maps.minibatch import TrainJob, run_job
from fl.threads import sized_threads, step_size, threads_for, torch_threads


def runs_beside_others(job: TrainJob) -> bool:
    """Whether ``job`` trains on one CPU thread of its own (a run alone gives it one thread too)."""
    return job.x.device.type == "cpu" and threads_for(step_size(job.model, int(job.batch_size))) == 1


def train_parallel(jobs: Sequence[TrainJob], workers: int | None = None) -> list[float | BaseException]:
    """Each job trained as :func:`fl.maps.pipeline.train_epochs` trains it alone; its last-epoch mean
    loss, or the exception that ended it (the other jobs go on). Small CPU jobs train on up to
    ``workers`` threads at once (default: the process's torch threads, one per core), the others
    after them, one at a time."""
    results: list[float | BaseException] = [RuntimeError("not trained")] * len(jobs)
    beside = [runs_beside_others(j) for j in jobs]
    small = [i for i, b in enumerate(beside) if b]
    workers = max(1, min(len(small), workers or torch.get_num_threads()))

    def one(i: int) -> None:
        try:
            results[i] = run_job(jobs[i])
        except Exception as err:  # noqa: BLE001 - each point sees its own training fail
            results[i] = err

    # One torch thread in the process while the workers run: threads that start using torch take the
    # process's setting, and each model's products then reduce as they do alone.
    with torch_threads(1):
        if workers == 1:
            for i in small:
                one(i)
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="sanitas-train") as pool:
                list(pool.map(one, small))
    for i in (i for i, b in enumerate(beside) if not b):
        with sized_threads(jobs[i].model, int(jobs[i].batch_size), jobs[i].x.device):
            one(i)
    return results
