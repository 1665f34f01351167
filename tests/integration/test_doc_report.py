"""report-documents: macro-F1 vs epsilon and vs k from a sweep folder (Meehan et al. Fig. 4)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from simulations.cli import main


def _run(folder: Path, name: str, mechanism: str | None, epsilon: float | None, f1: float) -> dict:
    run = folder / name
    run.mkdir(parents=True)
    buckets = [
        {"k": "2-3", "k_min": 2, "documents": 10, "macro_f1": f1 - 0.1, "random_guess_f1": 0.5},
        {"k": "10-14", "k_min": 10, "documents": 5, "macro_f1": f1 + 0.1, "random_guess_f1": 0.52},
    ]
    (run / "summary.json").write_text(json.dumps({"final": {"by_sentences": buckets}}))
    return {
        "status": "ok",
        "run_name": name,
        "results_folder": str(run),
        "dataset": "imdb",
        "level": "document" if mechanism else "sentence",
        "document_mechanism": mechanism,
        "epsilon": epsilon,
        "macro_f1": f1,
        "accuracy": f1,
        "random_guess_f1": 0.5,
    }


def test_report_writes_both_plots_and_tables(tmp_path: Path) -> None:
    rows = [_run(tmp_path, f"dc{e}", "deepcandidate", e, 0.5 + e / 100) for e in (3, 6, 10, 23)]
    rows += [_run(tmp_path, "trunc10", "truncation", 10.0, 0.5), _run(tmp_path, "none", None, None, 0.85)]
    (tmp_path / "sweep.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["report-documents", str(tmp_path), "--epsilon", "10"]) == 0
    for name in ("f1_vs_epsilon", "f1_vs_sentences"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000
    by_eps = list(csv.DictReader((tmp_path / "f1_vs_epsilon.csv").open()))
    assert len(by_eps) == 6 and {r["mechanism"] for r in by_eps} == {"deepcandidate", "truncation", "none"}
    assert [r["epsilon"] for r in by_eps if r["mechanism"] == "none"] == [""]
    by_k = list(csv.DictReader((tmp_path / "f1_vs_sentences.csv").open()))
    # epsilon = 10 only (deepcandidate, truncation) plus the non-private run, two buckets each
    assert len(by_k) == 6 and {r["run"] for r in by_k} == {
        "imdb deepcandidate",
        "imdb truncation",
        "imdb none (non-private)",
    }
    assert float(
        next(r for r in by_k if r["run"] == "imdb deepcandidate" and r["k"] == "10-14")["macro_f1"]
    ) == pytest.approx(0.7)


def test_report_without_a_sweep_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report-documents", str(tmp_path)]) == 2
    assert "sweep.jsonl" in capsys.readouterr().err


def test_report_averages_the_seeds_of_a_point(tmp_path: Path) -> None:
    """A sweep with --seeds: one table row per grid point (and per point and k), mean, sample sd and n."""
    rows = []
    for seed, f1 in ((1, 0.6), (2, 0.7), (3, 0.8)):  # mean 0.7, sample sd 0.1
        row = _run(tmp_path, f"document-epsilon=10__seed={seed}", "deepcandidate", 10.0, f1)
        rows.append({**row, "point": "document-epsilon=10", "seed": seed})
    one = _run(tmp_path, "document-mechanism=none__seed=1", None, None, 0.85)
    rows.append({**one, "point": "document-mechanism=none", "seed": 1})
    failed = {"status": "failed", "run_name": "document-mechanism=none__seed=2", "point": "document-mechanism=none"}
    (tmp_path / "sweep.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*rows, failed]))
    assert main(["report-documents", str(tmp_path), "--epsilon", "10"]) == 0
    by_eps = list(csv.DictReader((tmp_path / "f1_vs_epsilon.csv").open()))
    assert [(r["mechanism"], r["n"], r["seeds"], r["one_seed"]) for r in by_eps] == [
        ("deepcandidate", "3", "1 2 3", "false"),
        ("none", "1", "1", "true"),
    ]
    assert float(by_eps[0]["macro_f1"]) == pytest.approx(0.7) and float(by_eps[0]["macro_f1_sd"]) == pytest.approx(0.1)
    assert by_eps[1]["macro_f1_sd"] == "" and float(by_eps[1]["macro_f1"]) == 0.85
    by_k = list(csv.DictReader((tmp_path / "f1_vs_sentences.csv").open()))
    assert [(r["run"], r["k"], r["n"]) for r in by_k] == [
        ("imdb deepcandidate", "2-3", "3"),
        ("imdb deepcandidate", "10-14", "3"),
        ("imdb none (non-private)", "2-3", "1"),
        ("imdb none (non-private)", "10-14", "1"),
    ]
    assert float(by_k[1]["macro_f1"]) == pytest.approx(0.8) and float(by_k[1]["macro_f1_sd"]) == pytest.approx(0.1)
    assert float(by_k[1]["documents"]) == 5
    assert (tmp_path / "f1_vs_epsilon.png").stat().st_size > 10_000


def test_a_word_level_line_is_private_per_word_not_non_private(tmp_path: Path) -> None:
    """The paper's MDP baseline (word-level cmp, document-mechanism = "none") is a line of its own
    against its per-word epsilon, and enters the k breakdown only at the chosen epsilon."""
    rows = [_run(tmp_path, "dc10", "deepcandidate", 10.0, 0.6), _run(tmp_path, "none", None, None, 0.85)]
    for e in (3.0, 10.0):
        word = _run(tmp_path, f"cmp{e:g}", None, e, 0.5 + e / 100)
        rows.append({**word, "level": "word", "word-mechanism": "cmp", "document_mechanism": None})
    (tmp_path / "sweep.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["report-documents", str(tmp_path), "--epsilon", "10"]) == 0
    by_eps = list(csv.DictReader((tmp_path / "f1_vs_epsilon.csv").open()))
    assert [(r["mechanism"], r["epsilon"]) for r in by_eps] == [
        ("deepcandidate", "10.0"),
        ("none", ""),
        ("cmp (per word)", "3.0"),
        ("cmp (per word)", "10.0"),
    ]
    by_k = list(csv.DictReader((tmp_path / "f1_vs_sentences.csv").open()))
    assert {(r["run"], r["epsilon"]) for r in by_k} == {
        ("imdb deepcandidate", "10.0"),
        ("imdb none (non-private)", ""),
        ("imdb cmp (per word)", "10.0"),
    }
