"""``sanitas compare`` at the word, document and label levels (simulations.drivers.compare_levels): every local
point at its mechanism's unit and per user, the per-user figure recomputed here from the users' own unit counts."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fl import config as config_mod
from simulations.drivers import compare_levels as levels
from simulations.drivers.grid import Run
from simulations.drivers.inputs import RunInputs
from simulations.drivers.runner import resolve_run

EXPERIMENTS = Path(__file__).resolve().parents[3] / "simulations" / "experiments"


def _cfg(name: str, *sets: str) -> config_mod.RunConfig:
    return config_mod.as_run_config(resolve_run(str(EXPERIMENTS / name), Run("probe", {}, {}), list(sets), Path(".")))


def _independent(train_k: list[int], test_k: list[int], per_unit_whole: Any, label: float | None) -> float:
    """Group privacy of the worst user, written out from the counts: a training user's k units and its label, a
    test user's k units (no label)."""
    worst_train = max(per_unit_whole(k) + (math.inf if label is None else label) for k in train_k)
    worst_test = max(per_unit_whole(k) for k in test_k)
    return max(worst_train, worst_test)


def test_word_level_per_user_figures_are_group_privacy_over_each_users_words(offline_env: None) -> None:
    """sst2_words at 300 users: per point, the maximum over the users of (words x epsilon x the vocabulary's
    diameter, plus the label's epsilon for a training user), counted here with the rewrite's own tokenizer; the
    median over the users too; labels in the clear give an unbounded figure. Power: the worst user's count is not
    the median's (the maximum is no median), and a label left out would move the figure by 2."""
    from mechanisms.tokenize import tokenize

    cfg = _cfg("sst2_words.toml", "train-size=300", "test-size=100", "word-quality-docs=0")
    ds = RunInputs(cfg).dataset
    plan = levels.build_level_plan(cfg, "word", [0.05, 1.0], 2.0, True, {1: ds}, 2)
    train_k = [len(tokenize(t)[0]) for t in ds.train["text"]]
    test_k = [len(tokenize(t)[0]) for t in ds.test["text"]]
    diameter = cfg.release.mechanism("word").guarantee.diameter
    assert diameter and diameter > 1
    assert max(train_k + test_k) > 2 * float(np.median(train_k + test_k))  # the maximum is not the median
    for i, keys in enumerate(plan.points):
        eps, label = keys["word-epsilon"], levels.point_label_epsilon(keys)
        got = plan.point_figures(i)
        expected = _independent(train_k, test_k, lambda k, e=eps: k * e * diameter, label)
        if label is None:
            assert got["per_user_epsilon"] == math.inf and got["labels"] == "in the clear"
            continue
        assert math.isclose(got["per_user_epsilon"], expected, rel_tol=1e-9), (keys, got, expected)
        every = [k * eps * diameter + label for k in train_k] + [k * eps * diameter for k in test_k]
        assert math.isclose(got["per_user_epsilon_median"], float(np.median(every)), rel_tol=1e-9)
        assert got["unit_pure_epsilon"] == pytest.approx(eps * diameter)
    vacuous = [plan.point_figures(i)["per_user_vacuous"] for i in range(len(plan.points))]
    assert vacuous == [False, True, True, True]  # 0.05 x D x the longest phrase stays under 64; 1 per word does not
    assert plan.central_targets == [float(f"{plan.point_figures(0)['per_user_epsilon']:.6g}")]


@pytest.mark.parametrize(("mechanism", "per_sentence"), [("deepcandidate", 0.5), ("truncation", 1.0)])
def test_document_level_per_user_figures_are_group_privacy_over_each_documents_sentences(
    offline_env: None, mechanism: str, per_sentence: float
) -> None:
    """imdb_documents at 200 reviews: the worst user's sentences times epsilon / 2 (DeepCandidate, Meehan et al.'s
    k/2) or times epsilon (truncation), plus the label's, counted here with the level's sentence splitter on the
    documents the level keeps (2 sentences or more)."""
    from fl.data.sentences import split_sentences

    cfg = _cfg("imdb_documents.toml", "train-size=200", "test-size=60", f'document-mechanism="{mechanism}"')
    ds = RunInputs(cfg).dataset
    plan = levels.build_level_plan(cfg, "document", [3.0], 1.5, False, {1: ds}, 2)
    train_k = [len(split_sentences(t)) for t in ds.train["text"]]
    test_k = [len(split_sentences(t)) for t in ds.test["text"]]
    assert min(train_k + test_k) >= 2
    expected = _independent(train_k, test_k, lambda k: k * 3.0 * per_sentence, 1.5)
    got = plan.point_figures(0)
    assert math.isclose(got["per_user_epsilon"], expected, rel_tol=1e-12), (got, expected)
    assert got["unit"] == "sentence" and got["unit_pure_epsilon"] == 3.0 and "per sentence" in got["unit_guarantee"]
    assert plan.units[1].distribution()["max"] == max(train_k + test_k)


def test_a_label_only_config_is_compared_at_the_label_level_and_its_per_user_figure_is_unbounded() -> None:
    """Labels alone under randomized response, the embedding in the clear: the unit is the label, and no
    per-user figure is finite."""
    cfg = _cfg("sst2_class_rr_4000.toml", 'sentence-mechanism="none"', "sentence-epsilon=1")
    assert levels.release_level(cfg) == "label"
    units = levels.Units("label", np.ones(5, dtype=np.int64), np.ones(2, dtype=np.int64))
    g = levels.unit_guarantee(cfg.release, "label", 1.0, 2)
    assert g.pure_per_unit == 1.0 and levels.per_user(units, g, 1.0)["epsilon"] == math.inf


def _summary(folder: Path, epsilon_total: float | None, embedding_only: float | None, protected: bool) -> None:
    folder.mkdir(parents=True)
    privacy = {"epsilon_total": epsilon_total, "epsilon_ldp": embedding_only, "label_protected": protected}
    summary = {"final": {"accuracy": 0.7}, "privacy": privacy, "ldp_guarantee_holds": True}
    (folder / "summary.json").write_text(json.dumps(summary))


def test_each_rows_per_user_figure_is_checked_against_the_runs_own_ledger(tmp_path: Path) -> None:
    """The check column says the ledger's figure equals the counts' figure, and names both where they differ.
    Power: a ledger one word-epsilon off is reported as differing."""
    from simulations.drivers import compare_outputs as outputs

    cfg = _cfg("sst2_words.toml")
    units = levels.Units("word", np.array([3, 10]), np.array([12]))
    g = levels.unit_guarantee(cfg.release, "word", 0.5, 2)
    keys = {"word-epsilon": 0.5, "label-mechanism": "rr", "label-epsilon": 2.0}
    plan = levels.LevelPlan("word", [keys], {1: units}, {0.5: g}, {1: [levels.per_user(units, g, 2.0)]}, [])
    right = max(10 * 0.5 * g.pure_per_unit / 0.5 + 2.0, 12 * g.pure_per_unit)
    runs = {}
    for name, total in (("right", right), ("wrong", right + g.pure_per_unit)):
        run = Run(name, {}, {"mode": "local", **keys, "seed": 1}, seed=1)
        _summary(tmp_path / name, total, total - 2.0, True)
        runs[name] = run
    rows = [row for run in runs.values() for row in outputs.rows_for(run, tmp_path)]
    levels.annotate_rows(rows, runs, plan)
    checks = {r["run_name"]: r["per_user_check"] for r in rows if r["series"] == "local-ldp"}
    assert checks["right"] == "the run's ledger prints the figure of the unit counts"
    assert checks["wrong"].startswith("DIFFERS")


@pytest.mark.parametrize(
    ("config", "extra", "message"),
    [
        ("imdb_documents.toml", ["--label-share", "0.1"], "releases at the document level, where --epsilons are"),
        ("quickstart.toml", ["--label-epsilon", "1"], "--label-epsilon sets the labels' epsilon at the word"),
        (
            "sst2_words.toml",
            ["--set", 'map-in="leaky"', "--set", "allow-unaccounted-leakage=true", "--set", "public-size=100"],
            "map-in = 'leaky' sends M1's gradients unsanitized, so the word level's points have no local guarantee",
        ),
        ("imdb_documents.toml", ["--central-trains", "head,encoder"], "--central-trains encoder tunes the encoder"),
        ("sst2_words.toml", ["--set", "word-epsilon=3"], "compare sets the word level's epsilon from --epsilons"),
        ("sst2_words.toml", ["--label-epsilon", "0"], "argument --label-epsilon"),
    ],
)
def test_a_level_compare_cannot_run_is_refused_in_one_line_before_any_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, config: str, extra: list[str],
    message: str,
) -> None:  # fmt: skip
    """One line of at most 200 characters, exit 2, nothing written, no data read."""
    from simulations.cli import main
    from simulations.drivers import compare_plan

    def no_data(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the refusal came after reading data")

    monkeypatch.setattr(compare_plan, "RunInputs", no_data)
    args = ["compare", str(EXPERIMENTS / config), "--epsilons", "8", "--central-epsilons", "4", *extra]
    code = main([*args, "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0] and len(err[0]) <= 200, err
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_a_word_level_compare_runs_and_its_ledgers_print_the_figures_of_the_unit_counts(
    tmp_path: Path, offline_env: None
) -> None:
    """sst2_words at 60 users, one seed: the comparison runs to the end, its table carries both units, and every
    local row's per-user figure is the one its run's ledger printed."""
    import csv

    from simulations.cli import main

    args = ["compare", str(EXPERIMENTS / "sst2_words.toml"), "--epsilons", "0.05", "--central-epsilons", "4"]
    args += ["--seeds", "1", "--set", "train-size=60", "--set", "test-size=30", "--set", "word-quality-docs=0"]
    assert main([*args, "--central-set", "num-server-rounds=2", "--out", str(tmp_path), "--name", "w"]) == 0
    with (tmp_path / "w" / "compare.csv").open() as f:
        points = list(csv.DictReader(f))
    local = [p for p in points if p["series"] == "local-ldp"]
    assert local and local[0]["unit"] == "word" and float(local[0]["per_user_epsilon"]) > 0
    assert local[0]["per_user_check"] == "the run's ledger prints the figure of the unit counts"
    table = (tmp_path / "w" / "gain_over_public.md").read_text()
    assert "per word" in table and "per-user epsilon: max over users" in table


def test_the_level_table_states_both_units_and_marks_vacuous_and_unbounded_figures() -> None:
    """A point above the cap is marked vacuous, one with labels in the clear unbounded, and a central point shows
    its target with its accounted (epsilon, delta). Power: a point under the cap carries no mark."""
    from simulations.outputs import level_tables

    base = {"test_inputs": "clean", "accuracy_mean": "0.7", "accuracy_sd": "0.01", "public_only_accuracy": "0.6"}
    base |= {"gain_over_public": "0.1", "gain_over_public_sd": "0.01", "n": "3", "adds_over_public": "true"}
    base |= {"gain_over_public_p": "0.01", "noise_free_ceiling_accuracy": "0.8", "epsilon": "", "delta": ""}
    local = {"series": "local-ldp-on-device", "unit_guarantee": "1-LDP (pure) per sentence", "labels": "epsilon 2"}
    local |= {"per_user_epsilon_median": "10", "per_user_epsilon_p90": "20", "per_user_check": "ok"}
    rows = [
        {**base, **local, "value": "1", "per_user_epsilon": "40"},
        {**base, **local, "value": "3", "per_user_epsilon": "120"},
        {**base, **local, "value": "5", "per_user_epsilon": "inf", "labels": "in the clear"},
        {**base, "series": "central-user", "value": "4", "epsilon": "3.99", "delta": "1e-05"},
    ]
    level = {"level": "document", "unit": "sentence", "per_user_cap": 64.0, "per_user_covers": "documents"}
    level |= {"units_by_seed": {"1": {"median": 5, "p90": 9, "max": 40, "users": 100}}, "central_at_per_user": [42.0]}
    text = level_tables.table("imdb", "IMDB", rows, {"level": level, "users_by_seed": {"1": 100}})
    lines = [line for line in text.splitlines() if line.startswith("| local DP")]
    assert "40 (median 10, p90 20) |" in lines[0] and "vacuous" not in lines[0]
    assert "120 (median 10, p90 20) **vacuous (> 64)**" in lines[1]
    assert "unbounded (labels in the clear)" in lines[2]
    assert "| 4 (3.99, 1e-05) |" in text and "central points at the per-user figures 42" in text
