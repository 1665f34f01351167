"""secure-rng: every generator of a run is seeded from the OS CSPRNG, and a fixed noise-seed is refused."""

from __future__ import annotations

import random

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord

from fl import config
from strategies.central_node import CentralFedAvg
from strategies.local.release_training import ReleaseTraining
from tests.support.grids import FakeGrid
from tests.support.ledger_nodes import NODES, ledger_cfg


def test_secure_rng_refuses_a_fixed_noise_seed() -> None:
    with pytest.raises(config.ConfigError, match="secure-rng = true .* remove noise-seed"):
        config.resolve({"secure-rng": True, "noise-seed": 3})
    assert config.resolve({"secure-rng": True})["noise-seed"] == -1


def test_server_sampling_comes_from_the_os_not_from_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without secure-rng two servers with one seed sample the same users; with it they differ, and
    the OS secret (secrets.randbits) is what decides."""
    grid = FakeGrid(NODES)
    plain = [ReleaseTraining(ledger_cfg(**{"fraction-train": 0.5})) for _ in range(2)]
    for s in plain:
        s.discover(grid)  # type: ignore[arg-type]
    assert all(np.array_equal(plain[0].sample_users(r), plain[1].sample_users(r)) for r in range(1, 6))

    draws = iter([11, 11, 12])
    monkeypatch.setattr("strategies.local.release_training.secrets.randbits", lambda bits: next(draws))
    secure = [ReleaseTraining(ledger_cfg(**{"fraction-train": 0.5, "secure-rng": True})) for _ in range(3)]
    for s in secure:
        s.discover(grid)  # type: ignore[arg-type]
    same = [np.array_equal(secure[0].sample_users(r), secure[1].sample_users(r)) for r in range(1, 9)]
    other = [np.array_equal(secure[0].sample_users(r), secure[2].sample_users(r)) for r in range(1, 9)]
    assert all(same) and not all(other)  # equal OS secrets agree; a different one (12) does not


def test_central_node_sampling_avoids_pythons_mersenne_twister(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flower's sample_nodes uses random.sample; with secure-rng the k nodes come from SystemRandom."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("random.sample (Mersenne Twister) was used")

    monkeypatch.setattr(random, "sample", refuse)
    grid = FakeGrid(NODES)
    strategy = CentralFedAvg(NODES, 1, 2, secure_rng=True)
    chosen = set()
    for r in range(1, 41):
        messages = list(strategy.configure_train(r, ArrayRecord(), ConfigRecord(), grid))  # type: ignore[arg-type]
        assert len(messages) == 1 and messages[0].content["config"]["server-round"] == r
        chosen.add(messages[0].metadata.dst_node_id)
    assert chosen == set(NODES)  # both nodes drawn in 40 rounds (fails by chance with p = 2^-39)
    with pytest.raises(AssertionError, match="Mersenne"):
        list(CentralFedAvg(NODES, 1, 2).configure_train(1, ArrayRecord(), ConfigRecord(), grid))  # type: ignore[arg-type]


def test_node_noise_secret_is_from_the_os(monkeypatch: pytest.MonkeyPatch) -> None:
    from flwr.app import Context, RecordDict

    from clients.node import noise_secret

    monkeypatch.setattr("fl.release.state.secrets.randbits", lambda bits: 987654321)
    ctx = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    cfg = config.resolve({"secure-rng": True})
    assert int(noise_secret(ctx, cfg.release)["secret"]) == 987654321


def _secure_run(tmp_path: object, name: str, **keys: object) -> dict:
    """test_scope's small synthetic run, two rounds, with secure-rng."""
    from tests.fl.accounting.test_scope import _run

    return _run(tmp_path, name, **{"num-server-rounds": 2, "secure-rng": True, **keys})  # type: ignore[arg-type]


def test_a_secure_run_draws_its_noise_from_chacha20_and_says_so(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Local mode (sentence and label mechanisms) and user-level central mode (server noise, the nodes'
    keystream sampling) run with secure-rng; the summary and the guarantee line name ChaCha20. Every
    node draw comes from a SecureGenerator: the plain torch path of the node's generator is refused."""
    from fl.release.state import NodeState
    from mechanisms.keystream import SecureGenerator

    plain = NodeState.next_generator

    def only_secure(self: NodeState, noise_seed: int, purpose: str, partition_id: int, secure: bool = False):
        gen = plain(self, noise_seed, purpose, partition_id, secure)
        assert isinstance(gen, SecureGenerator), "a node drew from torch's generator under secure-rng"
        return gen

    monkeypatch.setattr(NodeState, "next_generator", only_secure)
    local = _secure_run(tmp_path, "local", **{"label-mechanism": "rr", "label-epsilon": 1.0})
    assert local["noise"]["generator"] == "ChaCha20" and local["noise"]["secure_rng"] is True
    assert "ChaCha20" in local["guarantee_statement"]
    central = _secure_run(tmp_path, "central", **{"mode": "central", "central-noise-multiplier": 1.0})
    assert central["noise"]["generator"] == "ChaCha20" and "ChaCha20" in central["guarantee_statement"]


def test_node_level_central_refuses_secure_rng() -> None:
    """Flower's DP-FedAvg wrapper adds numpy-generated noise: node level cannot honour secure-rng."""
    with pytest.raises((config.ConfigError, ValueError), match="secure-rng = true with central-unit = 'node'"):
        config.validate(config.resolve({"secure-rng": True, "mode": "central", "central-unit": "node"}))


def test_secure_poisson_coins_are_counter_based_and_have_their_law() -> None:
    """A user's coin is the keystream word at its id: the same whichever ids are asked with it; the
    sampled fraction is Binomial(n, q)."""
    import torch
    from scipy import stats

    from fl.training.user_updates import poisson_sample

    key = bytes(range(32))
    ids = torch.arange(0, 40_000)
    picked = poisson_sample(key, 3, ids, 40_000, 0.3)
    assert torch.equal(poisson_sample(key, 3, ids[1000:2000], 40_000, 0.3), picked[1000:2000])
    assert not torch.equal(poisson_sample(key, 4, ids, 40_000, 0.3), picked)
    assert stats.binomtest(int(picked.sum()), 40_000, 0.3).pvalue > 1e-4
    assert stats.binomtest(int(picked.sum()), 40_000, 0.32).pvalue < 1e-4  # power at this n
