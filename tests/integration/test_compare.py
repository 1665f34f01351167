"""``sanitas compare``: the run plan, the rows read from results folders, the CSV and the plot
(fake results folders; the runs themselves are ordinary ``sanitas run`` jobs tested elsewhere)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from fl.config import ConfigError
from simulations.drivers import compare_calibration as calibration
from simulations.drivers import compare_outputs as outputs
from simulations.drivers import compare_plan as plan_mod
from simulations.drivers import compare_plot
from simulations.drivers import compare_recipes as recipes_mod

NOISE = {1.0: 3.5, 4.0: 1.2}  # target per-user epsilon -> noise multiplier (as the accountant would give)


def _fake(folder: Path, accuracy: float, privacy: dict, holds: bool = True, **extra: object) -> None:
    folder.mkdir(parents=True)
    summary = {
        "final": {"accuracy": accuracy, "macro_f1": accuracy - 0.01},
        "privacy": privacy,
        "ldp_guarantee_holds": holds,
        "evaluation_covered": False,
        "wall_seconds": 10.0,
        **extra,
    }
    (folder / "summary.json").write_text(json.dumps(summary))


def test_plan_has_local_central_user_node_and_reference_runs_per_seed() -> None:
    runs = plan_mod.plan(["2", "6"], {1.0: 3.5}, [1, 2], ["users-per-node=50"], ["1.5"])
    modes = [
        (
            r.values.get("mode"),
            r.values.get("central-unit"),
            r.values.get("sentence-epsilon"),
            r.values.get("central-noise-multiplier"),
            r.values.get("sentence-mechanism"),
            r.values.get("users-per-node"),
            r.values["seed"],
        )
        for r in runs
    ]
    assert modes == [
        ("central", "user", None, 3.5, None, 50, 1),
        ("central", "user", None, 3.5, None, 50, 2),
        ("central", "node", None, 1.5, None, 50, 1),
        ("central", "node", None, 1.5, None, 50, 2),
        ("local", None, 2, None, None, None, 1),
        ("local", None, 2, None, None, None, 2),
        ("local", None, 6, None, None, None, 1),
        ("local", None, 6, None, None, None, 2),
        ("local", None, None, None, "none", None, 1),
        ("local", None, None, None, "none", None, 2),
    ]
    assert all(r.values["noise-seed"] == r.values["seed"] for r in runs)  # paired, not crossed
    assert len({r.name for r in runs}) == len(runs)
    with pytest.raises(ConfigError, match="one local epsilon"):
        plan_mod.plan([], {1.0: 3.5}, [1])
    with pytest.raises(ConfigError, match="distinct seeds"):
        plan_mod.plan(["2"], {1.0: 3.5}, [1, 1])
    with pytest.raises(ConfigError, match="key=value"):
        plan_mod.plan(["2"], {1.0: 3.5}, [1], ["users-per-node"])


def test_central_noise_is_found_by_the_accountant() -> None:
    """The noise of a target is the accountant's: its per-user epsilon is at most the target."""
    from fl.accounting.user_level import user_level_epsilon

    table = calibration.central_noise_table([2.0], 0.05, 5, 1e-5)
    assert user_level_epsilon(table[2.0], 0.05, 5, 1e-5)["epsilon"] <= 2.0
    assert user_level_epsilon(table[2.0] / 1.01, 0.05, 5, 1e-5)["epsilon"] > 2.0


def test_rows_points_csv_json_and_plot(tmp_path: Path) -> None:
    """Issue 11 item 1 still holds (labels in the clear: no whole-record epsilon, own panel), and
    issue 13: user-level central points sit at the accountant's per-user epsilon, with mean and sd
    over seeds, the start each side used, and the random-guess line's value in the JSON."""
    runs = plan_mod.plan(["2"], NOISE, [1, 2])
    by_kind = {
        (r.values.get("central-noise-multiplier"), r.values.get("sentence-mechanism"), r.values["seed"]): r
        for r in runs
    }
    targets = {r.name: t for t, z in NOISE.items() for r in runs if r.values.get("central-noise-multiplier") == z}
    local_privacy = {
        "epsilon_ldp": 2 * math.pi,
        "label_protected": False,
        "delta_total": 0.0,
        "epsilon_total": None,
        "epsilon_shuffled_total": 0.8,
        "delta_shuffled_total": 1e-6,
    }
    for seed, shift in ((1, 0.0), (2, 0.02)):
        _fake(tmp_path / by_kind[(None, None, seed)].name, 0.6 + shift, local_privacy)
        for target, z in NOISE.items():
            privacy = {"mode": "central", "epsilon": 0.99 * target, "delta": 1e-5}
            _fake(tmp_path / by_kind[(z, None, seed)].name, 0.7 + shift, privacy, holds=False, start="seeded")
    rows = [row for run in runs for row in outputs.rows_for(run, tmp_path, targets)]
    # labels in the clear: an embedding-only series of its own (reference not run yet)
    assert {r["series"] for r in rows} == {"local-ldp-labels-clear", "local-shuffled-labels-clear", "central-user"}
    ldp = [r for r in rows if r["series"] == "local-ldp-labels-clear"]
    assert all(r["epsilon"] is None and r["epsilon_embedding_only"] == pytest.approx(2 * math.pi) for r in ldp)
    assert all(r["metric_epsilon"] == 2 for r in ldp)
    _fake(tmp_path / by_kind[(None, "none", 1)].name, 0.8, {})
    rows = [row for run in runs for row in outputs.rows_for(run, tmp_path, targets)]
    points = outputs.aggregate(rows)
    central = sorted((p for p in points if p["series"] == "central-user"), key=lambda p: p["value"])
    assert [p["value"] for p in central] == [1.0, 4.0]
    assert [p["epsilon"] for p in central] == [0.99, 3.96] and [p["n"] for p in central] == [2, 2]
    assert central[0]["accuracy_mean"] == pytest.approx(0.71) and central[0]["accuracy_sd"] == pytest.approx(
        0.01414, rel=1e-3
    )
    assert central[0]["noise_multiplier"] == 3.5 and central[0]["start"] == "seeded"
    reference = next(p for p in points if p["series"] == "non-private")
    assert reference["n"] == 1 and reference["accuracy_sd"] is None  # one seed: marked as such
    csv_path, json_path, png = outputs.write(points, tmp_path, "t", 0.5, {"sampling_rate": 0.01}, rows)
    table = list(csv.DictReader(csv_path.open()))
    assert set(table[0]) == set(outputs.COLUMNS) and len(table) == len(points)
    local_row = next(r for r in table if r["series"] == "local-ldp-labels-clear")
    assert local_row["epsilon"] == "" and local_row["label_protected"] == "false"
    assert {r["evaluation_covered"] for r in table} == {"false"}
    document = json.loads(json_path.read_text())
    assert document["random_guess_accuracy"] == 0.5 and document["sampling_rate"] == 0.01
    assert len(document["runs"]) == len(rows) and png.stat().st_size > 1000


def test_seeds_that_disagree_on_epsilon_are_refused() -> None:
    """A local epsilon does not depend on the seed: seeds that disagree are a bug, refused."""
    rows = [
        {"series": "local-ldp", "parameter": "p", "value": 1.0, "epsilon": e, "run_name": n, "accuracy": 0.7}
        for e, n in ((0.9, "a"), (1.1, "b"))
    ]
    with pytest.raises(ValueError, match="different epsilons"):
        outputs.aggregate(rows)


def test_central_figures_of_different_seeds_take_the_largest() -> None:
    """A user-level central run's q depends on the seed's population (the public split is drawn per
    seed): the point reports the largest epsilon, the bound every seed's run meets (the quickstart
    with --seeds 1,2 aborted here before)."""
    rows = [
        {"series": "central-user", "parameter": "p", "value": 4.0, "epsilon": e, "run_name": n, "accuracy": 0.7}
        for e, n in ((3.991, "a"), (3.987, "b"))
    ]
    (point,) = outputs.aggregate(rows)
    assert point["epsilon"] == 3.991 and point["n"] == 2


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--epsilons", "10,abc", "argument --epsilons: '10,abc': 'abc' is not an epsilon"),
        ("--epsilons", "0", "argument --epsilons: '0': '0' is not an epsilon"),
        ("--central-epsilons", "4,-1", "argument --central-epsilons: '4,-1': '-1' is not an epsilon"),
        ("--central-epsilons", "inf", "argument --central-epsilons: 'inf': 'inf' is not an epsilon"),
        ("--central-epsilons", ",", "argument --central-epsilons: ',': an empty item between commas"),
        ("--central-epsilons", "", "argument --central-epsilons: '': lists nothing"),
        ("--seeds", "1,x", "argument --seeds: '1,x': 'x' is not a seed"),
        ("--seeds", "1,1", "argument --seeds: '1,1': 1 given twice"),
        ("--seeds", "1,,2", "argument --seeds: '1,,2': an empty item between commas"),
        ("--epsilons", "2,2", "argument --epsilons: '2,2': 2 given twice"),
    ],
)
def test_compare_options_are_checked_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    """Every --epsilons, --central-epsilons and --seeds value is checked first: one line naming the
    option and the value, exit 2, nothing written (the data is not even loaded)."""
    from simulations.cli import main

    config = Path(__file__).resolve().parents[2] / "simulations" / "experiments" / "sst2_class_rr_4000.toml"
    code = main(["compare", str(config), option, value, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("config", "extra", "message"),
    [
        ("attacks_sst2.toml", [], "cannot emulate map-in = 'public': give --label-share"),
        ("quickstart.toml", ["--set", "seed=3"], "--set: 'seed=3': compare sets seed and noise-seed of every run"),
        ("quickstart.toml", ["--central-set", "noise-seed=2"], "--central-set: 'noise-seed=2': compare sets seed"),
        (
            "sst2_utility.toml",
            ["--set", 'sentence-mechanism="none"'],
            "sentence-mechanism = 'none' has no pure epsilon linear in sentence-epsilon",
        ),
    ],
)
def test_a_local_side_compare_cannot_split_is_refused_before_any_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, extra: list[str], message: str
) -> None:
    """A shipped config compare cannot run (a map the recipe choice cannot emulate, a mechanism without a finite
    pure cost linear in its epsilon) and a seed given beside --seeds: one line of at most 200 characters, exit 2,
    nothing written, before the data is loaded (the word and document levels' refusals:
    tests/simulations/drivers/test_compare_levels.py)."""
    from simulations.cli import main

    path = Path(__file__).resolve().parents[2] / "simulations" / "experiments" / config
    code = main(["compare", str(path), "--epsilons", "8", "--central-epsilons", "4", *extra, "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0] and len(err[0]) <= 200, err
    assert not any(tmp_path.iterdir())


def test_a_run_without_ldp_gets_no_local_epsilon(tmp_path: Path) -> None:
    """A local run whose guarantee does not hold (leaky M1) reports no epsilon in any column."""
    local = next(r for r in plan_mod.plan(["2"], NOISE, [1]) if r.values.get("sentence-epsilon") == 2)
    _fake(tmp_path / local.name, 0.9, {"ldp_guarantee_holds": False, "label_protected": True}, holds=False)
    ldp, shuffled = outputs.rows_for(local, tmp_path)
    assert ldp["epsilon"] is None and ldp["epsilon_embedding_only"] is None and shuffled["epsilon"] is None
    assert ldp["metric_epsilon"] is None


def test_joint_figures_when_labels_are_protected(tmp_path: Path) -> None:
    local = next(r for r in plan_mod.plan(["2"], NOISE, [1]) if r.values.get("sentence-epsilon") == 2)
    _fake(
        tmp_path / local.name,
        0.6,
        {
            "epsilon_ldp": 6.28,
            "epsilon_total": 7.28,
            "label_protected": True,
            "epsilon_shuffled_total": 0.8,
            "epsilon_shuffled_joint_total": 0.9,
            "delta_shuffled_joint_total": 1e-6,
        },
    )
    ldp, shuffled = outputs.rows_for(local, tmp_path)
    assert ldp["epsilon"] == 7.28 and shuffled["epsilon"] == 0.9


def test_the_shuffled_point_on_the_device_is_at_the_central_delta(tmp_path: Path) -> None:
    """Issue 54: the local runs account at the central runs' delta (accounting-delta = central-delta), so their
    shuffled figure shares it, and a run scored on the device gives a local-shuffled-on-device row: the shuffled
    (epsilon, delta) with the on-device accuracy and its public-only line, beside local-ldp-on-device."""
    runs = plan_mod.plan(["2"], NOISE, [1, 2], central_delta=1.49109e-6, local_delta=1.49109e-6)
    local = [r for r in runs if r.values.get("sentence-epsilon") == 2]
    assert [r.values["accounting-delta"] for r in local] == [1.49109e-6, 1.49109e-6]
    assert {r.values["central-delta"] for r in runs if r.values.get("mode") == "central"} == {1.49109e-6}
    assert all("accounting-delta" not in r.values for r in runs if r.values.get("sentence-mechanism") == "none")
    assert "accounting-delta" not in plan_mod.plan(["2"], NOISE, [1])[-2].values  # none given: the config's
    for run, shuffled_epsilon in zip(local, (0.9, 0.95), strict=True):
        privacy = {
            "epsilon_ldp": 1.5,
            "epsilon_total": 2.0,
            "label_protected": True,
            "epsilon_shuffled_total": 0.8,
            "epsilon_shuffled_joint_total": shuffled_epsilon,
            "delta_shuffled_joint_total": run.values["accounting-delta"],
        }
        _fake(tmp_path / run.name, 0.6, **_device_summary(0.6, 0.7, 0.62, privacy))
    rows = [row for run in local for row in outputs.rows_for(run, tmp_path, {r.name: 2.0 for r in local})]
    assert [r["series"] for r in rows[:4]] == [
        "local-ldp",
        "local-ldp-on-device",
        "local-shuffled-on-device",
        "local-shuffled",
    ]
    points = {p["series"]: p for p in outputs.aggregate(rows)}
    device, shuffled = points["local-ldp-on-device"], points["local-shuffled-on-device"]
    assert shuffled["epsilon"] == 0.95 and shuffled["delta"] == 1.49109e-6  # the seeds' largest, at the delta
    assert shuffled["test_inputs"] == "clean" and shuffled["accuracy_mean"] == pytest.approx(0.7)
    for key in ("accuracy_mean", "public_only_accuracy", "gain_over_public", "adds_over_public", "n"):
        assert shuffled[key] == device[key], key
    assert device["epsilon"] == 2.0 and points["local-shuffled"]["accuracy_mean"] == pytest.approx(0.6)
    assert "local-shuffled-on-device" in compare_plot.STYLES  # drawn on compare.png


def test_shuffled_figures_of_different_seeds_take_the_largest() -> None:
    """The shuffled epsilon depends on how many users the seed sampled: the point reports the bound
    every seed's run meets (the largest), not the first seed's."""
    rows = [
        {"series": "local-shuffled", "parameter": "p", "value": 2.0, "epsilon": e, "run_name": n, "accuracy": 0.6}
        for e, n in ((8.2831826807, "a"), (8.2831827117, "b"), (8.2831827045, "c"))
    ]
    (point,) = outputs.aggregate(rows)
    assert point["epsilon"] == 8.2831827117 and point["n"] == 3


def test_head_and_encoder_central_series(tmp_path: Path) -> None:
    """--central-trains head,encoder: one user-level central run per target and train mode, each its
    own series; the head-only default keeps the run names it always had."""
    runs = plan_mod.plan(["2"], {1.0: 3.5}, [1], central_trains=("head", "encoder"))
    central = [r for r in runs if r.values.get("mode") == "central"]
    assert [r.values["central-train"] for r in central] == ["head", "encoder"]
    assert all(r.values["central-noise-multiplier"] == 3.5 for r in central)
    assert not any("central-train" in r.name for r in plan_mod.plan(["2"], {1.0: 3.5}, [1]))
    encoder = central[1]
    _fake(tmp_path / encoder.name, 0.86, {"epsilon": 0.99, "delta": 1e-5})
    (row,) = outputs.rows_for(encoder, tmp_path, {encoder.name: 1.0})
    assert row["series"] == "central-user-encoder" and row["value"] == 1.0
    with pytest.raises(ConfigError, match="not both"):
        plan_mod.plan(["2"], {1.0: 3.5}, [1], ['central-train="head"'], central_trains=("head", "encoder"))


def test_bad_central_trains_are_refused_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from simulations.cli import main

    config = Path(__file__).resolve().parents[2] / "simulations" / "experiments" / "sst2_class_rr_4000.toml"
    code = main(["compare", str(config), "--central-trains", "head,lora", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--central-trains: 'head,lora': 'lora' is not one of head, encoder" in err[0]
    assert not (tmp_path / "out").exists()


def test_collect_tabulates_the_finished_runs_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    """--collect: with no run finished, one line and exit 2; with some finished, the table holds
    exactly those (n per point), the others are named as not run, and nothing was launched."""
    from simulations.cli import main

    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    config = Path(__file__).resolve().parents[2] / "simulations" / "experiments" / "sst2_class_rr_4000.toml"
    args = ["compare", str(config), "--epsilons", "10", "--central-epsilons", "4", "--seeds", "1,2"]
    args += ["--set", 'encoder-tuning="none"', "--label-share", "0.1"]  # no tuning: the test's budget
    args += ["--out", str(tmp_path), "--name", "c", "--collect"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    names = [line.split("not run yet: ")[1] for line in err if "not run yet: " in line]
    assert len(names) == 6 and "none of the 6 runs has finished" in err[-1], err
    for name in names:
        if name.endswith("seed=1__noise-seed=1"):
            holds = "sentence-epsilon" in name or "sentence-mechanism" in name
            privacy = {"epsilon": 3.9, "delta": 1e-5, "epsilon_ldp": 9.5, "epsilon_total": 10.0}
            flat = name.startswith("mode=central")  # the central point sits at the majority-class rate
            _fake(tmp_path / "c" / name, 0.509 if flat else 0.8, {**privacy, "label_protected": True}, holds)
            (tmp_path / "c" / name / "config.json").write_text(json.dumps({"config": {"dataset": "sst2"}}))
    assert main([*args, "--track", "mlflow"]) == 0
    out, err = capsys.readouterr()
    # The console says what the comparison found: a table of the points, the flat one flagged, and a warning.
    table = [line for line in out.splitlines() if "central-user" in line or "local-ldp" in line]
    assert any("NO: learned nothing" in line for line in table if "central-user" in line), out
    assert all("yes" in line for line in table if "local-ldp" in line), out
    assert "1 point(s) did not beat the majority-class rate 0.509" in err and "central-user" in err
    missing = [x for x in err.splitlines() if "not run yet: " in x]
    assert len(missing) == 3 and all("seed=2__noise-seed=2" in x for x in missing)
    with (tmp_path / "c" / "compare.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["series"] for r in rows} >= {"central-user", "local-ldp", "non-private"}
    assert all(r["n"] == "1" and r["seeds"] == "1" for r in rows)
    assert not (tmp_path / "c" / "logs").exists()  # nothing ran
    # --track mlflow: the comparison is a parent run holding its tables and plot, each finished run nested in it.
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = {r.info.run_name: r for r in client.search_runs([client.get_experiment_by_name("sanitas").experiment_id])}
    parent = runs.pop("c")
    assert parent.data.tags["sanitas.command"] == "compare" and parent.data.params["seeds"] == "[1, 2]"
    assert sorted(runs) == sorted(n for n in names if n.endswith("seed=1__noise-seed=1"))
    assert {r.data.tags["mlflow.parentRunId"] for r in runs.values()} == {parent.info.run_id}
    assert all(r.data.metrics["final/accuracy"] in (0.509, 0.8) for r in runs.values())
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"compare.csv", "compare.json", "compare.png"} <= artifacts


def test_local_points_spend_a_whole_record_budget_with_the_label_protected() -> None:
    """Each --epsilons value is a whole-record pure epsilon: RR labels at the share, the rest on the embedding
    (Purkayastha: pure pi per unit); --labels-clear adds the embedding-only twin; the plan names each run's total."""
    from fl import config

    cfg = config.resolve({"sentence-mechanism": "purkayastha", "label-mechanism": "none", "map-dim": 16})
    points = plan_mod.local_points(cfg, [3.14, 6.28], 0.1, 16, 2, labels_clear=True)
    assert [(k["label-mechanism"], total) for k, total in points] == [
        ("rr", 3.14),
        ("none", 3.14),
        ("rr", 6.28),
        ("none", 6.28),
    ]
    protected, clear = points[0][0], points[1][0]
    assert protected["label-epsilon"] == pytest.approx(0.314)
    assert protected["sentence-epsilon"] * math.pi + protected["label-epsilon"] == pytest.approx(3.14)
    assert clear["sentence-epsilon"] * math.pi == pytest.approx(3.14) and "label-epsilon" not in clear
    runs = plan_mod.plan([k for k, _ in points], NOISE, [1], central_delta=2e-6)
    local = [r for r in runs if r.values.get("mode") == "local" and r.values.get("sentence-mechanism") != "none"]
    assert sorted(plan_mod.point_total(r, points) for r in local) == [3.14, 3.14, 6.28, 6.28]
    assert all(r.values["central-delta"] == 2e-6 for r in runs if r.values.get("mode") == "central")
    reference = next(r for r in runs if r.values.get("sentence-mechanism") == "none")
    assert reference.values["label-mechanism"] == "none"  # the non-private same pipeline


def test_every_local_row_gets_its_ceiling() -> None:
    """The ceiling is taken at the test release's pure epsilon (the embedding part), not the whole record."""
    rows = [
        {"series": "local-ldp", "test_release_epsilon": math.pi, "seed": 1},
        {"series": "local-ldp-labels-clear", "test_release_epsilon": 2 * math.pi, "seed": 1},
        {"series": "central-user", "seed": 1},
    ]
    outputs.add_ceilings(rows, [0.5, 0.5], {1: 0.8})
    keep = math.exp(math.pi) / (math.exp(math.pi) + 1)
    assert rows[0]["ceiling_bound"] == pytest.approx(keep)
    assert rows[0]["ceiling_public_rr"] == pytest.approx(0.8 * keep + 0.2 * (1 - keep))
    assert rows[1]["ceiling_bound"] == pytest.approx(math.exp(2 * math.pi) / (math.exp(2 * math.pi) + 1))
    assert "ceiling_bound" not in rows[2]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--label-share", "1.5"],
            "argument --label-share: '1.5': must be 'auto' or a number strictly between 0 and 1",
        ),
        (
            ["--set", "public-fraction=0", "--set", 'map-in="random"', "--set", 'sentence-mechanism="privunit"'],
            "--label-share auto chooses the label's share of the budget on public data",
        ),
    ],
)
def test_a_bad_label_share_is_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    from simulations.cli import main

    config = Path(__file__).resolve().parents[2] / "simulations" / "experiments" / "sst2_fair.toml"
    code = main(["compare", str(config), *extra, "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert captured.out == "" and not (tmp_path / "out").exists()  # not even the calibration ran


def test_every_point_is_held_against_public_only_on_its_own_test_inputs(tmp_path: Path) -> None:
    """A local run with on-device inference gives two rows (sanitized and clean test inputs), each with the
    public-only line on the same inputs (per seed, the strongest public-only model scored there) and the paired
    gain; a central run's row is on clean inputs. The point's gain is the mean of the seeds' paired gains,
    flagged by a one-sided paired t-test over the seeds (p < 0.05); compare.csv carries test_inputs,
    public_only_accuracy, public_only_models, gain_over_public, gain_over_public_p and public_documents."""
    from fl.reporting.outcome import outcome

    privacy = {"epsilon_ldp": 5.0, "epsilon_total": 6.28, "delta_total": 0.0, "label_protected": True}
    runs = plan_mod.plan([{"sentence-epsilon": 5.0, "label-mechanism": "rr", "label-epsilon": 1.28}], NOISE, [1, 2])
    local = [r for r in runs if r.values.get("mode") == "local" and r.values.get("sentence-mechanism") != "none"]
    central = [r for r in runs if r.values.get("central-noise-multiplier") == NOISE[1.0]]
    data = {"public": {"documents": 282}}
    # Seed 1: on the clean inputs the public logistic regression (0.72) beats the public server model (0.70);
    # seed 2: the public server model (0.74) beats it. Each seed's gain is over its own stronger one.
    seeds = ((0.02, 0.76, 0.70), (0.021, 0.75, 0.74))
    for run, (gain, clean, head) in zip(local, seeds, strict=True):
        record = {
            "accuracy": 0.56 + gain,
            "clean_accuracy": clean,
            "public_only_accuracy": 0.56,
            "public_only_clean_accuracy": 0.72,
            "public_only_head_clean_accuracy": head,
            "test_users": 872,
        }
        block = outcome([record], [436, 436])
        _fake(tmp_path / run.name, 0.56 + gain, privacy, outcome=block, data=data, users={"test": 872})
    for run, gain in zip(central, (0.001, -0.003), strict=True):
        block = outcome([{"accuracy": 0.72 + gain, "public_only_accuracy": 0.72, "test_users": 872}], None, "clean")
        _fake(tmp_path / run.name, 0.72 + gain, {"epsilon": 0.99, "delta": 1e-6}, holds=False, outcome=block, data=data)
    targets = {r.name: 6.28 for r in local} | {r.name: 1.0 for r in central}
    rows = [row for run in runs for row in outputs.rows_for(run, tmp_path, targets)]
    device_rows = [r for r in rows if r["series"] == "local-ldp-on-device"]
    assert [r["public_only_accuracy"] for r in device_rows] == pytest.approx([0.72, 0.74])  # the per-seed max
    assert [r["gain_over_public"] for r in device_rows] == pytest.approx([0.04, 0.01])
    points = {p["series"]: p for p in outputs.aggregate(rows) if p["series"] != "local-shuffled"}
    device, sanitized, flat = points["local-ldp-on-device"], points["local-ldp"], points["central-user"]
    assert device["test_inputs"] == "clean" and sanitized["test_inputs"] == "sanitized"
    assert device["accuracy_mean"] == pytest.approx(0.755) and device["public_only_accuracy"] == pytest.approx(0.73)
    assert device["public_only_models"] == pytest.approx({"logistic_regression": 0.72, "server_model": 0.72})
    # gains 0.04 and 0.01 (against the logistic regression alone they would be 0.04 and 0.03): t = 1.67, p = 0.17
    assert device["gain_over_public"] == pytest.approx(0.025) and device["adds_over_public"] is False
    assert device["gain_over_public_p"] == pytest.approx(0.172, abs=1e-3)
    assert sanitized["public_only_models"] == pytest.approx({"server_model": 0.56})
    assert sanitized["gain_over_public"] == pytest.approx(0.0205) and sanitized["gain_over_public_sd"] == pytest.approx(
        0.000707, rel=1e-2
    )
    assert sanitized["adds_over_public"] is True and sanitized["gain_over_public_p"] < 0.05  # t = 41 over 2 seeds
    assert flat["test_inputs"] == "clean" and flat["adds_over_public"] is False  # -0.001 on average
    assert flat["public_only_models"] == pytest.approx({"logistic_regression": 0.72})
    assert device["test_release_epsilon"] is None  # no sanitized test input: no ceiling of one
    csv_path, json_path, _ = outputs.write(list(points.values()), tmp_path, "t", 0.5, {}, rows, "majority class")
    table = {r["series"]: r for r in csv.DictReader(csv_path.open())}
    for column in ("test_inputs", "public_only_accuracy", "gain_over_public", "public_documents"):
        assert column in table["local-ldp"]
    assert table["central-user"]["adds_over_public"] == "false" and table["local-ldp"]["public_documents"] == "282"
    assert json.loads(table["local-ldp-on-device"]["public_only_models"]) == pytest.approx(
        {"logistic_regression": 0.72, "server_model": 0.72}
    )
    assert float(table["local-ldp-on-device"]["gain_over_public_p"]) == pytest.approx(0.172, abs=1e-3)
    document = json.loads(json_path.read_text())
    stored = next(p for p in document["points"] if p["series"] == "local-ldp-on-device")
    assert stored["public_only_models"] == pytest.approx({"logistic_regression": 0.72, "server_model": 0.72})
    assert stored["gain_over_public_p"] == pytest.approx(0.172, abs=1e-3) and stored["adds_over_public"] is False


def test_a_class_means_recipe_carries_its_map_dim_and_compare_sets_like_for_like() -> None:
    from fl import config

    cfg = config.resolve({"sentence-mechanism": "privunit", "sentence-options": "unbiased = true", "map-dim": 32})
    points = plan_mod.local_points(cfg, [3.14, 6.28], {3.14: 0.35, 6.28: 0.35}, 32, 2, map_dims={3.14: 16})
    assert points[0][0] == {
        "sentence-epsilon": pytest.approx(3.14 * 0.65),
        "label-mechanism": "rr",
        "label-epsilon": pytest.approx(3.14 * 0.35),
        "map-dim": 16,
    }
    assert "map-dim" not in points[1][0]
    assert plan_mod.like_for_like(["users-per-node=50"]) == [
        "clean-evaluation=true",
        'central-start="public"',
        "users-per-node=50",
    ]
    assert plan_mod.like_for_like(['central-start="seeded"']) == ["clean-evaluation=true", 'central-start="seeded"']
    runs = plan_mod.plan([points[1][0]], NOISE, [1], clear_options=True)
    reference = next(r for r in runs if r.values.get("sentence-mechanism") == "none")
    assert reference.values["sentence-options"] == ""  # "none" takes no options


def _device_summary(accuracy: float, clean: float, public: float, privacy: dict) -> dict:
    """A local run's summary fields with both test modes (the public-only models named, as runs write them)."""
    from fl.reporting.outcome import outcome

    record = {
        "accuracy": accuracy,
        "clean_accuracy": clean,
        "public_only_accuracy": public,
        "public_only_clean_accuracy": public,
        "test_users": 872,
    }
    return {"outcome": outcome([record], [436, 436]), "privacy": privacy}


def test_each_local_point_is_held_against_the_noise_free_run_of_its_seed_at_its_map_dim(tmp_path: Path) -> None:
    """Issue 54: each seed runs its own recipe; one non-private run per seed and distinct map-dim of that seed's
    points (none at a map-dim no point of the seed uses), and each local row's noise-free ceiling is its own
    seed's at its own map-dim, on its own test inputs (on-device rows: the on-device accuracy). Seed 1 runs
    epsilon 3 at map-dim 16 and epsilon 6 at the config's (32), seed 2 both at 64: a ceiling taken at another
    map-dim, or another seed's, gives other numbers. The shuffled on-device series is the shuffled figure
    (epsilon and delta) with the on-device accuracy, and the local runs account at the given delta."""
    keys = {
        1: [
            {"sentence-epsilon": 2.4, "label-mechanism": "rr", "label-epsilon": 0.6, "map-dim": 16},
            {"sentence-epsilon": 3.9, "label-mechanism": "rr", "label-epsilon": 2.1},
        ],
        2: [
            {"sentence-epsilon": 1.95, "label-mechanism": "rr", "label-epsilon": 1.05, "map-dim": 64},
            {"sentence-epsilon": 3.9, "label-mechanism": "rr", "label-epsilon": 2.1, "map-dim": 64},
        ],
    }
    runs = plan_mod.plan(keys, NOISE, [1, 2], central_delta=1.49109e-6, local_delta=1.49109e-6)
    local = [r for r in runs if r.values.get("mode") == "local" and r.values.get("sentence-mechanism") != "none"]
    assert [(r.seed, r.values.get("map-dim"), r.values["label-epsilon"]) for r in local] == [
        (1, 16, 0.6),
        (2, 64, 1.05),
        (1, None, 2.1),
        (2, 64, 2.1),
    ]
    assert all(r.values["accounting-delta"] == 1.49109e-6 for r in local)  # the central runs' delta
    assert all(r.values["central-delta"] == 1.49109e-6 for r in runs if r.values.get("mode") == "central")
    references = [r for r in runs if r.values.get("sentence-mechanism") == "none"]
    assert [(r.seed, r.values.get("map-dim")) for r in references] == [(1, 16), (1, None), (2, 64)]
    assert all("accounting-delta" not in r.values and r.values["label-mechanism"] == "none" for r in references)
    assert len({r.name for r in runs}) == len(runs)
    totals = {1: [(keys[1][0], 3.0), (keys[1][1], 6.0)], 2: [(keys[2][0], 3.0), (keys[2][1], 6.0)]}
    targets = {r.name: plan_mod.point_total(r, totals[r.seed]) for r in local}
    assert sorted(targets.values()) == [3.0, 3.0, 6.0, 6.0]

    def ceiling(seed: int, dim: int) -> float:  # the noise-free on-device accuracy of (seed, map-dim)
        return 0.8 + dim / 1000 + seed / 100

    for r in references:
        dim = r.values.get("map-dim", 32)
        extra = _device_summary(0.7 + dim / 1000, ceiling(r.seed, dim), 0.6, {"label_protected": False})
        _fake(tmp_path / r.name, 0.7 + dim / 1000, **extra)
    for r in local:
        privacy = {
            "epsilon_ldp": targets[r.name] - r.values["label-epsilon"],
            "epsilon_total": targets[r.name],
            "delta_total": 0.0,
            "label_protected": True,
            "epsilon_shuffled_total": 0.1 * r.seed,
            "epsilon_shuffled_joint_total": 0.2 * r.seed,
            "delta_shuffled_joint_total": r.values["accounting-delta"],
        }
        _fake(tmp_path / r.name, 0.6, **_device_summary(0.6, 0.65 + r.seed / 100, 0.6, privacy))
    rows = [row for run in runs for row in outputs.rows_for(run, tmp_path, targets, 32)]
    outputs.add_noise_free_ceilings(rows)
    by = {(r["series"], r["seed"], r["value"]): r for r in rows}
    assert by[("local-ldp-on-device", 1, 3.0)]["noise_free_ceiling_accuracy"] == pytest.approx(ceiling(1, 16))
    assert by[("local-ldp-on-device", 1, 6.0)]["noise_free_ceiling_accuracy"] == pytest.approx(ceiling(1, 32))
    assert by[("local-ldp-on-device", 2, 6.0)]["noise_free_ceiling_accuracy"] == pytest.approx(ceiling(2, 64))
    assert by[("local-ldp", 1, 3.0)]["noise_free_ceiling_accuracy"] == pytest.approx(0.716)  # server-side, m' 16
    assert by[("local-ldp", 1, 3.0)]["noise_free_ceiling_gain_over_public"] == pytest.approx(0.116)
    assert by[("local-ldp", 1, 3.0)]["noise_free_ceiling_run"] == next(
        r.name for r in references if r.seed == 1 and r.values.get("map-dim") == 16
    )
    points = {(p["series"], p["value"]): p for p in outputs.aggregate(rows)}
    device = points[("local-ldp-on-device", 3.0)]
    assert device["map_dims"] == "16 64" and device["seeds"] == "1 2"
    assert device["noise_free_ceiling_accuracy"] == pytest.approx((ceiling(1, 16) + ceiling(2, 64)) / 2)
    assert device["noise_free_ceiling_gain_over_public"] == pytest.approx((ceiling(1, 16) + ceiling(2, 64)) / 2 - 0.6)
    assert points[("local-ldp-on-device", 6.0)]["map_dims"] == "32 64"
    assert points[("local-ldp-on-device", 6.0)]["noise_free_ceiling_accuracy"] == pytest.approx(
        (ceiling(1, 32) + ceiling(2, 64)) / 2
    )
    assert points[("local-ldp-on-device", 3.0)]["metric_epsilon"] == 2.4  # the seeds' recipes differ: the largest
    shuffled = points[("local-shuffled-on-device", 3.0)]
    assert shuffled["epsilon"] == pytest.approx(0.4) and shuffled["delta"] == 1.49109e-6  # the seeds' largest
    assert shuffled["test_inputs"] == "clean" and shuffled["accuracy_mean"] == pytest.approx(0.665)
    assert shuffled["gain_over_public"] == pytest.approx(device["gain_over_public"])
    assert shuffled["noise_free_ceiling_accuracy"] == pytest.approx(device["noise_free_ceiling_accuracy"])
    assert {(p["series"], p["value"]) for p in points.values() if p["series"] == "non-private"} == {
        ("non-private", 16),
        ("non-private", 32),
        ("non-private", 64),
    }
    csv_path, _, png = outputs.write(list(points.values()), tmp_path, "t", 0.5, {}, rows, "majority class")
    table = [r for r in csv.DictReader(csv_path.open()) if r["series"] == "local-shuffled-on-device"]
    assert [float(r["delta"]) for r in table] == [1.49109e-6, 1.49109e-6]
    assert png.stat().st_size > 1000


def test_compare_chooses_each_seeds_recipe_on_that_seeds_public_draw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    """Issue 54: the recipe of seed s is chosen on the config resolved at seed s (its public draw is the runs'
    own, not the config's seed 42's), each seed's runs take its own keys, the chosen keys are in compare.json
    per seed and kept in recipes.json (a collect does not choose again), the local runs account at the central
    delta and their shuffled on-device points sit at it."""
    from dataclasses import replace

    from fl.data import datasets as data
    from simulations.cli import main

    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    chosen = {1: {3.0: (0.2, 16), 6.0: (0.35, 16)}, 2: {3.0: (0.5, 64), 6.0: (0.35, 32)}}
    seen: list[tuple[int, list[str]]] = []

    def public_texts(cfg: object, seed: int) -> list[str]:
        loaded = data.load(cfg.data, replace(cfg.users, seed=seed), cfg.release.level)  # type: ignore[attr-defined]
        return sorted(loaded.public["text"][:])

    def fake_choose(inputs: object, totals: list[float], grid: object) -> dict:
        cfg = inputs.cfg  # type: ignore[attr-defined]
        seed = cfg["seed"]
        seen.append((seed, public_texts(cfg, cfg.users.seed)))
        return {t: recipes_mod.Recipe(*chosen[seed][t]) for t in totals}

    from simulations.drivers import compare as cmp

    monkeypatch.setattr(recipes_mod, "choose", fake_choose)
    monkeypatch.setattr(cmp, "_ceiling_inputs", lambda plan, rows: ([0.5, 0.5], {}))
    monkeypatch.setattr(
        calibration, "central_noise_table", lambda targets, q, rounds, delta: dict.fromkeys(targets, 1.0)
    )
    config = Path(__file__).resolve().parents[2] / "simulations" / "experiments" / "quickstart.toml"
    args = ["compare", str(config), "--epsilons", "3,6", "--central-epsilons", "4", "--seeds", "1,2"]
    args += ["--central-set", 'map-in="identity"', "--out", str(tmp_path), "--name", "c", "--collect"]
    assert main(args) == 2  # nothing has run
    err = capsys.readouterr().err.strip().splitlines()
    names = [line.split("not run yet: ")[1] for line in err if "not run yet: " in line]
    assert [s for s, _ in seen] == [1, 2]
    base = config_for(config)
    default = public_texts(base, base["seed"])  # the draw of the config's own seed (42), used by no run
    for seed, texts in seen:  # the run's own public draw, not the config seed's
        assert texts == public_texts(base, seed) != default
    assert seen[0][1] != seen[1][1]
    local = [n for n in names if "sentence-epsilon" in n]
    by_seed = {s: sorted(n for n in local if n.endswith(f"seed={s}__noise-seed={s}")) for s in (1, 2)}
    assert all("map-dim=16" in n for n in by_seed[1]) and "label-epsilon=0.6__" in " ".join(by_seed[1])
    assert sorted("map-dim=64" in n for n in by_seed[2]) == [False, True]  # epsilon 6 at 32: the config's
    assert not any("map-dim=16" in n or "map-dim=32" in n for n in by_seed[2])
    assert any("label-epsilon=1.5__map-dim=64" in n for n in by_seed[2])
    references = sorted(n for n in names if "sentence-mechanism=none" in n)
    assert len(references) == 3  # seed 1 at 16; seed 2 at 64 and at the config's 32 (no map-dim key)
    assert sum("map-dim=16" in n and n.endswith("seed=1__noise-seed=1") for n in references) == 1
    assert sum("map-dim" not in n and n.endswith("seed=2__noise-seed=2") for n in references) == 1
    deltas = {n.split("accounting-delta=")[1].split("__")[0] for n in local}
    (central,) = {n.split("central-delta=")[1].split("__")[0] for n in names if n.startswith("mode=central")}
    assert deltas == {central} and float(central) < 1e-5  # 1 / (10 N) of SST-2's phrase users
    for name in names:
        if name.startswith("mode=central"):
            _fake(tmp_path / "c" / name, 0.8, {"epsilon": 3.9, "delta": float(central)}, holds=False)
        else:
            privacy = {
                "epsilon_total": 3.0,
                "label_protected": "sentence-epsilon" in name,
                "epsilon_shuffled_joint_total": 0.5,
                "delta_shuffled_joint_total": float(name.split("accounting-delta=")[1].split("__")[0])
                if "accounting-delta" in name
                else None,
            }
            _fake(tmp_path / "c" / name, 0.7, **_device_summary(0.7, 0.75, 0.6, privacy))
    assert main(args) == 0
    out = capsys.readouterr().out
    assert len(seen) == 2  # recipes.json kept the choices: none chosen again
    assert "2 recipe(s) as chosen before" in out
    document = json.loads((tmp_path / "c" / "compare.json").read_text())
    chosen = {s: {t: (r["label_share"], r["map_dim"], r["fallback"]) for t, r in by.items()}
              for s, by in document["recipe_by_seed"].items()}  # fmt: skip
    assert chosen == {
        "1": {"3": (0.2, 16, False), "6": (0.35, 16, False)},
        "2": {"3": (0.5, 64, False), "6": (0.35, 32, False)},
    }
    assert document["local_accounting_delta"] == float(central)
    with (tmp_path / "c" / "compare.csv").open() as f:
        table = {(r["series"], r["value"]): r for r in csv.DictReader(f)}
    shuffled = table[("local-shuffled-on-device", "3.0")]
    assert float(shuffled["delta"]) == float(table[("central-user", "4.0")]["delta"]) == float(central)
    assert table[("local-ldp-on-device", "6.0")]["map_dims"] == "16 32"
    assert float(table[("local-ldp-on-device", "6.0")]["noise_free_ceiling_accuracy"]) == pytest.approx(0.75)
    # The federation-gain table and figure of this comparison, written beside compare.csv.
    gain = (tmp_path / "c" / "gain_over_public.md").read_text()
    assert "| local DP, on-device inference | 3 | clean |" in gain and "noise-free ceiling" in gain
    assert (tmp_path / "c" / "gain_over_public.png").stat().st_size > 10_000


def config_for(path: Path) -> object:
    """The config at ``path`` resolved as compare resolves it (its own seed)."""
    from fl import config as config_mod
    from simulations.drivers.grid import Run
    from simulations.drivers.runner import resolve_run

    return config_mod.as_run_config(resolve_run(str(path), Run("probe", {}, {}), plan_mod.like_for_like([]), Path()))


def test_every_clean_point_of_a_seed_is_held_against_one_public_line() -> None:
    """The central point's gain is over the strongest public-only model any run of its seed scored on the clean
    test inputs (here a local recipe's class-means model with no private release), not over its own logistic
    regression; each model keeps its name; sanitized-input points keep their own line; seeds do not mix."""
    from simulations.drivers.compare_lines import share_public_line

    rows = [
        {"series": "central-user", "seed": 1, "test_inputs": "clean", "accuracy": 0.80,
         "public_only_models": {"logistic_regression": 0.70}},
        {"series": "local-ldp-on-device", "seed": 1, "test_inputs": "clean", "accuracy": 0.74, "map_dim": 32,
         "public_only_models": {"logistic_regression": 0.70, "server_model": 0.72}},
        {"series": "local-ldp", "seed": 1, "test_inputs": "sanitized", "accuracy": 0.60, "map_dim": 32,
         "public_only_models": {"server_model": 0.58}, "public_only_accuracy": 0.58, "gain_over_public": 0.02},
        {"series": "non-private", "seed": 1, "test_inputs": "sanitized", "accuracy": 0.75, "map_dim": 16,
         "on_device_accuracy": 0.76, "on_device_public_only_models": {"server_model": 0.725}},
        {"series": "central-user", "seed": 2, "test_inputs": "clean", "accuracy": 0.80,
         "public_only_models": {"logistic_regression": 0.65}},
    ]  # fmt: skip
    line = share_public_line(rows)
    assert line["1"]["accuracy"] == 0.725 and line["1"]["model"] == "server_model (map-dim 16)"
    assert set(line["1"]["models"]) == {"logistic_regression", "server_model (map-dim 32)", "server_model (map-dim 16)"}
    assert rows[0]["public_only_accuracy"] == 0.725 and rows[0]["gain_over_public"] == pytest.approx(0.075)
    assert rows[1]["gain_over_public"] == pytest.approx(0.015)
    assert rows[2]["public_only_accuracy"] == 0.58 and rows[2]["gain_over_public"] == 0.02  # its own line
    assert rows[3]["on_device_gain_over_public"] == pytest.approx(0.035)
    assert rows[4]["public_only_accuracy"] == 0.65 and line["2"]["model"] == "logistic_regression"
