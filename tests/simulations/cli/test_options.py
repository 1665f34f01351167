"""Every subcommand refuses a bad option while the arguments are parsed: exit 2, one line naming the
subcommand, the option and the value, no traceback, and no handler reached (no work done)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from simulations import cli
from tests.conftest import REPO
from tests.support.cli import block_handlers, refuse_writes_in

# (argv with {file} = an existing file, {dir} = an existing folder, fragments the one line must hold)
ROWS: list[tuple[list[str], tuple[str, ...]]] = [
    (["run", "c.toml", "--out", "{file}"], ("run: argument --out", "is a file", "{file}")),
    (["run", "c.toml", "--out", "{file}/sub"], ("run: argument --out", "lies under the file")),
    (["run", "--resume", "{dir}/nope"], ("run: argument --resume", "existing folder")),
    (["sweep", "c.toml", "--out", "{file}"], ("sweep: argument --out", "is a file")),
    (["sweep", "c.toml", "--out", "{dir}", "--jobs", "0"], ("sweep: argument --jobs", "got '0'")),
    (["sweep", "c.toml", "--out", "{dir}", "--timeout", "-1"], ("sweep: argument --timeout", "got '-1'")),
    (["sweep", "c.toml", "--out", "{dir}", "--attacks", "mia,telepathy"], ("argument --attacks", "'telepathy'")),
    (["compare", "c.toml", "--out", "{file}"], ("compare: argument --out", "is a file")),
    (["compare", "c.toml", "--out", "{dir}", "--node-multipliers", "1,z"], ("--node-multipliers", "'z'")),
    (["compare", "c.toml", "--out", "{dir}", "--central-check", "of"], ("--central-check", "'of'")),
    (["init-config", "{file}", "--out", "{dir}"], ("init-config: argument --out", "is a folder")),
    (["tune", "c.toml", "--out", "{dir}", "--epsilons", "1,-2"], ("tune: argument --epsilons", "'-2' is not one")),
    (["tune", "c.toml", "--out", "{file}", "--epsilons", "1"], ("tune: argument --out", "is a file")),
    (["tune", "c.toml", "--out", "{dir}"], ("tune: the following arguments are required: --epsilons",)),
    (["reproduce", "x", "--out", "{file}"], ("reproduce: argument --out", "is a file")),
    (["reproduce", "x", "--out", "{dir}", "--docs", "{file}"], ("reproduce: argument --docs", "is a file")),
    (["audit", "c.toml", "--trials", "0"], ("audit: argument --trials", "whole number >= 1", "got '0'")),
    (["audit", "c.toml", "--trials", "many"], ("audit: argument --trials", "got 'many'")),
    (["audit", "c.toml", "--alpha", "1.5"], ("audit: argument --alpha", "between 0 and 1", "got '1.5'")),
    (["audit", "c.toml", "--seed", "-2"], ("audit: argument --seed", "got '-2'")),
    (["audit", "c.toml", "--out", "{dir}"], ("audit: argument --out", "is a folder")),
    (["audit", "c.toml", "--out", "{dir}/no/such.json"], ("audit: argument --out", "existing folder")),
    (["audit-mechanism", "x.py:C", "--epsilon", "0"], ("audit-mechanism: argument --epsilon", "got '0'")),
    (["audit-mechanism", "x.py:C", "--options", "a b"], ("audit-mechanism: argument --options", "'a b'")),
    (["attack", "{dir}", "--attacks", "telepathy"], ("attack: argument --attacks", "unknown attack 'telepathy'")),
    (["attack", "{dir}", "--targets", "0"], ("attack: argument --targets", "got '0'")),
    (["attack", "{dir}/nope"], ("attack: argument results_dir", "existing folder")),
    (["report-documents", "{dir}", "--epsilon", "0"], ("report-documents: argument --epsilon", "got '0'")),
    (["audit-levels", "--seed", "-1"], ("audit-levels: argument --seed", "got '-1'")),
    (["composition-table", "--out", "{file}"], ("composition-table: argument --out", "is a file")),
    (["shuffle-table", "c.toml", "--n", "0"], ("shuffle-table: argument --n", "got '0'")),
    (["shuffle-table", "c.toml", "--delta", "2"], ("shuffle-table: argument --delta", "got '2'")),
    (
        ["word-survival", "c.toml", "--out", "{dir}", "--mechanisms", "gauss"],
        ("--mechanisms", "unknown word mechanism"),
    ),
    (["word-survival", "c.toml", "--out", "{dir}", "--docs", "0"], ("word-survival: argument --docs", "got '0'")),
    (["privemb-errors", "--out", "{dir}", "--sources", "web"], ("privemb-errors: argument --sources", "'web'")),
    (["privemb-errors", "--out", "{dir}", "--epsilons", "1,x"], ("privemb-errors: argument --epsilons", "'x'")),
    (["config-reference", "--repo", "{dir}/nope"], ("config-reference: argument --repo", "existing folder")),
    (["sweep", "c.toml"], ("sweep: the following arguments are required: --out",)),
    (["telepathy"], ("argument command: invalid choice: 'telepathy'",)),
]


def _fill(text: str, tmp_path: Path) -> str:
    return text.replace("{file}", str(tmp_path / "a-file")).replace("{dir}", str(tmp_path / "a-dir"))


def test_every_subcommand_has_a_bad_option_row() -> None:
    covered = {argv[0] for argv, _ in ROWS}
    assert covered >= {module.NAME for module in cli.SUBCOMMANDS}, covered


@pytest.mark.parametrize(("argv", "fragments"), ROWS, ids=[" ".join(argv)[:60] for argv, _ in ROWS])
def test_a_bad_option_is_one_line_before_any_work(
    argv: list[str],
    fragments: tuple[str, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "a-file").write_text("not a folder\n")
    (tmp_path / "a-dir").mkdir()
    block_handlers(monkeypatch, "the bad option")
    code = cli.main([_fill(a, tmp_path) for a in argv])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("sanitas: error: "), err
    missing = [f for f in (_fill(f, tmp_path) for f in fragments) if f not in lines[0]]
    assert not missing, f"{missing} not in {lines[0]!r}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-dir", "a-file"]  # nothing written
    assert not any((tmp_path / "a-dir").iterdir())


def test_the_command_refuses_an_out_file_without_a_traceback(tmp_path: Path) -> None:
    """As a user runs it: ``sanitas run ... --out FILE`` used to end in a NotADirectoryError traceback."""
    (tmp_path / "a-file").write_text("")
    config = REPO / "simulations" / "experiments" / "sst2_class_rr_4000.toml"
    argv = [sys.executable, "-m", "simulations.cli", "run", str(config), "--out", str(tmp_path / "a-file")]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        proc.stderr.strip()
        == f"sanitas: error: run: argument --out: must be a folder, and it is a file, got {str(tmp_path / 'a-file')!r}"
    )


#: (argv with {locked} = a folder no file can be written into, fragments the one line must hold)
UNWRITABLE: list[tuple[list[str], tuple[str, ...]]] = [
    (["run", "c.toml", "--out", "{locked}"], ("run: argument --out: cannot write into '{locked}'",)),
    (["sweep", "c.toml", "--out", "{locked}/new"], ("sweep: argument --out: cannot create '{locked}/new'",)),
    (["compare", "c.toml", "--out", "{locked}"], ("compare: argument --out: cannot write into '{locked}'",)),
    (["tune", "c.toml", "--out", "{locked}", "--epsilons", "1"], ("tune: argument --out", "'{locked}'")),
    (["reproduce", "x", "--out", "{locked}"], ("reproduce: argument --out", "'{locked}'")),
    (["privemb-errors", "--out", "{locked}"], ("privemb-errors: argument --out", "'{locked}'")),
    (["audit", "c.toml", "--out", "{locked}/a.json"], ("audit: argument --out: cannot write into '{locked}'",)),
    (["init-config", "data.csv", "--out", "{locked}/c.toml"], ("init-config: argument --out", "'{locked}'")),
]


@pytest.mark.parametrize(("argv", "fragments"), UNWRITABLE, ids=[" ".join(a)[:40] for a, _ in UNWRITABLE])
def test_an_output_that_cannot_be_written_is_refused_while_parsing(
    argv: list[str],
    fragments: tuple[str, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A folder where writing a file fails (a read-only mount, an immutable folder: root's os.access says yes
    to both) is refused by the option type, with the reason and the fix, before any work."""
    import errno

    locked = tmp_path / "locked"
    locked.mkdir()
    refuse_writes_in(monkeypatch, locked, errno.EROFS)
    block_handlers(monkeypatch, "the unwritable output")
    code = cli.main([a.replace("{locked}", str(locked)) for a in argv])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, lines
    assert "(Read-only file system)" in lines[0] and lines[0].endswith("choose a writable folder"), lines[0]
    missing = [f for f in (f.replace("{locked}", str(locked)) for f in fragments) if f not in lines[0]]
    assert not missing, f"{missing} not in {lines[0]!r}"
    assert list(locked.iterdir()) == []


def test_an_existing_out_file_that_cannot_be_written_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out FILE`` (``out_file``) over a file that cannot be opened for writing (immutable: even root cannot)."""
    target = tmp_path / "audit.json"
    target.write_text("{}")
    if subprocess.run(["chattr", "+i", str(target)], capture_output=True, check=False).returncode != 0:
        pytest.skip("chattr +i refused here (needs CAP_LINUX_IMMUTABLE)")
    try:
        code = cli.main(["audit", "c.toml", "--out", str(target)])
    finally:
        subprocess.run(["chattr", "-i", str(target)], check=True)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == (
        f"sanitas: error: audit: argument --out: cannot write {str(target)!r} (Operation not permitted): "
        "choose another file"
    )
    assert target.read_text() == "{}"
