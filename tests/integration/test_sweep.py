"""``sanitas sweep``: grid parsing, the product, run names, rows from results
folders, the tables and the plot, resume and failures.

No simulation runs here: runs are fake runners that write ``summary.json``
files (or fail), and the one real subprocess is a ``python -c`` one-liner.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from fl.config import ConfigError
from simulations.drivers import grid, sweep_tables
from simulations.drivers import runner as run_mod
from simulations.drivers import sweep as sw

GRID = [
    'sentence-mechanism="purkayastha","planar_laplace"',
    "sentence-epsilon=2,6,10",
    'map-in="random","public"',
]
REFERENCES = ['sentence-mechanism="none"', 'map-in="identity","random","public"']


def _runs() -> list[grid.Run]:
    return grid.expand([[grid.parse_grid(g) for g in GRID], [grid.parse_grid(g) for g in REFERENCES]])


def _summary(
    folder: Path, accuracy: float, epsilon: float | None, pure: float | None, holds: bool = True, releases: int = 1
) -> None:
    """A summary.json as a run writes it; the ledger's per-user total is ``releases`` times ``pure``
    (re-draws), plus a label epsilon of 1 with protected labels."""
    folder.mkdir(parents=True, exist_ok=True)
    user = None if pure is None else releases * pure
    summary = {
        "results_folder": str(folder),
        "final": {"accuracy": accuracy, "macro_f1": accuracy - 0.01, "clean_accuracy": accuracy + 0.01},
        "best_accuracy": accuracy + 0.02,
        "ldp_guarantee_holds": holds,
        "evaluation_covered": False,
        "guarantee": {
            "sentence": {"notion": "metric" if epsilon else "pure", "epsilon": epsilon, "pure_ldp_per_release": pure}
        },
        "privacy": {
            "epsilon_ldp": user,
            "epsilon_total": None if user is None else user + 1.0,
            "label_protected": pure is not None,
        },
        "wall_seconds": 12.5,
    }
    if not holds:  # the leaky mode keeps the ledger's numbers only as nominal figures
        summary["privacy"] = {
            "ldp_guarantee_holds": False,
            "nominal_mechanism_accounting_not_a_guarantee": summary["privacy"],
        }
    (folder / "summary.json").write_text(json.dumps(summary))


def _fake_summary_for(run: grid.Run, folder: Path) -> None:
    """A plausible summary.json for a run, from its grid values."""
    mech = run.values["sentence-mechanism"]
    if mech == "none":
        _summary(folder, 0.8, None, None)
    else:
        eps = float(run.values["sentence-epsilon"])
        diameter = math.pi if mech == "purkayastha" else 2.0
        _summary(folder, 0.5 + eps / 100, eps, eps * diameter)


# --- parsing -------------------------------------------------------------------------------------


def test_grid_values_parse_as_toml_and_split_outside_quotes_and_brackets() -> None:
    axis = grid.parse_grid('sentence-mechanism="purkayastha","planar_laplace"')
    assert axis.key == "sentence-mechanism"
    assert axis.values == ("purkayastha", "planar_laplace")
    assert axis.texts == ('"purkayastha"', '"planar_laplace"')
    assert grid.parse_grid("sentence-epsilon=2, 6.5 ,10").values == (2, 6.5, 10)
    assert grid.parse_grid("map-in=random,public").values == ("random", "public")  # bare words: strings
    assert grid.parse_grid("fresh-noise-per-round=true,false").values == (True, False)
    # Commas inside quotes (basic and literal strings, escaped quotes) and brackets do not split.
    options = grid.parse_grid("""sentence-options='out_dim = 64, variant = "paper"',"a \\", b\"""")
    assert options.values == ('out_dim = 64, variant = "paper"', 'a ", b')
    assert grid.split_values("[1, 2],{a = 1, b = 2}, 3") == ["[1, 2]", "{a = 1, b = 2}", "3"]


@pytest.mark.parametrize(
    "spec",
    [
        "sentence-epsilon",
        "=1,2",
        "no-such-key=1",
        'map-in="random,public',
        "sentence-epsilon=1,,2",
        "sentence-epsilon=[1,2",
        "sentence-epsilon=1]",
        "sentence-epsilon=2,2.0",
    ],
)
def test_bad_grid_specs_are_refused(spec: str) -> None:
    with pytest.raises(ConfigError):
        grid.parse_grid(spec)


# --- the product and run names ---------------------------------------------------------------


def test_product_in_order_then_the_next_block() -> None:
    runs = _runs()
    assert len(runs) == 2 * 3 * 2 + 3
    assert runs[0].values == {"sentence-mechanism": "purkayastha", "sentence-epsilon": 2, "map-in": "random"}
    assert runs[1].values["map-in"] == "public"  # last key varies fastest
    assert runs[2].values["sentence-epsilon"] == 6
    assert runs[11].values == {"sentence-mechanism": "planar_laplace", "sentence-epsilon": 10, "map-in": "public"}
    assert [r.values for r in runs[12:]] == [
        {"sentence-mechanism": "none", "map-in": m} for m in ("identity", "random", "public")
    ]
    assert grid.grid_keys(runs) == ["sentence-mechanism", "sentence-epsilon", "map-in"]


def test_run_names_are_readable_unique_and_path_safe() -> None:
    runs = _runs()
    assert runs[0].name == "sentence-mechanism=purkayastha__sentence-epsilon=2__map-in=random"
    assert runs[-1].name == "sentence-mechanism=none__map-in=public"
    assert len({r.name for r in runs}) == len(runs)
    assert grid.run_name({"sentence-epsilon": 2.0}) == "sentence-epsilon=2"
    name = grid.run_name({"sentence-options": 'out_dim = 64, variant = "paper"'})
    assert "/" not in name and " " not in name and '"' not in name


def test_repeated_keys_and_repeated_grid_points_are_refused() -> None:
    axis = grid.parse_grid("sentence-epsilon=1,2")
    with pytest.raises(ConfigError, match="twice"):
        grid.expand([[axis, axis]])
    with pytest.raises(ConfigError, match="same name"):
        grid.expand([[axis], [axis]])


def test_each_run_passes_its_grid_values_and_name_as_sets(tmp_path: Path) -> None:
    run = _runs()[0]
    command = run_mod.run_command("c.toml", run, ["noise-seed=1"], tmp_path)
    assert command[:2] == ["run", "c.toml"]
    assert command[-2:] == ["--out", str(tmp_path)]
    sets = [command[i + 1] for i, arg in enumerate(command) if arg == "--set"]
    assert sets == [
        "noise-seed=1",
        'sentence-mechanism="purkayastha"',
        "sentence-epsilon=2",
        'map-in="random"',
        f'run-name="{run.name}"',
    ]


def test_every_run_config_is_checked_before_anything_runs(tmp_path: Path, data_dir: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'dataset = "sst2"\ndata-dir = "{data_dir}"\npublic-fraction = 0.1\n')
    runs = _runs()
    sw.check_runs(str(config), runs, ["noise-seed=0"], tmp_path / "out")
    cfg = run_mod.resolve_run(str(config), runs[1], [], tmp_path / "out")
    assert (cfg["sentence-mechanism"], cfg["sentence-epsilon"], cfg["map-in"]) == ("purkayastha", 2.0, "public")
    assert cfg["run-name"] == runs[1].name and cfg["out-dir"] == str(tmp_path / "out")
    with pytest.raises(ConfigError, match="sentence-epsilon=-1"):
        sw.check_runs(str(config), grid.expand([[grid.parse_grid("sentence-epsilon=1,-1")]]), [], tmp_path)
    with pytest.raises(ConfigError, match="both in --set and --grid"):
        sw.check_runs(str(config), runs, ["map-in=identity"], tmp_path)


# --- rows, tables, plot -------------------------------------------------------------------------


def test_rows_come_from_summary_and_status_files(tmp_path: Path) -> None:
    runs = _runs()
    keys = grid.grid_keys(runs)
    _fake_summary_for(runs[0], tmp_path / runs[0].name)
    row = sweep_tables.collect_row(runs[0], tmp_path, keys)
    assert row["status"] == "ok" and row["sentence-mechanism"] == "purkayastha" and row["sentence-epsilon"] == 2
    assert row["accuracy"] == pytest.approx(0.52) and row["macro_f1"] == pytest.approx(0.51)
    assert row["best_accuracy"] == pytest.approx(0.54) and row["clean_accuracy"] == pytest.approx(0.53)
    assert row["sentence_epsilon"] == 2 and row["max_user_pure_epsilon_embedding"] == pytest.approx(2 * math.pi)
    assert row["max_user_pure_epsilon_total"] == pytest.approx(2 * math.pi + 1) and row["label_protected"] is True
    assert row["ldp_guarantee_holds"] is True and row["wall_seconds"] == 12.5
    assert row["evaluation_covered"] is False
    assert row["results_folder"] == str(tmp_path / runs[0].name)
    assert sweep_tables.collect_row(runs[1], tmp_path, keys)["status"] == "pending"
    reference = sweep_tables.collect_row(runs[-1], tmp_path, keys)
    assert reference["sentence-epsilon"] is None  # not a grid key of that block


def test_word_level_rows_carry_the_per_word_delta_n_w_and_the_composed_delta(tmp_path: Path) -> None:
    """An (epsilon, delta) word mechanism: the row keeps the per-word delta, N_w and the ledger's
    composed per-user delta beside the epsilon, and the summary averages N_w over seeds."""
    runs = grid.expand(
        [[grid.parse_grid('word-mechanism="trlaplace"'), grid.parse_grid("word-epsilon=1")]], seeds=(1, 2)
    )
    keys = grid.grid_keys(runs)
    for run, n_w in zip(runs, (0.6, 0.8), strict=True):
        folder = tmp_path / run.name
        folder.mkdir()
        per_word = {"notion": "approx", "epsilon": 1.0, "delta": 0.7267, "pure_ldp": 1.0}
        summary = {
            "final": {"accuracy": 0.6, "macro_f1": 0.6},
            "ldp_guarantee_holds": True,
            "guarantee": {"sentence": {"epsilon": None}, "word": per_word},
            "privacy": {
                "epsilon_ldp": 43.0,
                "delta_total": 1.0,
                "label_protected": False,
                "word_level": {"per_word": per_word, "per_document_median": {"pure_ldp": 9.0, "delta": 0.99}},
            },
            "rewrite_quality": {"N_w": n_w},
        }
        (folder / "summary.json").write_text(json.dumps(summary))
    rows = [sweep_tables.collect_row(run, tmp_path, keys) for run in runs]
    assert rows[0]["word_delta"] == pytest.approx(0.7267) and rows[0]["delta_total"] == 1.0
    assert rows[0]["N_w"] == pytest.approx(0.6) and rows[0]["document_delta_median"] == pytest.approx(0.99)
    (point,) = sweep_tables.summarize(rows, keys)
    assert point["N_w_mean"] == pytest.approx(0.7) and point["word_delta"] == pytest.approx(0.7267)
    assert point["delta_total"] == 1.0


def test_tables_and_plot_are_written(tmp_path: Path) -> None:
    runs = _runs()
    for run in runs[:-1]:  # the last one stays pending
        _fake_summary_for(run, tmp_path / run.name)
    rows = sweep_tables.write_outputs(runs, tmp_path)
    assert len(rows) == 15
    with (tmp_path / "sweep.csv").open() as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 15
    assert list(table[0])[:4] == ["sentence-mechanism", "sentence-epsilon", "map-in", "status"]
    assert {
        "accuracy",
        "macro_f1",
        "best_accuracy",
        "clean_accuracy",
        "sentence_epsilon",
        "max_user_pure_epsilon_embedding",
        "max_user_pure_epsilon_total",
        "ldp_guarantee_holds",
        "evaluation_covered",
        "wall_seconds",
        "results_folder",
    } <= set(table[0])
    assert table[0]["ldp_guarantee_holds"] == "true" and table[-1]["status"] == "pending"
    assert {r["evaluation_covered"] for r in table if r["status"] == "ok"} == {"false"}
    assert table[12]["sentence_epsilon"] == "" and table[12]["sentence-mechanism"] == "none"
    lines = [json.loads(line) for line in (tmp_path / "sweep.jsonl").read_text().splitlines()]
    assert lines == rows and lines[12]["sentence_epsilon"] is None
    png = tmp_path / "accuracy_vs_epsilon.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_per_user_epsilon_counts_redraws(tmp_path: Path) -> None:
    """Issue 11 item 3: the per-user column is the ledger's total over every release of a user
    (3 fresh draws at pi * 2 each), not one release's pure epsilon (``pure_ldp_per_release``)."""
    run = _runs()[0]
    _summary(tmp_path / run.name, 0.6, 2.0, 2 * math.pi, releases=3)
    row = sweep_tables.collect_row(run, tmp_path, grid.grid_keys(_runs()))
    assert row["max_user_pure_epsilon_embedding"] == pytest.approx(3 * 2 * math.pi)
    assert "pure_ldp_epsilon" not in row


def test_runs_without_ldp_get_no_epsilon_and_are_plotted_apart(tmp_path: Path) -> None:
    """Issue 11 item 3: a leaky-mode run (ldp_guarantee_holds false) has no guarantee, so its
    epsilon columns are empty, and the plot keeps it off the epsilon axis ("not LDP" panel)."""
    runs = _runs()
    keys = grid.grid_keys(runs)
    leaky, private = runs[0], runs[1]
    _summary(tmp_path / leaky.name, 0.9, 2.0, 2 * math.pi, holds=False)
    _fake_summary_for(private, tmp_path / private.name)
    row = sweep_tables.collect_row(leaky, tmp_path, keys)
    assert row["ldp_guarantee_holds"] is False
    for column in ("epsilon", "sentence_epsilon", "max_user_pure_epsilon_embedding", "max_user_pure_epsilon_total"):
        assert row[column] is None, column
    rows = [row, sweep_tables.collect_row(private, tmp_path, keys)]
    points = sweep_tables.summarize(rows, keys)
    groups, not_ldp = sweep_tables.plot_groups(points, keys)
    assert [p["runs"] for p in not_ldp] == [leaky.name]
    assert [p["runs"] for group in groups.values() for p in group] == [private.name]
    png = sweep_tables.plot_accuracy(points, keys, tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_with_no_finished_run(tmp_path: Path) -> None:
    runs = _runs()[:2]
    sweep_tables.write_outputs(runs, tmp_path)
    assert (tmp_path / "accuracy_vs_epsilon.png").stat().st_size > 0


# --- running: resume, failures ------------------------------------------------------------------


class FakeRunner:
    """Writes a summary for each run, except the ones told to fail or to write nothing."""

    def __init__(self, sweep_dir: Path, fail: set[str] = frozenset(), silent: set[str] = frozenset()) -> None:
        self.sweep_dir, self.fail, self.silent = sweep_dir, fail, silent
        self.calls: list[str] = []

    def __call__(self, run: grid.Run, log_path: Path) -> run_mod.Outcome:
        self.calls.append(run.name)
        if run.name in self.fail:
            (self.sweep_dir / run.name).mkdir(parents=True, exist_ok=True)
            (self.sweep_dir / run.name / "config.json").write_text("{}")  # half-written folder
            return run_mod.Outcome(2, 1.0, "sanitas: error: boom")
        if run.name not in self.silent:
            _fake_summary_for(run, self.sweep_dir / run.name)
        return run_mod.Outcome(0, 3.0)


def test_resume_skips_runs_with_a_summary(tmp_path: Path) -> None:
    runs = _runs()[:4]
    _fake_summary_for(runs[0], tmp_path / runs[0].name)
    _fake_summary_for(runs[2], tmp_path / runs[2].name)
    runner = FakeRunner(tmp_path)
    rows = run_mod.run_sweep(runs, tmp_path, runner, progress=False)
    assert runner.calls == [runs[1].name, runs[3].name]
    assert [r["status"] for r in rows] == ["ok"] * 4
    assert rows[1]["process_seconds"] == 3.0 and rows[0]["process_seconds"] is None
    runner = FakeRunner(tmp_path)
    run_mod.run_sweep(runs, tmp_path, runner, progress=False)
    assert runner.calls == []


def test_a_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    runs = _runs()[:4]
    runner = FakeRunner(tmp_path, fail={runs[1].name}, silent={runs[2].name})
    rows = run_mod.run_sweep(runs, tmp_path, runner, progress=False)
    assert runner.calls == [r.name for r in runs]
    assert [r["status"] for r in rows] == ["ok", "failed", "failed", "ok"]
    assert rows[1]["error"] == "sanitas: error: boom"
    assert rows[2]["error"] == "the run exited 0 but wrote no summary.json"
    status = json.loads((tmp_path / "logs" / f"{runs[1].name}.status.json").read_text())
    assert status["returncode"] == 2 and status["status"] == "failed"
    assert "failed" in (tmp_path / "sweep.csv").read_text()
    # Resume: failed runs run again; the half-written folder is moved aside first.
    runner = FakeRunner(tmp_path)
    rows = run_mod.run_sweep(runs, tmp_path, runner, progress=False)
    assert runner.calls == [runs[1].name, runs[2].name]
    assert [r["status"] for r in rows] == ["ok"] * 4
    assert [p.name.startswith(runs[1].name) for p in (tmp_path / "incomplete").iterdir()] == [True]


def test_runs_that_share_a_federation_run_together_and_are_recorded_each(tmp_path: Path) -> None:
    """With ``shared``, runs of one key go to ``shared.run`` together (at most ``most`` at a time, at the
    place of their first run), runs whose key is None alone; each outcome is recorded for its run."""
    runs = _runs()[:5]
    keys = {runs[0].name: "a", runs[1].name: None, runs[2].name: "a", runs[3].name: "a", runs[4].name: "b"}
    groups: list[list[str]] = []

    def run_group(unit, log_paths):
        groups.append([r.name for r in unit])
        for r in unit[1:]:
            _fake_summary_for(r, tmp_path / r.name)
        return [run_mod.Outcome(2, 1.0, "sanitas: error: boom")] + [run_mod.Outcome(0, 1.0)] * (len(unit) - 1)

    shared = run_mod.Shared(key=lambda r: keys[r.name], run=run_group, most=2)
    assert [[r.name for r in u] for u in run_mod.units(runs, shared)] == [
        [runs[0].name, runs[2].name], [runs[1].name], [runs[3].name], [runs[4].name]
    ]  # fmt: skip
    runner = FakeRunner(tmp_path)
    rows = run_mod.run_sweep(runs, tmp_path, runner, progress=False, shared=shared)
    assert groups == [[runs[0].name, runs[2].name]]  # single runs go through the runner
    assert runner.calls == [runs[1].name, runs[3].name, runs[4].name]
    assert [r["status"] for r in rows] == ["failed", "ok", "ok", "ok", "ok"]
    assert rows[0]["error"] == "sanitas: error: boom"


def test_the_warm_runner_maps_each_point_outcome_to_the_sweep_record(tmp_path: Path) -> None:
    from simulations.runtime.warm import PointOutcome

    class Pool:  # what WarmPool.run_config answers, point by point
        def __init__(self, outcomes: list[PointOutcome]) -> None:
            self.outcomes, self.configs = outcomes, []

        def run_config(self, cfg: dict, log_path: Path, timeout: float | None = None) -> PointOutcome:
            self.configs.append(cfg)
            with open(log_path, "a") as log:
                log.write("progress\nsanitas: error: bad thing\ntail\n")
            return self.outcomes.pop(0)

    run = _runs()[0]
    outcomes = [PointOutcome(0, 1.0), PointOutcome(3, 1.0), PointOutcome(124, 2.0), PointOutcome(9, 1.0, crashed=True)]
    pool = Pool(list(outcomes))
    resolved = {run.name: {"run-name": run.name}}  # the worker receives the config the driver resolved, as it is
    runner = run_mod.warm_runner("c.toml", ["noise-seed=0"], tmp_path, pool, timeout=2.0, resolved=resolved)
    done, failed, late, died = (runner(run, tmp_path / "logs" / f"{i}.log") for i in range(4))
    assert all(cfg is resolved[run.name] for cfg in pool.configs)
    command = (tmp_path / "logs" / "0.log").read_text().splitlines()[0].split()
    assert command[:4] == ["$", "sanitas", "run", "c.toml"] and command[-2:] == ["--out", str(tmp_path)]
    assert "--set" in command and "noise-seed=0" in command
    assert done.error is None and done.returncode == 0
    assert failed.returncode == 3 and failed.error == "sanitas: error: bad thing"
    assert late.returncode == 124 and "timed out after 2 s" in late.error
    assert died.returncode == 9 and died.error.startswith("the worker died twice")
    assert (tmp_path / "logs" / "0.log").read_text().startswith("$ sanitas run c.toml")
    assert run_mod.last_error("a\nTraceback\nValueError: x\nnoise\n") == "ValueError: x"


def test_cli_splits_grid_products_at_also(monkeypatch: pytest.MonkeyPatch) -> None:
    from simulations import cli

    seen: dict[str, Any] = {}

    def fake_sweep(config: str, blocks: list[list[str]], sets: list[str], out: str, **kw: Any) -> int:
        seen.update(config=config, blocks=blocks, sets=sets, out=out, **kw)
        return 0

    monkeypatch.setattr(sw, "sweep", fake_sweep)
    argv = [
        "sweep",
        "c.toml",
        "--grid",
        GRID[0],
        "--grid",
        GRID[1],
        "--also",
        "--grid",
        REFERENCES[0],
        "--set",
        "noise-seed=0",
        "--out",
        "o",
        "--name",
        "n",
    ]
    assert cli.main(argv) == 0
    assert seen["blocks"] == [GRID[:2], REFERENCES[:1]]
    assert seen["sets"] == ["noise-seed=0"] and seen["out"] == "o" and seen["name"] == "n"


# --- seeds: expansion, the per-point summary, the plot, resume ----------------------------------


def _seeded_runs(seeds: tuple[int, ...] = (1, 2, 3)) -> list[grid.Run]:
    blocks = [[grid.parse_grid("sentence-epsilon=2,10")], [grid.parse_grid('sentence-mechanism="none"')]]
    return grid.expand(blocks, list(seeds))


def test_seeds_run_each_point_once_per_seed_with_seed_and_noise_seed() -> None:
    runs = _seeded_runs((1, 2))
    assert [r.name for r in runs] == [
        "sentence-epsilon=2__seed=1",
        "sentence-epsilon=2__seed=2",
        "sentence-epsilon=10__seed=1",
        "sentence-epsilon=10__seed=2",
        "sentence-mechanism=none__seed=1",
        "sentence-mechanism=none__seed=2",
    ]
    assert [r.seed for r in runs] == [1, 2] * 3
    assert all(r.values["seed"] == r.values["noise-seed"] == r.seed for r in runs)  # paired, not crossed
    assert [r.point for r in runs] == [
        "sentence-epsilon=2",
        "sentence-epsilon=2",
        "sentence-epsilon=10",
        "sentence-epsilon=10",
        "sentence-mechanism=none",
        "sentence-mechanism=none",
    ]
    assert runs[0].point_values == {"sentence-epsilon": 2}
    assert grid.grid_keys(runs) == ["sentence-epsilon", "seed", "noise-seed", "sentence-mechanism"]
    assert grid.point_keys(runs) == ["sentence-epsilon", "sentence-mechanism"]
    sets = run_mod.run_sets(runs[3], ["train-size=100"])
    assert sets == [
        "train-size=100",
        "sentence-epsilon=10",
        "seed=2",
        "noise-seed=2",
        'run-name="sentence-epsilon=10__seed=2"',
    ]
    # Without seeds nothing changes: one run per point, named by its grid values only.
    plain = grid.expand([[grid.parse_grid("sentence-epsilon=2,10")]])
    assert [(r.name, r.seed, r.point) for r in plain] == [
        ("sentence-epsilon=2", None, "sentence-epsilon=2"),
        ("sentence-epsilon=10", None, "sentence-epsilon=10"),
    ]
    assert "seed" not in plain[0].values


@pytest.mark.parametrize("text", ["", "1,,2", "1,a", "1.5", "-1,2", "1,2,1"])
def test_bad_seed_lists_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--seeds"):
        grid.parse_seeds(text)


def test_seeds_conflict_with_seed_keys_in_grid_or_set(tmp_path: Path) -> None:
    assert grid.parse_seeds(" 3, 1,2 ") == [3, 1, 2] and grid.parse_seeds([0, 5]) == [0, 5]
    for spec in ("seed=1,2", "noise-seed=0,1"):
        with pytest.raises(ConfigError, match="--seeds sets seed and noise-seed .* from --grid"):
            grid.expand([[grid.parse_grid("sentence-epsilon=2"), grid.parse_grid(spec)]], [1, 2])
    grid.expand([[grid.parse_grid("seed=1,2")]])  # a seed axis without --seeds is an ordinary grid key
    for item in ("seed=4", "noise-seed=0"):
        with pytest.raises(ConfigError, match="--seeds sets seed and noise-seed .* from --set"):
            sw.check_runs("unread.toml", _seeded_runs(), [item], tmp_path)


def test_cli_seed_conflict_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from simulations import cli

    argv = ["sweep", "c.toml", "--grid", "sentence-epsilon=2", "--seeds", "1,2", "--set", "noise-seed=0"]
    assert cli.main([*argv, "--out", str(tmp_path)]) == 2
    assert "--seeds sets seed and noise-seed of every run; remove ['noise-seed'] from --set" in capsys.readouterr().err
    assert cli.main(["sweep", "c.toml", "--grid", "sentence-epsilon=2", "--seeds", "1,x", "--out", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())  # refused before anything was written


SEED_ACCURACY = {1: 0.5, 2: 0.6, 3: 0.7}  # mean 0.6, sample sd 0.1


class SeededRunner:
    """Writes a summary whose accuracy depends on the seed; the runs in ``skip`` write nothing."""

    def __init__(self, sweep_dir: Path, skip: set[str] = frozenset(), wider: set[str] = frozenset()) -> None:
        self.sweep_dir, self.skip, self.wider = sweep_dir, skip, wider
        self.calls: list[str] = []

    def __call__(self, run: grid.Run, log_path: Path) -> run_mod.Outcome:
        self.calls.append(run.name)
        if run.name in self.skip:
            return run_mod.Outcome(1, 1.0, "sanitas: error: boom")
        accuracy = SEED_ACCURACY[run.seed]
        if run.values.get("sentence-mechanism") == "none":
            _summary(self.sweep_dir / run.name, accuracy + 0.2, None, None)
        else:
            eps = float(run.values["sentence-epsilon"])
            releases = 2 if run.name in self.wider else 1  # that seed's users release twice
            _summary(self.sweep_dir / run.name, accuracy + eps / 100, eps, eps * math.pi, releases=releases)
        return run_mod.Outcome(0, 2.0)


def test_summary_has_mean_sample_sd_and_n_per_point(tmp_path: Path) -> None:
    runs = _seeded_runs()
    # eps 2: all three seeds; eps 10: seed 1 only; none: nothing finished; eps 10 seed 3 differs in epsilon
    runner = SeededRunner(
        tmp_path,
        skip={"sentence-epsilon=10__seed=2", *(r.name for r in runs if r.point == "sentence-mechanism=none")},
        wider={"sentence-epsilon=10__seed=3"},
    )
    rows = run_mod.run_sweep(runs, tmp_path, runner, progress=False)
    assert [r["point"] for r in rows] == [r.point for r in runs] and rows[1]["seed"] == 2
    table = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    assert len(table) == 9 and table[4]["seed"] == "2" and table[4]["noise-seed"] == "2"
    points = [json.loads(line) for line in (tmp_path / "sweep_summary.jsonl").read_text().splitlines()]
    assert [p["point"] for p in points] == ["sentence-epsilon=2", "sentence-epsilon=10", "sentence-mechanism=none"]
    full, partial, none_done = points
    # Hand values: accuracies 0.52, 0.62, 0.72 -> mean 0.62, sample sd 0.1 (ddof = 1; ddof = 0 gives 0.0816).
    assert (full["n"], full["planned"], full["seeds"], full["one_seed"], full["status"]) == (3, 3, "1 2 3", False, "ok")
    assert full["accuracy_mean"] == pytest.approx(0.62) and full["accuracy_sd"] == pytest.approx(0.1)
    assert full["macro_f1_mean"] == pytest.approx(0.61) and full["macro_f1_sd"] == pytest.approx(0.1)
    assert full["clean_accuracy_mean"] == pytest.approx(0.63) and full["clean_accuracy_sd"] == pytest.approx(0.1)
    assert full["epsilon"] == 2 and full["max_user_pure_epsilon_embedding"] == pytest.approx(2 * math.pi)
    assert full["max_user_pure_epsilon_total"] == pytest.approx(2 * math.pi + 1)
    assert full["epsilons_differ"] is False and full["differs_across_seeds"] == ""
    assert full["sentence-epsilon"] == 2 and "seed" not in full and "noise-seed" not in full
    assert full["runs"] == "sentence-epsilon=2__seed=1 sentence-epsilon=2__seed=2 sentence-epsilon=2__seed=3"
    # eps 10: seeds 1 and 3 finished (0.60, 0.80), seed 3's users released twice: flagged, the larger kept.
    assert (partial["n"], partial["seeds"], partial["status"]) == (2, "1 3", "partial")
    assert partial["accuracy_mean"] == pytest.approx(0.70) and partial["accuracy_sd"] == pytest.approx(math.sqrt(0.02))
    assert (
        partial["epsilons_differ"] is True
        and partial["differs_across_seeds"] == "max_user_pure_epsilon_embedding max_user_pure_epsilon_total"
    )
    assert partial["epsilon"] == 10 and partial["max_user_pure_epsilon_embedding"] == pytest.approx(20 * math.pi)
    assert (none_done["n"], none_done["status"], none_done["accuracy_mean"], none_done["one_seed"]) == (
        0,
        "failed",
        None,
        False,
    )
    summary_csv = list(csv.DictReader((tmp_path / "sweep_summary.csv").open()))
    assert list(summary_csv[0])[:3] == ["sentence-epsilon", "sentence-mechanism", "point"]
    assert summary_csv[0]["one_seed"] == "false" and summary_csv[0]["n"] == "3"
    # One seed: no sd (empty cell), marked one_seed = true.
    (tmp_path / "sentence-epsilon=10__seed=3" / "summary.json").unlink()
    (tmp_path / "logs" / "sentence-epsilon=10__seed=3.status.json").unlink()
    sweep_tables.write_outputs(runs, tmp_path, plot=False)
    one = list(csv.DictReader((tmp_path / "sweep_summary.csv").open()))[1]
    assert (one["n"], one["one_seed"], one["accuracy_sd"], one["seeds"]) == ("1", "true", "", "1")
    assert float(one["accuracy_mean"]) == pytest.approx(0.60) and one["epsilons_differ"] == "false"
    assert one["status"] == "partial"


def test_summary_without_seeds_is_one_run_per_point(tmp_path: Path) -> None:
    runs = _runs()[:3]
    for run in runs[:2]:
        _fake_summary_for(run, tmp_path / run.name)
    sweep_tables.write_outputs(runs, tmp_path, plot=False)
    points = [json.loads(line) for line in (tmp_path / "sweep_summary.jsonl").read_text().splitlines()]
    assert [(p["point"], p["n"], p["one_seed"], p["seeds"], p["accuracy_sd"]) for p in points] == [
        (runs[0].name, 1, True, "", None),
        (runs[1].name, 1, True, "", None),
        (runs[2].name, 0, False, "", None),
    ]
    assert points[0]["accuracy_mean"] == pytest.approx(0.52) and points[2]["status"] == "pending"


def test_seeded_plot_is_written_with_error_bars_and_one_seed_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = _seeded_runs()
    runner = SeededRunner(tmp_path, skip={"sentence-epsilon=10__seed=2", "sentence-epsilon=10__seed=3"})
    run_mod.run_sweep(runs, tmp_path, runner, progress=False)
    png = tmp_path / "accuracy_vs_epsilon.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # What is drawn: a line at the epsilons with n in its label, and the one-seed legend note.
    points = sweep_tables.summarize(
        [sweep_tables.collect_row(r, tmp_path, grid.grid_keys(runs)) for r in runs], grid.point_keys(runs)
    )
    groups, not_ldp = sweep_tables.plot_groups(points, grid.point_keys(runs))
    assert not not_ldp and [len(g) for g in groups.values()] == [2, 1]
    seen: dict[str, Any] = {}
    real_savefig = plt.Figure.savefig

    def spy(fig: Any, *args: Any, **kwargs: Any) -> None:
        seen["labels"] = fig.axes[0].get_legend_handles_labels()[1]
        real_savefig(fig, *args, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", spy)
    sweep_tables.plot_accuracy(points, grid.point_keys(runs), tmp_path / "p.png")
    labels = seen["labels"]
    assert "sentence-mechanism=none (no privacy: 0.800 +- 0.100, n=3)" in labels
    assert any(label.startswith("runs (n=1-3)") for label in labels)
    assert any("one seed (n=1" in label for label in labels)


def test_resume_with_seeds_skips_finished_runs_only(tmp_path: Path) -> None:
    runs = _seeded_runs((1, 2))
    SeededRunner(tmp_path)(runs[1], tmp_path / "x.log")  # eps 2, seed 2 done before the sweep
    runner = SeededRunner(tmp_path, skip={runs[2].name})
    rows = run_mod.run_sweep(runs, tmp_path, runner, progress=False)
    assert runner.calls == [r.name for i, r in enumerate(runs) if i != 1]
    assert [r["status"] for r in rows] == ["ok", "ok", "failed", "ok", "ok", "ok"]
    runner = SeededRunner(tmp_path)
    rows = run_mod.run_sweep(runs, tmp_path, runner, progress=False)
    assert runner.calls == [runs[2].name]  # only the failed seed runs again
    assert [r["status"] for r in rows] == ["ok"] * 6
    runner = SeededRunner(tmp_path)
    run_mod.run_sweep(runs, tmp_path, runner, progress=False)
    assert runner.calls == []
    points = [json.loads(line) for line in (tmp_path / "sweep_summary.jsonl").read_text().splitlines()]
    assert [(p["n"], p["status"]) for p in points] == [(2, "ok")] * 3


def test_cli_passes_seeds_to_the_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    from simulations import cli

    seen: dict[str, Any] = {}
    monkeypatch.setattr(sw, "sweep", lambda *a, **kw: seen.update(kw) or 0)
    assert cli.main(["sweep", "c.toml", "--grid", "sentence-epsilon=2", "--seeds", "1,2,3", "--out", "o"]) == 0
    assert seen["seeds"] == [1, 2, 3]  # checked and parsed while the arguments are parsed
    assert cli.main(["sweep", "c.toml", "--grid", "sentence-epsilon=2", "--out", "o"]) == 0
    assert seen["seeds"] is None


def test_the_sweep_ends_with_a_table_that_flags_points_that_learned_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Imbalanced test classes (majority-class rate 0.87): the points at or below it are flagged in the
    final table and named in one warning; the plot draws the majority-class rate, not 0.5."""
    runs = grid.expand([[grid.parse_grid("sentence-epsilon=2,6,10")]])
    for run, accuracy in zip(runs, (0.866, 0.90, 0.93), strict=True):
        folder = tmp_path / run.name
        _summary(folder, accuracy, float(run.values["sentence-epsilon"]), 1.0)
        summary = json.loads((folder / "summary.json").read_text())
        flat = accuracy < 0.87
        summary["outcome"] = {"majority_class_rate": 0.87, "training_moved": not flat, "learned_nothing": flat}
        (folder / "summary.json").write_text(json.dumps(summary))
    sweep_tables.write_outputs(runs, tmp_path)
    sweep_tables.print_findings(runs, tmp_path)
    out, err = capsys.readouterr()
    rows = {line.split("│")[2].strip(): line for line in out.splitlines() if line.count("│") > 6}
    assert "NO: learned nothing" in rows["2"] and "yes" in rows["6"] and "yes" in rows["10"], out
    assert "beats the majority class (0.870)" in out
    assert "1 point(s) did not beat the majority-class rate 0.870" in err, err
    assert "learned nothing: sentence-epsilon=2 (" in err, err
    with (tmp_path / "sweep_summary.csv").open() as fh:
        points = list(csv.DictReader(fh))
    assert [p["majority_class_rate"] for p in points] == ["0.87"] * 3
    assert [p["training_moved"] for p in points] == ["false", "true", "true"]


def test_a_point_whose_scores_never_moved_is_flagged_even_above_an_unknown_majority(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = grid.expand([[grid.parse_grid("sentence-epsilon=2,6")]])
    for run, still in zip(runs, (True, False), strict=True):
        folder = tmp_path / run.name
        _summary(folder, 0.7, float(run.values["sentence-epsilon"]), 1.0)
        summary = json.loads((folder / "summary.json").read_text())
        summary["outcome"] = {"majority_class_rate": None, "training_moved": not still}
        (folder / "summary.json").write_text(json.dumps(summary))
    sweep_tables.print_findings(runs, tmp_path)
    out, err = capsys.readouterr()
    assert out.count("NO: training did not move") == 1 and "1 point(s)" in err


def test_a_run_row_carries_the_public_only_models_it_was_held_against(tmp_path: Path) -> None:
    runs = _runs()[:1]
    _summary(tmp_path / runs[0].name, 0.80, 2.0, 2 * math.pi)
    summary = json.loads((tmp_path / runs[0].name / "summary.json").read_text())
    summary["outcome"] = {
        "test_inputs": "sanitized",
        "public_only_accuracy": 0.79,
        "public_only_models": {"server_model": 0.79},
        "gain_over_public": 0.01,
    }
    (tmp_path / runs[0].name / "summary.json").write_text(json.dumps(summary))
    row = sweep_tables.collect_row(runs[0], tmp_path, grid.grid_keys(runs))
    assert row["public_only_models"] == {"server_model": 0.79} and row["public_only_clean_models"] is None


def test_a_point_adds_over_public_by_a_one_sided_paired_t_test_with_its_p_value(tmp_path: Path) -> None:
    """The seeds' paired gains over the public-only line: [0.005, 0.006, -0.001] is within seed noise (p 0.13),
    [0.04, 0.042, 0.041] adds (p < 0.001); the p-value sits beside the flag in sweep_summary, and one seed keeps
    the binomial rule (no p-value)."""

    def point(gains: list[float]) -> dict[str, Any]:
        rows = [
            {"point": "p", "status": "ok", "seed": i, "accuracy": 0.8, "gain_over_public": g}
            for i, g in enumerate(gains)
        ]
        (summarized,) = sweep_tables.summarize(rows, [])
        return summarized

    flat = point([0.005, 0.006, -0.001])
    assert flat["adds_over_public"] is False and flat["gain_over_public_p"] == pytest.approx(0.1336, abs=1e-3)
    adds = point([0.04, 0.042, 0.041])
    assert adds["adds_over_public"] is True and adds["gain_over_public_p"] < 1e-3
    one = point([0.02])  # one seed: above one binomial standard error (0.0136 at 0.8 on 872 users)
    assert one["adds_over_public"] is True and one["gain_over_public_p"] is None
    assert adds["adds_over_public_clean"] is None and adds["gain_over_public_clean_p"] is None
    sweep_tables.write_tables([flat, adds], tmp_path, stem="points")
    table = list(csv.DictReader((tmp_path / "points.csv").open()))
    assert [r["adds_over_public"] for r in table] == ["false", "true"]
    assert float(table[0]["gain_over_public_p"]) == pytest.approx(0.1336, abs=1e-3)


def test_a_run_name_too_long_for_a_folder_is_shortened_to_one_name_per_run() -> None:
    """Many keys (compare's --central-set items) make a name past 255 bytes: it keeps its start and seed part, a
    digest tells runs apart, and names short enough are unchanged. Power: two runs differing only in a key cut
    off the name get different names."""
    from simulations.drivers.grid import MAX_NAME, run_name

    keys = {f"a-rather-long-config-key-{i}": 1.0 for i in range(12)}
    one = run_name({**keys, "central-noise-multiplier": 1.5, "seed": 1, "noise-seed": 1})
    two = run_name({**keys, "central-noise-multiplier": 2.5, "seed": 1, "noise-seed": 1})
    assert len(one) <= MAX_NAME and one != two and one.endswith("__seed=1__noise-seed=1")
    assert one == run_name({**keys, "central-noise-multiplier": 1.5, "seed": 1, "noise-seed": 1})
    assert run_name({"mode": "local", "seed": 1}) == "mode=local__seed=1"
