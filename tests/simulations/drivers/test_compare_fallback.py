"""The server of a public-only fallback point (simulations.drivers.compare_fallback): it asks and charges the users
as any local run does and ships the class-means model of the public statistics alone, the run's own public-only
class-means model."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from fl import config
from fl.maps import class_means
from simulations.drivers.compare_fallback import FALLBACK_STRATEGY, PublicOnly
from strategies.local.release_training import ReleaseTraining

KEYS = {
    "public-fraction": 0.25,
    "map-in": "projection",
    "map-dim": 4,
    "sentence-mechanism": "privunit",
    "sentence-options": "unbiased = true",
    "sentence-epsilon": 3.0,
    "label-mechanism": "rr",
    "label-epsilon": 1.0,
    "server-model": "class-means",
}


def _ready(server: ReleaseTraining, cfg: config.RunConfig) -> ReleaseTraining:
    """``server`` as discovery leaves it for a class-means fit at m' = 4 over 3 classes: its mechanisms, the public
    statistics of 60 public rows and a fresh head."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 20)
    u = rng.standard_normal((60, 4)) + np.eye(3, 4)[y] * 2
    server.info = SimpleNamespace(num_classes=3, map_dim=4, release_dim=4)  # type: ignore[assignment]
    server.channels = SimpleNamespace(  # type: ignore[assignment]
        embedding=SimpleNamespace(mechanism=config.make_mechanism(cfg, "sentence", input_dim=4, num_classes=3)),
        label=SimpleNamespace(mechanism=cfg.release.mechanism("label")),
    )
    server.public_stats = class_means.public_statistics(u, y, 3)
    server.model = class_means.LinearHead(4, 3)
    return server


def test_the_fallback_server_fits_no_release_and_ships_the_public_only_class_means_model() -> None:
    """Fitted on 300 releases, the fallback's head is the class-means fit of no release (the public statistics'
    discriminant, what ``setup_public_only`` holds the run against), and its round record says how many releases
    it set aside; Sanitas' own server fits on them and ships another model (power). Loaded by the run config's
    ``strategy`` it is a ReleaseTraining subclass (trained on the server, wrapped in the accounting like any)."""
    from strategies.loading import check_strategy

    cfg = config.resolve(KEYS)
    rng = np.random.default_rng(1)
    z, labels = rng.standard_normal((300, 4)) / 2, rng.integers(0, 3, 300)
    fallback = _ready(PublicOnly(cfg), cfg)
    fallback.fit_class_means(z, labels)
    assert fallback.public_stats is not None
    public = class_means.fit(np.zeros((0, 4)), np.zeros(0, np.int64), np.eye(3), 1.0, fallback.public_stats)
    shipped = fallback.model.state_dict()  # type: ignore[union-attr]
    np.testing.assert_allclose(shipped["linear.weight"].numpy(), public.weight, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(shipped["linear.bias"].numpy(), public.bias, rtol=1e-6, atol=1e-6)
    assert fallback.train_info["public_only_fallback"] == {"releases_set_aside": 300}
    own = _ready(ReleaseTraining(cfg), cfg)
    own.fit_class_means(z, labels)
    assert not np.allclose(own.model.state_dict()["linear.weight"].numpy(), public.weight)  # type: ignore[union-attr]
    choice = check_strategy(cfg.replace(**{"strategy": FALLBACK_STRATEGY}))
    assert choice is not None and choice.role == "release" and choice.target is PublicOnly


def test_the_fallback_server_refuses_a_server_model_it_cannot_ship() -> None:
    with pytest.raises(ValueError, match='needs server-model = "class-means"'):
        PublicOnly(config.resolve({**KEYS, "server-model": "mlp"}))


def test_a_fallback_beside_a_strategy_of_ones_own_is_refused_in_one_line() -> None:
    """The fallback's server would silently replace the user's Flower strategy for that point: refused instead."""
    from fl import config
    from simulations.drivers.compare_recipes import Recipe

    fallback = Recipe(0.35, 16, fallback=True)
    plain = config.resolve({"public-fraction": 0.25})
    assert fallback.keys(plain)["strategy"].endswith(":PublicOnly")
    with pytest.raises(config.ConfigError, match="replaces strategy = 'FedAvg'") as err:
        fallback.keys(config.resolve({"public-fraction": 0.25, "strategy": "FedAvg"}))
    assert len(str(err.value)) <= 200 and "\n" not in str(err.value)
    assert Recipe(0.35, 16).keys(config.resolve({"public-fraction": 0.25, "strategy": "FedAvg"})) == {}
