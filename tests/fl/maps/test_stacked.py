"""Stacked server training (``fl.maps.stacked``): each model ends exactly where it would trained alone."""

from __future__ import annotations

import copy

import pytest
import torch

from fl.maps.pipeline import ServerModel, train_epochs
from fl.maps.stacked import TrainJob, stack_key, train_stacked


def _jobs(points: int, n: int = 300, m: int = 3) -> list[TrainJob]:
    jobs = []
    for i in range(points):
        torch.manual_seed(i)
        model = ServerModel(m, 16, 8, 3)
        gen = torch.Generator().manual_seed(100 + i)
        x, y = torch.randn(n, m, generator=gen), torch.randint(0, 3, (n,), generator=gen)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01, foreach=True)
        jobs.append(TrainJob(model, optimizer, x, y, 2, 64, torch.Generator().manual_seed(7 * i)))
    return jobs


def _copy(jobs: list[TrainJob]) -> list[TrainJob]:
    out = []
    for j in jobs:
        model = copy.deepcopy(j.model)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01, foreach=True)
        optimizer.load_state_dict(copy.deepcopy(j.optimizer.state_dict()))
        gen = torch.Generator()
        gen.set_state(j.generator.get_state())
        out.append(TrainJob(model, optimizer, j.x, j.y, j.epochs, j.batch_size, gen))
    return out


def _alone(jobs: list[TrainJob]) -> list[float]:
    return [train_epochs(j.model, j.optimizer, j.x, j.y, j.epochs, j.batch_size, j.generator) for j in jobs]


def test_stacked_training_equals_training_each_alone_bit_for_bit() -> None:
    """Two calls (fresh optimizers, then carried-over Adam states, as rounds 1 and 2 of a run): the
    parameters, the Adam moments and steps, the losses and the generators' states are equal."""
    alone = _jobs(3)
    stacked = _copy(alone)
    for _ in range(2):
        want = _alone(alone)
        got = train_stacked(stacked)
        assert got == want
    for a, s in zip(alone, stacked, strict=True):
        for (k, pa), (_, ps) in zip(a.model.named_parameters(), s.model.named_parameters(), strict=True):
            assert torch.equal(pa, ps), k
            sa, ss = a.optimizer.state[pa], s.optimizer.state[ps]
            assert sa.keys() == ss.keys() and all(torch.equal(sa[v], ss[v]) for v in sa), k
        assert torch.equal(a.generator.get_state(), s.generator.get_state())
        assert not s.model.training
    # Power: the models trained apart (a slice mix-up would make them equal or swap them).
    w = [next(j.model.parameters()) for j in stacked]
    assert not torch.equal(w[0], w[1]) and not torch.equal(w[1], w[2])


def test_jobs_that_differ_do_not_stack() -> None:
    jobs = _jobs(2)
    assert stack_key(jobs[0]) == stack_key(jobs[1]) is not None
    longer = _jobs(1, n=301)[0]
    assert stack_key(longer) != stack_key(jobs[0])
    other_lr = _jobs(1)[0]
    other_lr.optimizer.param_groups[0]["lr"] = 0.02
    assert stack_key(other_lr) != stack_key(jobs[0])
    sgd = _jobs(1)[0]
    sgd.optimizer = torch.optim.SGD(sgd.model.parameters(), lr=0.1)
    assert stack_key(sgd) is None
    with pytest.raises(ValueError, match="do not stack"):
        train_stacked([jobs[0], longer])
