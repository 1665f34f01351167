"""A run-config TOML file as editors write it: a byte-order mark is accepted, a key given twice is named
with its lines, bytes that are not UTF-8 are named with their line and offset (``fl.config.toml_file``)."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from fl.config import ConfigError, load_toml
from fl.config.toml_file import repeated_key
from tests.conftest import REPO

COHORTS = REPO / "simulations" / "experiments" / "sst2_public_cohorts.toml"


def test_a_file_with_a_byte_order_mark_loads_as_the_same_file_without_it(tmp_path: Path) -> None:
    """Windows editors (Notepad, PowerShell's Out-File -Encoding utf8) start a UTF-8 file with EF BB BF."""
    plain = COHORTS.read_bytes()
    marked = tmp_path / "bom.toml"
    marked.write_bytes(codecs.BOM_UTF8 + plain)
    assert load_toml(marked) == load_toml(COHORTS)
    assert load_toml(marked)["dataset"] == "sst2"  # the first key is not "\ufeffdataset" or refused


def test_a_key_given_twice_is_named_with_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.toml"
    path.write_text('dataset = "sst2"\nsentence-epsilon = 3\n"dataset" = "imdb"\n')
    with pytest.raises(ConfigError) as info:
        load_toml(path)
    assert str(info.value) == f"config file {str(path)!r}: key 'dataset' is given twice (lines 1 and 3): keep one"


def test_a_key_given_twice_after_a_bom_and_a_multiline_value(tmp_path: Path) -> None:
    """Line numbers count the file's lines (a BOM adds none); a multi-line string's lines are not keys."""
    path = tmp_path / "dup.toml"
    text = 'run-name = "a"\nsentence-options = """\nmap-dim = 1\n"""\nmap-dim = 8\nseed = 1\nmap-dim = 16\n'
    path.write_bytes(codecs.BOM_UTF8 + text.encode())
    with pytest.raises(ConfigError, match=r"key 'map-dim' is given twice \(lines 5 and 7\): keep one"):
        load_toml(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = 1\nb = 2\na = 3\n", ("a", 1, 3)),
        ("a = 1\n'a' = 2\n", ("a", 1, 2)),
        ("a = [\n1,\n]\nb = 1\n", None),
        ("[t]\nx = 1\n[u]\nx = 2\n", None),  # the same name in two tables is two keys
        ("s = '''\nx = 1\n'''\nx = 2\n", None),
    ],
)
def test_repeated_key(text: str, expected: tuple[str, int, int] | None) -> None:
    assert repeated_key(text) == expected


def test_other_toml_errors_keep_tomllib_words(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("sentence-epsilon = = 3\n")
    with pytest.raises(ConfigError, match=r"is not valid TOML: .*line 1"):
        load_toml(path)


def test_bytes_that_are_not_utf8_are_named_with_line_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('sentence-epsilon = 3\nrun-name = "café"\n'.encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_toml(path)
    message = str(info.value)
    assert message == f"config file {str(path)!r} is not UTF-8 text (byte 0xe9 at line 2, offset 36): save it as UTF-8"


def test_a_utf16_file_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "utf16.toml"
    path.write_bytes("sentence-epsilon = 3\n".encode("utf-16"))  # with its byte-order mark, as Notepad writes it
    with pytest.raises(ConfigError, match=r"is UTF-16 text, not UTF-8: save it as UTF-8"):
        load_toml(path)
