"""A mistyped name gets the closest known one: config keys and choices, mechanisms, subcommands, option lists."""

from __future__ import annotations

import pytest

import mechanisms
from fl import config
from mechanisms.suggest import did_you_mean
from simulations import cli


@pytest.mark.parametrize(
    ("overrides", "hint"),
    [
        ({"sentence-epsilom": 3.0}, "unknown config key 'sentence-epsilom'; did you mean 'sentence-epsilon'?"),
        ({"mode": "centrl"}, "got 'centrl'; did you mean 'central'?"),
        ({"sentence-mechanism": "purkayastah"}, "did you mean 'purkayastha'?"),
    ],
)
def test_a_mistyped_config_name_gets_the_closest_one(overrides: dict, hint: str) -> None:
    with pytest.raises(config.ConfigError) as err:
        config.resolve(overrides)
    assert hint in str(err.value) and "\n" not in str(err.value)


def test_a_far_name_gets_no_guess_and_no_key_dump() -> None:
    with pytest.raises(config.ConfigError) as err:
        config.resolve({"wallpaper": "red"})  # far from every key ('colour' is near 'cohorts')
    assert str(err.value) == "unknown config key 'wallpaper'; `sanitas config-reference` lists every key"
    assert did_you_mean("zzzz", ["sentence-epsilon"]) == ""


def test_mechanisms_and_subcommands_and_option_lists(capsys: pytest.CaptureFixture, tmp_path) -> None:
    with pytest.raises(ValueError, match="did you mean 'planar_laplace'"):
        mechanisms.mechanism_class("planar_laplce")
    assert cli.main(["compar"]) == 2
    assert "did you mean 'compare'?" in capsys.readouterr().err
    assert cli.main(["attack", str(tmp_path), "--attacks", "inversoin"]) == 2
    assert "did you mean 'inversion'?" in capsys.readouterr().err
