"""``sanitas reproduce``: the registry, the table beside the paper's numbers, and the tiny CI
version of one reproduction run end to end (real ``sanitas run`` jobs on SST-2)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from fl import config
from simulations.cli import main
from simulations.drivers import grid, sweep
from simulations.drivers import reproduce as rp
from simulations.drivers.reproductions import REPRODUCTIONS, get


@pytest.mark.parametrize("name", sorted(REPRODUCTIONS))
def test_every_reproduction_resolves(name: str) -> None:
    rep = get(name)
    assert rep.config_path.is_file()
    # The shared settings are a valid run config (data-dir cleared: a relative path in a spec is read
    # from the working directory, which a test must not depend on).
    config.resolve(config.load_toml(rep.config_path) | {"data-dir": ""})
    keys = {spec.split("=", 1)[0] for block in rep.blocks for spec in block}
    assert rep.x in keys and rep.series in keys
    assert rep.seeds and len(rep.seeds) >= 3  # every committed point has at least three seeds
    assert rep.differences  # an honest reason for every difference is part of the record


def _runs(blocks: tuple[tuple[str, ...], ...], seeds: tuple[int, ...]) -> list[grid.Run]:
    return grid.expand([[grid.parse_grid(spec) for spec in block] for block in blocks], seeds)


@pytest.mark.parametrize("name", sorted(REPRODUCTIONS))
def test_every_grid_point_resolves(name: str, data_dir: Path, tmp_path: Path) -> None:
    """Every run of the full and of the quick grid passes the sweep's own up-front check (no simulation)."""
    rep = get(name)
    sets = [f'data-dir="{data_dir}"']
    runs = _runs(rep.blocks, rep.seeds)
    sweep.check_runs(str(rep.config_path), runs, sets, tmp_path)
    assert rep.quick_blocks and rep.quick_sets  # a tiny CI version exists
    quick = _runs(rep.quick_blocks, (1,))
    sweep.check_runs(str(rep.config_path), quick, [*rep.quick_sets, *sets], tmp_path)
    assert all(rep.series in r.point_values for r in runs)  # every point belongs to a series


@pytest.mark.parametrize("name", sorted(REPRODUCTIONS))
def test_papers_numbers_are_grid_points(name: str) -> None:
    rep = get(name)
    points = {
        (str(r.point_values[rep.series]), float(r.point_values[rep.x]))
        for r in _runs(rep.blocks, (1,))
        if rep.x in r.point_values
    }
    assert set(rep.paper) <= points, sorted(set(rep.paper) - points)
    assert all(0.0 <= v <= 1.0 for v in rep.paper.values())  # fractions, like our metric
    assert rep.paper or rep.paper_note  # a paper without numbers states its claim


def test_unknown_name_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "du2099", "--out", "x"]) == 2
    assert "unknown reproduction 'du2099'; known: du2023-" in capsys.readouterr().err


def test_quick_cannot_write_docs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--quick measures nothing"):
        rp.reproduce("du2023-table2-sst2", str(tmp_path), docs=str(tmp_path / "docs"), quick=True)


def test_table_joins_the_papers_numbers_and_marks_one_seed() -> None:
    rep = get("du2023-table2-sst2")
    points = [
        {"sentence-mechanism": "purkayastha", "map-dim": 16, "status": "ok", "n": 3, "seeds": "1 2 3",
         "accuracy_mean": 0.80, "accuracy_sd": 0.01, "ldp_guarantee_holds": True,
         "max_user_pure_epsilon_embedding": 31.4159},
        {"sentence-mechanism": "none", "map-dim": 384, "status": "ok", "n": 1, "seeds": "1",
         "accuracy_mean": 0.82, "accuracy_sd": None, "ldp_guarantee_holds": True},
    ]  # fmt: skip
    rows = rp.table(rep, points)
    assert rows[0]["paper"] == 0.9243 and rows[0]["ours_minus_paper"] == pytest.approx(0.80 - 0.9243)
    assert rows[1]["paper"] is None  # the paper has no m' = 384 row
    text = rp.markdown(rep, rows, "sanitas reproduce du2023-table2-sst2")
    assert "| purkayastha | 16 | 3 | 0.800 +- 0.010 |" in text and "31.42" in text
    assert "0.820 (one seed)" in text and "Why ours differs" in text


def test_approximate_guarantees_show_their_delta_and_word_rows_their_n_w() -> None:
    rep = get("huang2024-words-sst2")
    points = [
        {"word-mechanism": "trlaplace", "word-epsilon": 1.0, "status": "ok", "n": 3, "seeds": "1 2 3",
         "accuracy_mean": 0.6, "accuracy_sd": 0.01, "ldp_guarantee_holds": True,
         "max_user_pure_epsilon_embedding": 43.0, "delta_total": 1.0, "word_delta": 0.7267, "N_w_mean": 0.5},
        {"word-mechanism": "word_laplace", "word-epsilon": 1.0, "status": "ok", "n": 3, "seeds": "1 2 3",
         "accuracy_mean": 0.55, "accuracy_sd": 0.01, "ldp_guarantee_holds": True,
         "max_user_pure_epsilon_embedding": 43.0, "delta_total": 0.0, "word_delta": 0.0, "N_w_mean": 0.1},
        {"word-mechanism": "word_gaussian", "word-epsilon": 1.0, "status": "ok", "n": 3, "seeds": "1 2 3",
         "accuracy_mean": 0.5, "accuracy_sd": 0.01, "ldp_guarantee_holds": True,
         "max_user_pure_epsilon_embedding": 43.0, "delta_total": 4.3e-4, "word_delta": 1e-5, "N_w_mean": 7.6e-5},
    ]  # fmt: skip
    rows = rp.table(rep, points)
    assert rows[0]["delta_total"] == 1.0 and rows[0]["N_w_mean"] == 0.5
    text = rp.markdown(rep, rows, "sanitas reproduce huang2024-words-sst2")
    assert "per-word delta | N_w |" in text
    assert "| (43.00, 1): vacuous | 0.727 | 0.5 |" in text
    assert "| 43.00 (pure) | 0 | 0.1 |" in text
    assert "| 1e-05 | 7.6e-05 |" in text  # small figures keep their digits


def test_a_word_level_line_beside_document_level_ones_gets_its_own_series_and_x() -> None:
    rep = get("meehan2022-figure4-imdb")
    points = [
        {"document-mechanism": "deepcandidate", "document-epsilon": 10.0, "word-mechanism": None,
         "word-epsilon": None, "status": "ok", "n": 3, "accuracy_mean": 0.7, "accuracy_sd": 0.01},
        {"document-mechanism": "none", "document-epsilon": None, "word-mechanism": None,
         "word-epsilon": None, "status": "ok", "n": 3, "accuracy_mean": 0.8, "accuracy_sd": 0.01},
        {"document-mechanism": "none", "document-epsilon": None, "word-mechanism": "cmp",
         "word-epsilon": 23.0, "status": "ok", "n": 3, "accuracy_mean": 0.6, "accuracy_sd": 0.01},
    ]  # fmt: skip
    rows = rp.table(rep, points)
    assert [(r["series"], r["x"]) for r in rows] == [("deepcandidate", 10.0), ("none", None), ("cmp", 23.0)]
    text = rp.markdown(rep, rows, "sanitas reproduce meehan2022-figure4-imdb")
    assert "| document-mechanism / word-mechanism | document-epsilon / word-epsilon |" in text
    assert "| cmp | 23 | 3 |" in text


def test_quick_reproduction_runs_end_to_end(tmp_path: Path, data_dir: Path) -> None:
    sets = [f'data-dir="{data_dir}"']
    status = rp.reproduce("du2023-table2-sst2", str(tmp_path), seeds="1", sets=sets, quick=True, track=["tensorboard"])
    assert status == 0
    folder = tmp_path / "du2023-table2-sst2-quick"
    # --track tensorboard: each run of the reproduction is a TensorBoard run of its own, in the reproduction's folder.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (board,) = (tmp_path / "tensorboard" / "du2023-table2-sst2-quick").iterdir()
    events = EventAccumulator(str(board))
    events.Reload()
    assert events.Scalars("final/final/accuracy") and board.name in {p.name for p in folder.iterdir()}
    with (folder / "reproduction.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert (row["series"], float(row["x"]), row["n"], float(row["paper"])) == ("purkayastha", 16.0, "1", 0.9243)
    assert 0.0 <= float(row["accuracy_mean"]) <= 1.0
    assert float(row["max_user_pure_epsilon_embedding"]) == pytest.approx(10 * 3.141592653589793)
    assert (folder / "reproduction.png").stat().st_size > 0
    assert "--quick" in (folder / "reproduction.md").read_text()


def test_the_plot_keeps_multi_class_points_in_view() -> None:
    rep = get("huang2024-words-agnews")
    assert rp.y_range(rep, [{"accuracy_mean": 0.8, "accuracy_sd": 0.01}]) == (0.4, 1.0)
    low, high = rp.y_range(
        rep, [{"accuracy_mean": 0.27, "accuracy_sd": 0.02}, {"accuracy_mean": 0.84, "accuracy_sd": None}]
    )
    assert low == pytest.approx(0.20) and high == 1.0


def test_a_document_level_reproduction_also_writes_the_by_sentences_report(tmp_path: Path) -> None:
    """Meehan et al.'s Figure 4 is also by number of sentences: write_report adds report-documents'
    plots and tables (which --docs copies) to the reproduction's own three files."""
    import json

    rep = get("meehan2022-figure4-imdb")
    assert rep.by_sentences_at == 10.0
    run = tmp_path / "document-mechanism=deepcandidate__document-epsilon=10__seed=1"
    run.mkdir()
    bucket = {"k": "4-5", "k_min": 4, "documents": 7, "macro_f1": 0.6, "random_guess_f1": 0.5}
    (run / "summary.json").write_text(json.dumps({"final": {"by_sentences": [bucket]}}))
    point = {"document-mechanism": "deepcandidate", "document-epsilon": 10.0, "status": "ok", "n": 1,
             "accuracy_mean": 0.6, "accuracy_sd": None}  # fmt: skip
    row = {"status": "ok", "level": "document", "document_mechanism": "deepcandidate", "epsilon": 10.0,
           "macro_f1": 0.6, "accuracy": 0.6, "random_guess_f1": 0.5, "seed": 1, "results_folder": str(run),
           "point": "document-mechanism=deepcandidate__document-epsilon=10", "run_name": run.name}  # fmt: skip
    (tmp_path / "sweep_summary.jsonl").write_text(json.dumps(point) + "\n")
    (tmp_path / "sweep.jsonl").write_text(json.dumps(row) + "\n")
    paths = rp.write_report(rep, tmp_path, "sanitas reproduce meehan2022-figure4-imdb")
    assert {p.name for p in paths} >= {"reproduction.md", "f1_vs_sentences.csv", "f1_vs_sentences.png"}
    assert all(p.is_file() for p in paths)
    with (tmp_path / "f1_vs_sentences.csv").open() as fh:
        (by_k,) = list(csv.DictReader(fh))
    assert (by_k["run"], by_k["k"], float(by_k["macro_f1"])) == ("deepcandidate", "4-5", 0.6)


def test_the_docs_copy_names_a_machine_independent_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--docs copies the tables; their command line must re-run anywhere, not name this machine's --out."""
    out = tmp_path / "scratch" / "runs"

    def fake_sweep(config_path: str, blocks: object, sets: object, out_dir: str, *, name: str, **_: object) -> int:
        (Path(out_dir) / name).mkdir(parents=True)
        (Path(out_dir) / name / "sweep_summary.csv").write_text("point\n")
        return 0

    def fake_report(rep: object, sweep_dir: Path, command: str) -> list[Path]:
        (sweep_dir / "reproduction.md").write_text(f"Command: `{command}`\n")
        return [sweep_dir / "reproduction.md"]

    monkeypatch.setattr(rp, "sweep", fake_sweep)
    monkeypatch.setattr(rp, "write_report", fake_report)
    assert rp.reproduce("du2023-figure2-qnli", str(out), docs=str(tmp_path / "docs")) == 0
    own = (out / "du2023-figure2-qnli" / "reproduction.md").read_text()
    copied = (tmp_path / "docs" / "du2023-figure2-qnli" / "reproduction.md").read_text()
    assert f"--out {out}`" in own
    assert (
        copied
        == f"Command: `sanitas reproduce du2023-figure2-qnli --seeds 1,2,3 --out results --docs {tmp_path / 'docs'}`\n"
    )
    assert (tmp_path / "docs" / "du2023-figure2-qnli" / "sweep_summary.csv").is_file()
