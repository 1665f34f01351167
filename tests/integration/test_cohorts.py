"""A class-means run over two disjoint cohorts (``cohorts = 2``, fl.maps.cohorts), end to end: each user asked
once and charged once (the whole-record epsilon, not twice it), the two rounds' cohorts disjoint and covering
every training user, the first cohort releasing at ``cohort-map-dim`` and the last at ``map-dim``, the test users
asked once (after the last cohort), and the refusals of what cannot apply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fl import config as config_mod
from simulations.runtime.api import launch
from tests.support.runs import SMALL_RUN

COHORTS = {
    **SMALL_RUN,
    "train-size": 240,
    "public-fraction": 0.4,
    "clean-evaluation": True,
    "map-in": "projection",
    "map-dim": 4,
    "cohort-map-dim": 8,
    "sentence-mechanism": "privunit",
    "sentence-options": "unbiased = true",
    "sentence-epsilon": 4.0,
    "label-mechanism": "rr",
    "label-epsilon": 2.0,
    "server-model": "class-means",
    "class-means-covariance": "releases",
    "cohorts": 2,
    "num-server-rounds": 2,
    "fraction-train": 1.0,
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, cache_dir: Path) -> tuple[dict[str, Any], list]:
    mp = pytest.MonkeyPatch()
    mp.setenv("SANITAS_DATA_DIR", str(data_dir))
    mp.setenv("SANITAS_CACHE_DIR", str(cache_dir))
    try:
        cfg = config_mod.resolve({**COHORTS, "out-dir": str(tmp_path_factory.mktemp("cohorts")), "run-name": "c"})
        folder = launch(cfg, verbose=False)
    finally:
        mp.undo()
    summary = json.loads((folder / "summary.json").read_text())
    rounds = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    return summary, rounds


def test_each_user_releases_once_in_one_cohort_and_the_test_users_once(run: tuple[dict[str, Any], list]) -> None:
    summary, rounds = run
    users = summary["data"]["train_documents"]
    first, last = rounds
    assert first["sampled_users"] + last["sampled_users"] == users  # disjoint cohorts covering every user
    assert first["fresh_train_releases"] + last["fresh_train_releases"] == users
    assert first["accuracy"] is None and first["fresh_test_releases"] == 0  # no test release for a step
    assert last["accuracy"] is not None and last["fresh_test_releases"] > 0
    assert last["privacy"]["epsilon_total"] == pytest.approx(4.0 + 2.0)  # charged once: the whole record


def test_the_last_cohort_fits_in_map_dim_and_is_scored_on_the_device(run: tuple[dict[str, Any], list]) -> None:
    summary, _ = run
    on_device = summary["outcome"]["on_device"]
    assert 0.0 <= on_device["accuracy"] <= 1.0
    # the class-means head of public statistics in a map aimed by cohort 1's releases is not public-only: not a line
    assert set(on_device["public_only_models"]) == {"logistic_regression"}


@pytest.mark.parametrize(
    ("keys", "names"),
    [
        ({"num-server-rounds": 3}, "num-server-rounds = 2"),
        ({"map-in": "random"}, 'map-in = "projection"'),
        ({"fraction-train": 0.5}, "fraction-train = 1"),
        ({"server-model": "mlp"}, 'server-model = "class-means"'),
        ({"cohorts": 1}, "cohort-map-dim = 8 sizes the earlier cohorts"),
        ({"cohorts": 1, "cohort-map-dim": 0, "server-model": "mlp"}, "class-means-covariance = 'releases'"),
    ],
)
def test_what_cannot_apply_is_refused_in_one_line(keys: dict[str, Any], names: str) -> None:
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.resolve({**COHORTS, **keys})
    assert names in str(err.value) and len(str(err.value)) <= 200 and "\n" not in str(err.value)


def test_compare_puts_the_local_protocol_keys_back_for_the_central_side() -> None:
    """A local config with cohorts and the public projection compares as it is: the central runs get the identity
    map, cohorts = 1, cohort-map-dim = 0 and class-means-covariance = "public" (which central mode would refuse
    otherwise), unless --central-set says."""
    from simulations.drivers.compare_plan import local_only_resets

    cfg = config_mod.resolve(COHORTS)
    resets = ['map-in="identity"', "cohorts=1", "cohort-map-dim=0", 'class-means-covariance="public"']
    assert local_only_resets(cfg, []) == resets
    assert local_only_resets(cfg, ["cohorts=1", 'map-in="random"']) == resets[2:]
    central = {**COHORTS, "mode": "central", "central-unit": "user"}
    for item in local_only_resets(cfg, []):
        key, value = item.split("=", 1)
        central[key] = config_mod.parse_value(value)
    config_mod.resolve(central)  # accepted once reset
    assert local_only_resets(config_mod.resolve({**SMALL_RUN}), []) == []
