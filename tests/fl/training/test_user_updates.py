"""Per-user clipped updates, vectorized over users: equal to a per-user loop, clipped, masked."""

from __future__ import annotations

import pytest
import torch

from fl.maps.pipeline import ServerModel
from fl.training.user_updates import clipped_update_sum, pad_by_user
from tests.support.user_updates import loop_reference


def _model() -> ServerModel:
    torch.manual_seed(0)
    return ServerModel(4, 6, 8, 3)


def _data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    owner = torch.tensor([0, 2, 2, 0, 2, 3])  # user 1 has no documents; users hold 2, 0, 3, 1
    return torch.randn(6, 4, generator=g), torch.randint(0, 3, (6,), generator=g), owner


@pytest.mark.parametrize(("steps", "clip"), [(1, 100.0), (1, 0.05), (3, 0.05)])  # steps = 1: the ghost-norm path
def test_vectorized_equals_the_per_user_loop(steps: int, clip: float) -> None:
    """Same updates, norms and clipped sum as training each user alone (and the model is untouched)."""
    model, (x, y, owner) = _model(), _data()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    xs, ys, mask = pad_by_user(x, y, owner, 4)
    total, norms = clipped_update_sum(model, xs, ys, mask, steps, 0.5, clip)
    ref_total, ref_norms = loop_reference(model, x, y, owner, 4, steps, 0.5, clip)
    assert norms.tolist() == pytest.approx(ref_norms, rel=1e-5, abs=1e-7)
    for k in ref_total:
        torch.testing.assert_close(total[k], ref_total[k], rtol=1e-5, atol=1e-6)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert norms[1] == 0.0  # no documents, no update


@pytest.mark.parametrize("chunk", [1, 3])
def test_chunks_of_users_give_the_same_sum(chunk: int) -> None:
    """Going through vmap a few users at a time changes nothing but memory."""
    model, (x, y, owner) = _model(), _data()
    xs, ys, mask = pad_by_user(x, y, owner, 4)
    whole, whole_norms = clipped_update_sum(model, xs, ys, mask, 2, 0.5, 0.05)
    parts, part_norms = clipped_update_sum(model, xs, ys, mask, 2, 0.5, 0.05, chunk=chunk)
    torch.testing.assert_close(part_norms, whole_norms)
    for k in whole:
        torch.testing.assert_close(parts[k], whole[k], rtol=1e-5, atol=1e-7)


def test_each_user_contributes_at_most_clip() -> None:
    """With a small clip every user's share of the sum has norm <= clip; the check has power: without
    clipping the sum of 3 active users is far above 3 * clip."""
    model, (x, y, owner) = _model(), _data()
    xs, ys, mask = pad_by_user(x, y, owner, 4)
    total, norms = clipped_update_sum(model, xs, ys, mask, 2, 1.0, 1e-3)
    flat = torch.cat([v.reshape(-1) for v in total.values()])
    assert float(flat.norm()) <= 3 * 1e-3 * (1 + 1e-6) and float(norms.max()) > 10 * 1e-3
    loose, _ = clipped_update_sum(model, xs, ys, mask, 2, 1.0, 1e6)
    assert float(torch.cat([v.reshape(-1) for v in loose.values()]).norm()) > 3 * 1e-3


def test_padding_groups_documents_by_user() -> None:
    x, y, owner = _data()
    xs, ys, mask = pad_by_user(x, y, owner, 4)
    assert xs.shape == (4, 3, 4) and mask.sum(dim=1).tolist() == [2, 0, 3, 1]
    torch.testing.assert_close(xs[2][mask[2]], x[owner == 2])
    assert ys[0][mask[0]].tolist() == y[owner == 0].tolist()
    with pytest.raises(ValueError, match="clip > 0"):
        clipped_update_sum(_model(), xs, ys, mask, 1, 0.1, 0.0)


def test_poisson_sample_is_per_user_and_order_free() -> None:
    """A user's coin depends on (seed, round, user id) only: asking in another order or from another
    node gives the same answer; the rate is q (binomial test), and rounds differ."""
    from scipy import stats

    from fl.training.user_updates import poisson_sample

    n, q = 100_000, 0.01
    ids = torch.arange(n)
    picked = poisson_sample(42, 3, ids, n, q)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    assert torch.equal(poisson_sample(42, 3, ids[perm], n, q), picked[perm])
    assert stats.binomtest(int(picked.sum()), n, q).pvalue > 1e-4
    assert stats.binomtest(int(picked.sum()), n, 1.5 * q).pvalue < 1e-6  # power: the wrong rate is refuted
    assert not torch.equal(poisson_sample(42, 4, ids, n, q), picked)


def test_keyed_coins_of_several_secrets_equal_each_secrets_coins() -> None:
    """One pass over several nodes' users, each id under its own node's round key, gives every node's
    coins as user_coins gives them alone (the nodes of one process sample in one pass)."""
    import numpy as np

    from fl.training.user_updates import hash_seed, keyed_coins, user_coins

    secrets, blocks = [7, 123456789, 2**62 + 5], [range(0, 40), range(40, 41), range(41, 300)]
    keys = np.repeat(np.array([hash_seed(s, 9) for s in secrets], dtype=np.uint64), [len(b) for b in blocks])
    together = keyed_coins(keys, np.arange(300))
    alone = np.concatenate([user_coins(s, 9, torch.arange(b.start, b.stop)).numpy() for s, b in zip(secrets, blocks)])
    assert np.array_equal(together, alone)
    # power: the same ids under one key draw other coins
    assert not np.array_equal(together, keyed_coins(np.uint64(hash_seed(7, 9)), np.arange(300)))


def test_noisy_mean_has_the_calibrated_noise() -> None:
    """The release is (sum + N(0, (zC)^2)) / (qN): its spread around sum / (qN) is z C / (q N)."""
    from fl.training.user_updates import noisy_mean

    total = {"w": torch.full((200_000,), 3.0, dtype=torch.float64)}
    out = noisy_mean(total, 1.5, 0.5, 100.0, torch.Generator().manual_seed(0))["w"]
    assert float(out.mean()) == pytest.approx(0.03, abs=5 * 0.0075 / 200_000**0.5)
    assert float(out.std()) == pytest.approx(1.5 * 0.5 / 100.0, rel=0.01)
    assert abs(float(out.std()) - 1.5 * 0.4 / 100.0) > 0.05 * 0.006  # power: a wrong clip is told apart
