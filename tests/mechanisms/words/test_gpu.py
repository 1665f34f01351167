"""CUDA path of the word mechanisms (run with ``pytest -m gpu`` on a CUDA machine)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.words.nearest import NearestWords, brute_force_nearest
from tests.support.word_spaces import make_space


@pytest.mark.gpu
def test_cuda_nearest_equals_brute_force() -> None:
    space = make_space(20_000, 50, seed=7)
    vectors = space.vectors[: space.num_words]
    gen = torch.Generator().manual_seed(0)
    q = vectors[torch.randint(0, 20_000, (2000,), generator=gen)].double()
    q += torch.logspace(-3, 2, 2000, dtype=torch.float64).unsqueeze(1) * torch.randn(
        2000, 50, generator=gen, dtype=torch.float64
    )
    got = NearestWords(vectors)(q.cuda())
    assert got.device.type == "cuda"
    assert torch.equal(got.cpu(), brute_force_nearest(q, vectors))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cmp", "mahalanobis", "trlaplace", "word_laplace", "word_gaussian"])
def test_cuda_generator_samples_on_the_device(name: str) -> None:
    """A CUDA generator: noise and search on the GPU, ids returned on the ids' device, CMP law intact."""
    space = make_space(5000, 50, seed=8)
    mech = mechanisms.create(name, epsilon=5.0, space=space)
    ids = torch.randint(0, space.unk + 1, (50_000,), generator=torch.Generator().manual_seed(2))
    out = mech.sanitize_ids(ids, torch.Generator(device="cuda").manual_seed(0))
    assert out.device == ids.device and int(out.max()) < space.unk
    if name == "cmp":
        y = mech.perturb(torch.full((20_000,), 3), torch.Generator(device="cuda").manual_seed(1))
        norms = (y - mech.input_vectors(y.device)[3]).norm(dim=1).cpu().numpy()
        assert stats.kstest(norms, stats.gamma(a=50, scale=1 / 5.0).cdf).pvalue > 1e-4
        assert np.isfinite(norms).all()
