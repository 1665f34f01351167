"""A user's class named in the run config: both spellings, the file found beside the config then in the working
directory, one import per file, and one-line errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from fl.config.plugins import anchor_specs
from mechanisms import user_code


def _write(folder: Path, name: str = "thing.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("class Thing:\n    value = 3\n")
    return path


def test_a_file_beside_the_config_wins_over_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    beside = _write(tmp_path / "experiment")
    _write(tmp_path / "cwd")
    monkeypatch.chdir(tmp_path / "cwd")
    raw = anchor_specs({"strategy": "thing.py:Thing", "sentence-mechanism": "purkayastha"}, beside.parent / "c.toml")
    assert raw["strategy"] == f"{beside.resolve()}:Thing"
    assert raw["sentence-mechanism"] == "purkayastha"  # a registry name is left alone
    # No config file (Python, --set on a mapping): the working directory.
    assert (
        anchor_specs({"strategy": "thing.py:Thing"})["strategy"] == f"{(tmp_path / 'cwd' / 'thing.py').resolve()}:Thing"
    )


def test_a_file_is_imported_once_under_a_stable_name(tmp_path: Path) -> None:
    path = _write(tmp_path)
    first = user_code.load(f"{path}:Thing", "strategy")
    assert first is user_code.load(f"{path}:Thing", "strategy")  # the same class, not a second import
    assert first.__module__ == user_code.module_name(path.resolve()) and first.value == 3


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("missing.py:Thing", "no file 'missing.py' beside the config file or in the working directory"),
        ("thing.py:Other", "thing.py defines no 'Other'"),
        ("no_such_module_xyz:Thing", "cannot import module 'no_such_module_xyz'"),
        ("not a spec", "write 'package.module:Class' or 'path/to/file.py:Class'"),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_key(tmp_path: Path, spec: str, words: str) -> None:
    _write(tmp_path)
    with pytest.raises(ValueError) as err:
        user_code.load(spec, "strategy", bases=(tmp_path,))
    assert str(err.value).startswith(f"strategy = {spec!r}") and words in str(err.value)
    assert "\n" not in str(err.value)


def test_a_file_that_fails_to_import_says_why(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ValueError, match=r"importing broken.py failed: RuntimeError: boom"):
        user_code.load(f"{tmp_path / 'broken.py'}:Thing", "strategy")
