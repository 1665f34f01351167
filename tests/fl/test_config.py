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
    assert comps == {"serverapp": "strategies.server_app:app", "clientapp": "clients.ldp_client:app"}


def test_quickstart_config_resolves() -> None:
    cfg = config.resolve(config.load_toml(REPO / "simulations" / "quickstart.toml") | {"data-dir": ""})
    assert cfg["dataset"] == "sst2" and cfg["sentence-mechanism"] == "purkayastha"


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
