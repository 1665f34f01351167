"""``sanitas compare`` on a user's own small, imbalanced CSV, as a newcomer runs it: what the console says.

The CSV: 1,200 SST-2 sentences relabelled ``ham`` (positive) / ``spam`` (negative), 75% ham, header
``message,category``. Central points whose settings cannot learn on such data are refused before anything
runs (checked on public data); with the check off, the point that learned nothing is flagged in the final
table and named in a warning, and the plot's baseline is the majority-class rate.
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from simulations.cli import main

ROWS, HAM_SHARE = 1200, 0.75


@pytest.fixture(scope="module")
def messages(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """The imbalanced CSV and a config for it (local DP: the quickstart's recipe without encoder tuning)."""
    with gzip.open(data_dir / "sst2" / "train.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for _, line in zip(range(20_000), fh, strict=False)]
    rows = [r for r in rows if len(r["text"].split()) >= 6]  # sentences, not phrases
    rng = np.random.default_rng(7)
    ham = [r["text"] for r in rows if r["label"] == 1]
    spam = [r["text"] for r in rows if r["label"] == 0]
    n_ham = round(ROWS * HAM_SHARE)
    chosen = [(t, "ham") for t in rng.choice(ham, n_ham, replace=False)]
    chosen += [(t, "spam") for t in rng.choice(spam, ROWS - n_ham, replace=False)]
    order = rng.permutation(len(chosen))
    folder = tmp_path_factory.mktemp("own")
    path = folder / "messages.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["message", "category"])
        writer.writerows(chosen[i] for i in order)
    config = folder / "messages.toml"
    config.write_text(
        f'dataset = "{path}"\ntext-column = "message"\nlabel-column = "category"\ntest-fraction = 0.2\n'
        'public-fraction = 0.2\npublic-split = "source"\nusers-per-node = 400\nnum-server-rounds = 5\n'
        'encoder-tuning = "none"\nmap-in = "supervised"\nmap-dim = 2\nmap-scale = 1.0\n'
        'sentence-mechanism = "class_rr"\nsentence-epsilon = 5.0\nlabel-mechanism = "rr"\nlabel-epsilon = 1.0\n'
        "server-epochs = 10\nnoise-seed = 0\n"
    )
    return config


def _compare(config: Path, out: Path, *extra: str) -> list[str]:
    args = ["compare", str(config), "--epsilons", "6", "--central-epsilons", "2", "--seeds", "1"]
    args += ["--label-share", "0.15", "--out", str(out), "--name", "c", *extra]
    return args


def test_central_points_that_cannot_learn_on_public_data_are_refused_before_anything_runs(
    messages: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A seeded central start (compare starts central runs from the public model unless told otherwise; from
    # there a frozen model still beats the majority class, and the public-only line flags it instead).
    argv = _compare(messages, tmp_path, "--central-set", "server-learning-rate=1e-7", "--set", 'central-start="seeded"')
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    err = [line for line in lines if not line.startswith("checking central points on public data")]  # its bar
    assert len(err) == 1 and err[0].startswith("sanitas: error: "), lines
    assert "central points learn nothing on public data with these settings: epsilon 2 (" in err[0]
    assert "majority-class rate" in err[0] and "public hold-out documents" in err[0]
    assert "server-learning-rate" in err[0] and "--central-check off" in err[0]
    assert not (tmp_path / "c" / "logs").exists()  # nothing ran


def test_a_point_that_learned_nothing_is_flagged_in_the_table_and_the_warning(
    messages: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _compare(
        messages,
        tmp_path,
        "--central-set",
        "server-learning-rate=1e-7",
        "--central-check",
        "off",
        "--set",
        'central-start="seeded"',
    )
    assert main(argv) == 0
    out, err = capsys.readouterr()
    summary = json.loads((tmp_path / "c" / "compare.json").read_text())
    majority = max(summary["test_class_priors"])
    assert 0.7 < majority < 0.8  # 75% ham, in the seeded test split
    with (tmp_path / "c" / "compare.csv").open() as fh:
        points = {r["series"]: r for r in csv.DictReader(fh)}
    table = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 6}
    flagged = [s for s, line in table.items() if "NO: learned nothing" in line]
    for series, point in points.items():  # flagged exactly when at or below the majority-class rate
        if series in table:
            below = float(point["accuracy_mean"]) <= majority + 0.005
            assert (series in flagged) == below, (series, point["accuracy_mean"], majority, out)
    assert "central-user" in flagged, out  # power: the frozen central point is caught
    assert "yes" in table["non-private"], out  # and a point that learned is not
    assert f"did not beat the majority-class rate {majority:.3f}" in err and "central-user 2" in err
    assert "random guess" not in out
    # The local point's shuffled figure, on the device, sits at the central side's delta (the local run accounts
    # at it), and the point carries its noise-free ceiling: the non-private run at its map-dim (the config's).
    shuffled, central = points["local-shuffled-on-device"], points["central-user"]
    assert float(shuffled["delta"]) == pytest.approx(float(central["delta"]), rel=1e-5)
    device = points["local-ldp-on-device"]
    assert shuffled["test_inputs"] == "clean" and shuffled["accuracy_mean"] == device["accuracy_mean"]
    assert points["non-private"]["parameter"] == "map-dim" and points["local-ldp"]["map_dims"] == "2"
    assert points["local-ldp"]["noise_free_ceiling_accuracy"] == points["non-private"]["accuracy_mean"]
