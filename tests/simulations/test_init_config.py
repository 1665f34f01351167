"""``sanitas init-config FILE``: the guessed columns, the written config (its keys, its class counts and
majority-class rate, and that it resolves), and bad input refused in one line with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fl import config
from fl.data import datasets
from simulations import cli
from simulations.drivers.init_config import CENTRAL_SETS, DataSummary, Entry, config_entries, summarise
from tests.conftest import REPO
from tests.support.run_data import read_run_files

#: 40 ham and 6 spam messages: always answering 'ham' scores 40 / 46 = 0.8696.
HAM, SPAM = 40, 6


def _sms(folder: Path, name: str = "sms.csv") -> Path:
    """An imbalanced CSV with header ``message,category``; spam every 7th row (6 of them)."""
    rows = [
        ("win a free prize now, call today", "spam") if i % 7 == 3 and i < 42 else (f"see you at {i} ok", "ham")
        for i in range(HAM + SPAM)
    ]
    assert sum(y == "spam" for _, y in rows) == SPAM
    path = folder / name
    path.write_text("message,category\n" + "".join(f'"{m}",{y}\n' for m, y in rows))
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    code = cli.main(["init-config", *argv])
    captured = capsys.readouterr()
    return code, [line for line in captured.err.splitlines() if line.strip()], captured.out


def test_guesses_the_columns_and_writes_the_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _sms(tmp_path)
    code, err, out = _run(["sms.csv"], capsys)
    assert (code, err) == (0, []), err
    assert "wrote sms.toml: 46 rows, text-column 'message', label-column 'category'" in out
    text = (tmp_path / "sms.toml").read_text()
    assert "#   ham          40 rows (87.0%)" in text
    assert "#   spam          6 rows (13.0%)" in text
    assert "# A model that always answers 'ham' scores 0.870: a result must beat that" in text
    assert "#   sanitas run sms.toml" in text
    assert "--central-set 'map-in=\"identity\"' --central-set num-server-rounds=30" in text
    written = tomllib.loads(text)
    assert {k: written[k] for k in ("dataset", "text-column", "label-column", "label-names")} == {
        "dataset": "sms.csv",
        "text-column": "message",
        "label-column": "category",
        "label-names": "ham,spam",
    }
    assert (written["test-fraction"], written["seed"], written["public-fraction"], written["public-split"]) == (
        0.2,
        42,
        0.2,
        "source",
    )
    assert (written["map-in"], written["sentence-mechanism"], written["label-mechanism"]) == (
        "supervised",
        "class_rr",
        "rr",
    )
    assert written["sentence-epsilon"] + written["label-epsilon"] == pytest.approx(6.28)
    # about 46 * 0.8 * 0.8 = 29 private users on about 8 nodes; too few public documents to tune the encoder
    assert (written["users-per-node"], written["encoder-tuning"]) == (4, "none")


def test_the_written_config_resolves_and_reads_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _sms(tmp_path)
    assert cli.main(["init-config", "sms.csv", "--out", "mine.toml"]) == 0
    cfg = config.resolve(config.load_toml(tmp_path / "mine.toml"))
    assert datasets.check_source(cfg.data, cfg.users) == "file sms.csv"
    splits, names, _ = read_run_files(cfg)
    assert names == ["ham", "spam"]
    labels = splits["pool"]["label"][:]
    assert (labels.count(0), labels.count(1)) == (HAM, SPAM)


def test_the_compare_commands_central_runs_resolve(tmp_path: Path) -> None:
    """The central side of the suggested `sanitas compare` is a valid central run, also when the written
    recipe tunes the encoder on the public part."""
    for rows in (46, 100_000):
        counts = {"a": rows - 9, "b": 9}
        summary = DataSummary(str(tmp_path / "sms.csv"), ("m", "c"), rows, "m", "c", counts, False, 0, 20.0)
        values = {e.key: e.value for e in config_entries(summary)}
        assert values["encoder-tuning"] == ("public" if rows == 100_000 else "none")
        sets = dict(s.split("=", 1) for s in CENTRAL_SETS)
        central = config.resolve({**values, **{k: config.parse_value(v) for k, v in sets.items()}, "mode": "central"})
        assert (central["map-in"], central["public-fraction"], central["num-server-rounds"]) == ("identity", 0.2, 30)


def test_few_distinct_values_make_the_label_and_the_longest_text_the_text(tmp_path: Path) -> None:
    path = tmp_path / "reviews.jsonl"
    rows = [
        {"id": i, "title": f"t{i}", "review": f"a much longer review text, number {i}", "stars": i % 3}
        for i in range(30)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = summarise(str(path))
    assert (summary.text_column, summary.label_column, summary.integer_labels) == ("review", "stars", True)
    assert summary.counts == {"0": 10, "1": 10, "2": 10}
    values = {e.key: e.value for e in config_entries(summary)}
    assert (values["label-names"], values["map-dim"]) == ("0,1,2", 3)


def test_named_columns_are_taken_and_joined(tmp_path: Path) -> None:
    path = tmp_path / "mail.csv"
    path.write_text("subject,body,label\n" + "".join(f"s{i},body {i},{'a' if i % 2 else 'b'}\n" for i in range(10)))
    summary = summarise(str(path), text_column="subject, body", label_column="label")
    assert (summary.text_column, summary.label_column, summary.names) == ("subject,body", "label", ["a", "b"])


def test_empty_texts_are_dropped_in_the_written_config(tmp_path: Path) -> None:
    path = tmp_path / "sms.csv"
    path.write_text(
        "message,category\n" + "".join(f"{'' if i < 2 else f'm {i}'},{'x' if i % 2 else 'y'}\n" for i in range(10))
    )
    values = {e.key: e.value for e in config_entries(summarise(str(path)))}
    assert values["empty-documents"] == "drop"


def _bad_rows(tmp_path: Path) -> list[tuple[list[str], str]]:
    """(argv, the whole one line after ``sanitas: error: init-config: ``)."""
    sms = _sms(tmp_path)
    (tmp_path / "one.csv").write_text("message,category\nhello,ham\nbye,ham\n")
    (tmp_path / "blank.csv").write_text("message,category\nhello,ham\nbye,\nok,spam\n")
    (tmp_path / "binary.csv").write_bytes(b"message,category\n\xff\xfe hello,ham\n")
    (tmp_path / "exists.toml").write_text("# mine\n")
    return [
        ([str(tmp_path / "nope.csv")], f"data file {str(tmp_path / 'nope.csv')!r} not found"),
        (
            [str(tmp_path / "binary.csv")],
            f"data file {str(tmp_path / 'binary.csv')!r} is not UTF-8 text (byte 0xff cannot be decoded): save it as "
            "UTF-8",
        ),
        (
            [str(tmp_path / "one.csv")],
            f"every row of {str(tmp_path / 'one.csv')!r} has label 'ham' (label column 'category'): a classifier "
            "needs at least 2 classes",
        ),
        (
            [str(tmp_path / "blank.csv")],
            f"label column 'category' of {str(tmp_path / 'blank.csv')!r} is empty, null or NaN in 1 row(s) (first at "
            "row 1): the run refuses them; fill in or remove those rows",
        ),
        (
            [str(sms), "--out", str(tmp_path / "exists.toml")],
            f"--out {str(tmp_path / 'exists.toml')!r} exists: give another name, or --force to overwrite it",
        ),
        (
            [str(sms), "--label-column", "categry"],
            f"--label-column 'categry' is not a column of {str(sms)!r}; did you mean 'category'? (columns: message, "
            "category)",
        ),
        (
            [str(sms), "--text-column", "message,body"],
            f"--text-column 'body' is not a column of {str(sms)!r} (columns: message, category)",
        ),
    ]


def test_bad_input_is_one_line_with_exit_code_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for argv, message in _bad_rows(tmp_path):
        code, err, _ = _run([*argv, "--out", str(tmp_path / "new.toml")] if "--out" not in argv else argv, capsys)
        assert (code, err) == (2, [f"sanitas: error: init-config: {message}"]), argv
    assert not (tmp_path / "new.toml").exists()
    assert (tmp_path / "exists.toml").read_text() == "# mine\n"


def test_force_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sms, out = _sms(tmp_path), tmp_path / "exists.toml"
    out.write_text("# mine\n")
    code, err, _ = _run([str(sms), "--out", str(out), "--force"], capsys)
    assert (code, err) == (0, [])
    assert tomllib.loads(out.read_text())["label-names"] == "ham,spam"


def test_the_command_refuses_an_unreadable_file_without_a_traceback(tmp_path: Path) -> None:
    """As a user runs it, in a process of its own."""
    (tmp_path / "binary.csv").write_bytes(b"message,category\n\xff\xfe hello,ham\n")
    argv = [sys.executable, "-m", "simulations.cli", "init-config", "binary.csv"]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_env())
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == (
        "sanitas: error: init-config: data file 'binary.csv' is not UTF-8 text (byte 0xff cannot be decoded): save "
        "it as UTF-8"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["binary.csv"]


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def test_entries_are_keys_of_the_run_config() -> None:
    summary = DataSummary("x.csv", ("t", "y"), 10, "t", "y", {"a": 5, "b": 5}, False, 0, 3.0)
    entries = config_entries(summary)
    assert all(isinstance(e, Entry) and e.key in config.DEFAULTS for e in entries)
    assert len({e.key for e in entries}) == len(entries)


def test_the_example_config_runs_on_the_example_file_as_init_config_would_write_it() -> None:
    """simulations/experiments/own_data_csv.toml with --set dataset=docs/examples/messages.csv (docs/own-data.md):
    it resolves and reads the file, and its keys are those init-config writes for that file, but the file's
    name and the node size (the example is sized for a file of thousands of rows)."""
    import csv

    example = REPO / "docs" / "examples" / "messages.csv"
    with example.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert (len(rows), sum(r["category"] == "ham" for r in rows)) == (40, 34)
    written = config.load_toml(REPO / "simulations" / "experiments" / "own_data_csv.toml")
    cfg = config.resolve({**written, "dataset": str(example)})
    assert datasets.check_source(cfg.data, cfg.users) == f"file {example}"
    assert read_run_files(cfg)[1] == ["ham", "spam"]
    generated = {e.key: e.value for e in config_entries(summarise(str(example)))}
    differ = {k for k in generated.keys() | written.keys() if generated.get(k) != written.get(k)}
    assert differ == {"dataset", "users-per-node"}


def test_a_column_that_is_no_label_is_refused(tmp_path: Path) -> None:
    """Would catch an id column (all values distinct) taken for a label, or a huge integer id counted
    class by class."""
    from simulations.drivers.init_config import InitConfigError

    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps({"id": i, "note": f"note {i}"}) + "\n" for i in range(5)))
    with pytest.raises(InitConfigError, match=r"^no column of .* looks like a label .*columns: id, note\)$"):
        summarise(str(path))
    path.write_text("".join(json.dumps({"note": f"note {i}", "label": y}) + "\n" for i, y in enumerate([0, 10**9])))
    with pytest.raises(InitConfigError, match=r"has 1000000001 classes \(at most 100\)"):
        summarise(str(path))
