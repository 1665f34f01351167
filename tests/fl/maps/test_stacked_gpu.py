"""Stacked server training on CUDA (where ``strategies.points`` uses it): each model ends exactly where
it would trained alone."""

from __future__ import annotations

import pytest
import torch

from tests.fl.maps.test_stacked import _alone, _copy, _jobs

pytestmark = pytest.mark.gpu


def test_stacked_training_equals_training_each_alone_on_cuda() -> None:
    from fl.maps.stacked import train_stacked

    jobs = _jobs(3)
    for j in jobs:
        j.model.cuda()
        j.x, j.y = j.x.cuda(), j.y.cuda()
        j.optimizer = torch.optim.Adam(j.model.parameters(), lr=0.01, foreach=True)
    stacked = _copy(jobs)
    for _ in range(2):
        assert train_stacked(stacked) == _alone(jobs)
    for a, s in zip(jobs, stacked, strict=True):
        for pa, ps in zip(a.model.parameters(), s.model.parameters(), strict=True):
            assert torch.equal(pa, ps)
