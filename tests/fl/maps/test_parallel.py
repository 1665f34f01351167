"""Server models trained side by side (``fl.maps.parallel``): each ends exactly where it would trained alone."""

from __future__ import annotations

import copy

import torch

from fl.maps.minibatch import TrainJob, server_adam
from fl.maps.parallel import runs_beside_others, train_parallel
from fl.maps.pipeline import ServerModel, train_epochs


def _jobs(points: int, n: int = 300, m: int = 3) -> list[TrainJob]:
    jobs = []
    for i in range(points):
        torch.manual_seed(i)
        model = ServerModel(m, 16, 8, 3)
        gen = torch.Generator().manual_seed(100 + i)
        x, y = torch.randn(n, m, generator=gen), torch.randint(0, 3, (n,), generator=gen)
        optimizer = server_adam(model.parameters(), 0.01, "cpu")
        jobs.append(TrainJob(model, optimizer, x, y, 2, 64, torch.Generator().manual_seed(7 * i)))
    return jobs


def _copy(jobs: list[TrainJob]) -> list[TrainJob]:
    out = []
    for j in jobs:
        model = copy.deepcopy(j.model)
        optimizer = server_adam(model.parameters(), 0.01, "cpu")
        optimizer.load_state_dict(copy.deepcopy(j.optimizer.state_dict()))
        gen = torch.Generator()
        gen.set_state(j.generator.get_state())
        out.append(TrainJob(model, optimizer, j.x, j.y, j.epochs, j.batch_size, gen))
    return out


def _alone(jobs: list[TrainJob]) -> list[float]:
    return [train_epochs(j.model, j.optimizer, j.x, j.y, j.epochs, j.batch_size, j.generator) for j in jobs]


def test_models_trained_side_by_side_equal_each_trained_alone_bit_for_bit() -> None:
    """Two calls (fresh optimizers, then carried-over Adam states, as rounds 1 and 2 of a run), on two
    worker threads: the parameters, the Adam moments and steps, the losses and the generators' states
    are equal."""
    alone = _jobs(5)
    beside = _copy(alone)
    assert all(runs_beside_others(j) for j in beside)
    for _ in range(2):
        want = _alone(alone)
        got = train_parallel(beside, workers=2)
        assert got == want
    for a, s in zip(alone, beside, strict=True):
        for (k, pa), (_, ps) in zip(a.model.named_parameters(), s.model.named_parameters(), strict=True):
            assert torch.equal(pa, ps), k
            sa, ss = a.optimizer.state[pa], s.optimizer.state[ps]
            assert sa.keys() == ss.keys() and all(torch.equal(sa[v], ss[v]) for v in sa), k
        assert torch.equal(a.generator.get_state(), s.generator.get_state())
        assert not s.model.training
    # Power: the models trained apart (a mix-up of jobs would make them equal or swap them).
    w = [next(j.model.parameters()) for j in beside]
    assert not torch.equal(w[0], w[1]) and not torch.equal(w[1], w[2])


def test_a_job_that_fails_fails_alone_and_large_jobs_train_after_the_small_ones() -> None:
    jobs = _jobs(3)
    jobs[1].y = torch.full_like(jobs[1].y, 7)  # a class the 3-class head does not have
    torch.manual_seed(3)
    model = ServerModel(2048, 2048, 512, 3)  # 64 x 5.3M multiply-adds a step: the process's threads
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(64, 2048, generator=gen), torch.randint(0, 3, (64,), generator=gen)
    big = TrainJob(model, server_adam(model.parameters(), 0.01, "cpu"), x, y, 1, 64, gen)
    assert not runs_beside_others(big)
    threads = torch.get_num_threads()
    out = train_parallel([*jobs, big], workers=2)
    assert isinstance(out[1], IndexError)
    assert all(isinstance(v, float) for i, v in enumerate(out) if i != 1)
    assert torch.get_num_threads() == threads and not big.model.training  # the setting is restored
