"""The public-only line end to end: a local class-means run and a central run from the public start, on the
same public data and test users, each held against the model fitted on that public data alone.

What it would catch: a public-only figure scored on other test inputs than the run's (the two modes' clean
public-only accuracies of the public logistic regression must be the same number: the same model on the same
clean test users), a gain that is not the difference of the run's accuracy and the stronger public-only model
on its inputs, an on-device block without the public server model scored on the clean inputs, an on-device
block missing from a local run that scored clean inputs, and a central start that ignored
central-start = "public"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fl import config as config_mod
from simulations.runtime.api import launch
from tests.support.runs import SMALL_RUN

PUBLIC = {**SMALL_RUN, "train-size": 240, "public-fraction": 0.4, "clean-evaluation": True, "num-server-rounds": 1}
LOCAL = {
    **PUBLIC,
    "map-in": "projection",
    "map-dim": 8,
    "sentence-mechanism": "privunit",
    "sentence-options": "unbiased = true",
    "sentence-epsilon": 4.0,
    "label-mechanism": "rr",
    "label-epsilon": 2.0,
    "server-model": "class-means",
    "fraction-train": 1.0,
}
CENTRAL = {
    **PUBLIC,
    "mode": "central",
    "central-unit": "user",
    "map-in": "identity",
    "central-cohort-size": 20.0,
    "central-noise-multiplier": 1.0,
    "central-start": "public",
    "num-server-rounds": 2,
}


def _run(cfg: dict[str, Any], tmp_path: Path, name: str) -> dict[str, Any]:
    import json

    folder = launch(config_mod.resolve({**cfg, "out-dir": str(tmp_path), "run-name": name}), verbose=False)
    return json.loads((folder / "summary.json").read_text())


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, cache_dir: Path) -> dict[str, Any]:
    mp = pytest.MonkeyPatch()
    mp.setenv("SANITAS_DATA_DIR", str(data_dir))
    mp.setenv("SANITAS_CACHE_DIR", str(cache_dir))
    tmp = tmp_path_factory.mktemp("public-only")
    try:
        return {"local": _run(LOCAL, tmp, "local"), "central": _run(CENTRAL, tmp, "central")}
    finally:
        mp.undo()


def test_a_local_run_is_held_against_public_only_on_both_test_inputs(summaries: dict[str, Any]) -> None:
    s = summaries["local"]
    block, final = s["outcome"], s["final"]
    assert block["test_inputs"] == "sanitized"
    assert block["gain_over_public"] == pytest.approx(final["accuracy"] - block["public_only_accuracy"])
    assert set(block["public_only_models"]) == {"server_model"}  # the class means of the public data alone
    device = block["on_device"]
    assert device["test_inputs"] == "clean" and device["accuracy"] == pytest.approx(final["clean_accuracy"])
    # on the clean inputs both public-only models were scored, and the line is the stronger of them
    models = device["public_only_models"]
    assert set(models) == {"logistic_regression", "server_model"}
    assert device["public_only_accuracy"] == pytest.approx(max(models.values()))
    assert device["gain_over_public"] == pytest.approx(device["accuracy"] - device["public_only_accuracy"])
    assert 0.5 < models["logistic_regression"] <= 1.0  # the public logistic regression learned something
    assert s["noise"]["secret"] is False and "reproducible" in s["guarantee_statement"]  # SMALL_RUN seeds it


def test_a_central_run_starts_from_the_public_data_and_meets_the_same_public_only_line(
    summaries: dict[str, Any],
) -> None:
    central, local = summaries["central"], summaries["local"]
    assert "fitted on the" in central["start"] and "central-start = public" in central["start"]
    block = central["outcome"]
    assert block["test_inputs"] == "clean" and "on_device" not in block
    # the same public logistic regression on the same clean test users, whichever mode scored it
    assert set(block["public_only_models"]) == {"logistic_regression"}
    device = local["outcome"]["on_device"]["public_only_models"]
    assert block["public_only_accuracy"] == pytest.approx(device["logistic_regression"])
    assert block["gain_over_public"] == pytest.approx(central["final"]["accuracy"] - block["public_only_accuracy"])


def test_on_device_scores_by_sentences_need_no_public_model(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """A document task (sentence-mean embeddings) with on-device inference and no public data: the clean
    scores per number of sentences are there (they once hung off the public model's branch)."""
    import json

    mp = pytest.MonkeyPatch()
    mp.setenv("SANITAS_DATA_DIR", str(data_dir))
    mp.setenv("SANITAS_CACHE_DIR", str(cache_dir))
    try:
        cfg = {**SMALL_RUN, "doc-embedding": "sentence-mean", "clean-evaluation": True, "num-server-rounds": 1}
        folder = launch(config_mod.resolve({**cfg, "out-dir": str(tmp_path), "run-name": "by-k"}), verbose=False)
    finally:
        mp.undo()
    last = json.loads((folder / "rounds.jsonl").read_text().splitlines()[-1])
    assert last["public_only_clean_accuracy"] is None  # no public data: no public model sent
    assert last["public_only_head_clean_accuracy"] is None
    assert last["by_sentences"] and all("clean_macro_f1" in row for row in last["by_sentences"])
