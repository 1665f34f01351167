"""Run config: one source of defaults, clear errors naming the key."""

from __future__ import annotations

import math
import tomllib

import pytest

from fl import config
from tests.conftest import REPO


def test_pyproject_run_config_matches_defaults() -> None:
    """`flwr run .` and `sanitas run` see the same keys and defaults."""
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert data["tool"]["flwr"]["app"]["config"] == config.DEFAULTS
    comps = data["tool"]["flwr"]["app"]["components"]
    assert comps == {"serverapp": "strategies.server_app:app", "clientapp": "clients.app:app"}


def test_every_key_is_in_exactly_one_section() -> None:
    keys = [key for section in config.SECTIONS.values() for key in section]
    assert sorted(keys) == sorted(config.DEFAULTS)
    cfg = config.resolve({"node-cpus": 2, "ray-address": "auto"})
    assert cfg.simulation.node_cpus == 2.0 and cfg["node-gpus"] == -1.0 and cfg.simulation.ray_address == "auto"
    assert (
        config.resolve({"ray-address": "head-0.cluster:6379", "node-gpus": 0.0})["ray-address"] == "head-0.cluster:6379"
    )


def test_quickstart_config_resolves() -> None:
    cfg = config.resolve(config.load_toml(REPO / "simulations" / "experiments" / "quickstart.toml") | {"data-dir": ""})
    assert cfg["dataset"] == "sst2" and cfg["sentence-mechanism"] == "privunit" and cfg["label-mechanism"] == "rr"
    assert cfg["public-split"] == "source" and cfg["public-size"] == 200 and cfg["server-model"] == "class-means"
    assert cfg["noise-seed"] == -1  # each node's noise is secret: the guarantee holds against the server
    assert cfg["sentence-epsilon"] + cfg["label-epsilon"] == pytest.approx(6.28)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"sentence-epsilon": 0.0}, "sentence-mechanism 'purkayastha'.*epsilon must be > 0"),
        ({"sentence-epsilon": math.nan}, "epsilon must be > 0 and finite"),
        ({"sentence-epsilon": math.inf}, "epsilon must be > 0 and finite"),
        ({"label-mechanism": "rr", "label-epsilon": -1.0}, "label-mechanism 'rr'"),
        ({"sentence-mechanism": "gauss"}, "unknown mechanism 'gauss'"),
        ({"sentence-mechanism": "rr"}, "is a label-level mechanism"),
        ({"colour": "red"}, "unknown config key 'colour'"),
        ({"map-in": "learned"}, "map-in must be one of"),
        ({"num-server-rounds": 0}, "num-server-rounds must be >= 1"),
        ({"fraction-train": 1.5}, "fraction-train"),
        ({"train-size": "many"}, "train-size must be an integer"),
        ({"data-dir": "/no/such/folder"}, "data-dir '/no/such/folder' does not exist"),
        ({"word-mechanism": "cmp"}, 'releases the embedding of the rewritten text.*sentence-mechanism = "none"'),
        ({"word-mechanism": "cmp", "sentence-mechanism": "none", "mode": "central"}, "cannot be combined"),
        ({"word-mechanism": "glove", "sentence-mechanism": "none"}, "unknown mechanism 'glove'"),
        ({"word-mechanism": "purkayastha", "sentence-mechanism": "none"}, "is a sentence-level mechanism"),
        ({"word-mechanism": "cmp", "sentence-mechanism": "none", "word-epsilon": -2.0}, "word-mechanism 'cmp'"),
        (
            {"word-mechanism": "cmp", "sentence-mechanism": "none", "word-options": "speed = 2"},
            "bad parameters for mechanism 'cmp'",
        ),
        ({"word-quality-docs": -1}, "word-quality-docs must be >= 0"),
        ({"node-cpus": 0.0}, "node-cpus .*must be >= 0.0001 and finite"),
        ({"node-cpus": math.inf}, "node-cpus .*must be >= 0.0001 and finite"),
        ({"node-gpus": -0.5}, r"node-gpus must be -1 \(auto"),
        ({"node-gpus": 0.00001}, "node-gpus must be -1"),
        ({"ray-address": "ray://10.0.0.5:10001"}, 'ray-address must be "".*got \'ray://'),
        ({"ray-address": "10.0.0.5"}, "ray-address must be"),
        ({"ray-address": "head:99999"}, "ray-address must be"),
        ({"ray-address": ":6379"}, "ray-address must be"),
    ],
)
def test_bad_config_is_refused_with_a_clear_message(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config.resolve(overrides)


def test_parse_value() -> None:
    assert config.parse_value("3") == 3
    assert config.parse_value("2.5") == 2.5
    assert config.parse_value("true") is True
    assert config.parse_value('"rr"') == "rr"
    assert config.parse_value("rr") == "rr"


def test_word_level_config_resolves_and_counts_as_a_protected_embedding() -> None:
    cfg = config.resolve(
        {
            "word-mechanism": "trlaplace",
            "word-epsilon": 20.0,
            "sentence-mechanism": "none",
            "label-mechanism": "rr",
            "max-epsilon": 500.0,
            "word-options": "vocab_size = 1000",
        }
    )
    mech = config.make_mechanism(cfg, "word")
    assert mech.level == "word" and mech.epsilon == 20.0 and mech.space.num_words == 1000
    # Without the word mechanism the budget refuses an embedding in the clear.
    with pytest.raises(ValueError, match="sentence-mechanism is 'none'"):
        config.resolve({"sentence-mechanism": "none", "label-mechanism": "rr", "max-epsilon": 500.0})
