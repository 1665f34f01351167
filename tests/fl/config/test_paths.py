"""``fl.config.paths.write_problem``: the file system is asked (a temporary file written and removed), so a
folder root cannot write into is found where ``os.access`` would say yes."""

from __future__ import annotations

import errno
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fl.config.paths import nearest_existing, write_problem


@pytest.fixture
def immutable_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody, root included, can write into (``chattr +i``); skipped where chattr is refused."""
    folder = tmp_path / "immutable"
    folder.mkdir()
    if shutil.which("chattr") is None:
        pytest.skip("no chattr here")
    done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"chattr +i refused here (needs CAP_LINUX_IMMUTABLE): {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_writable_folder_has_no_problem_and_keeps_nothing(tmp_path: Path) -> None:
    assert write_problem(tmp_path) is None
    assert write_problem(tmp_path / "not" / "yet") is None  # created later, under tmp_path
    assert list(tmp_path.iterdir()) == []  # neither the probe nor the folders are left


def test_nearest_existing(tmp_path: Path) -> None:
    assert nearest_existing(tmp_path / "a" / "b") == tmp_path
    assert nearest_existing(tmp_path) == tmp_path


def test_an_immutable_folder_is_found_even_as_root(immutable_dir: Path) -> None:
    assert write_problem(immutable_dir) == (immutable_dir, "Operation not permitted")
    assert write_problem(immutable_dir / "run" / "x") == (immutable_dir, "Operation not permitted")


def test_a_refused_write_is_reported_with_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    assert write_problem(tmp_path / "out") == (tmp_path, "Read-only file system")
