"""Reading a run-config TOML file: the file as written (a UTF-8 byte-order mark is accepted, as Windows
editors write one), and one line naming the file and where it is wrong when it cannot be read: the byte
that is not UTF-8 (its line and offset), the key given twice (both lines), or tomllib's own message.
"""

from __future__ import annotations

import codecs
import re
import tomllib
from pathlib import Path
from typing import Any

from fl.config.errors import ConfigError

#: Where tomllib says it stopped: ``(at line 3, column 17)``; ``(at end of document)`` has no line.
_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)")
#: A ``key =`` line: a bare key or a quoted one (a dotted key does not match: no flat config has one).
_KEY_LINE = re.compile(r"""\s*("(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[A-Za-z0-9_-]+)\s*=""")
#: A table header, ``[name]`` or ``[[name]]``: the keys after it are its own.
_HEADER = re.compile(r"\s*\[")


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a flat run-config TOML file (keys as in ``DEFAULTS``); a :class:`ConfigError` naming the file
    (and the key, line or byte) when it cannot be."""
    path = Path(path)
    name = str(path)
    if not path.is_file():
        raise ConfigError(f"config file {name!r} not found")
    try:
        raw = path.read_bytes()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ConfigError(f"config file {name!r} cannot be read ({reason}): check its permissions") from None
    text = decode_toml_text(raw, name)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(toml_problem(name, text, str(err))) from None
    nested = [k for k, v in data.items() if isinstance(v, dict)]
    if nested:
        raise ConfigError(f"{path}: config must be flat key = value pairs; found tables {nested}")
    return data


def decode_toml_text(raw: bytes, name: str) -> str:
    """The text of a config file's bytes: UTF-8, after a byte-order mark if there is one (the same text
    as the file without it). Other encodings are refused with the first byte that is not UTF-8."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise ConfigError(f"config file {name!r} is UTF-16 text, not UTF-8: save it as UTF-8")
    skip = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        return raw[skip:].decode("utf-8")
    except UnicodeDecodeError as err:
        at = skip + err.start
        line = raw.count(b"\n", 0, at) + 1
        raise ConfigError(
            f"config file {name!r} is not UTF-8 text (byte {raw[at]:#04x} at line {line}, offset {at}): "
            "save it as UTF-8"
        ) from None


def toml_problem(name: str, text: str, message: str) -> str:
    """The one line for tomllib's ``message`` on ``text``: a key given twice named with both of its lines
    (tomllib says only "Cannot overwrite a value"), anything else as tomllib words it."""
    if "Cannot overwrite a value" in message:
        at = _AT_LINE.search(message)
        repeated = repeated_key(text, int(at.group(1)) if at else None)
        if repeated is not None:
            key, first, second = repeated
            return f"config file {name!r}: key {key!r} is given twice (lines {first} and {second}): keep one"
    return f"config file {name!r} is not valid TOML: {message}"


def repeated_key(text: str, last_line: int | None = None) -> tuple[str, int, int] | None:
    """``(key, first line, second line)`` of the first key given twice in the same table of ``text``
    (line numbers from 1), looking no further than ``last_line``; None when there is none.

    Reads ``key =`` lines (bare or quoted keys, a quoted key the same key as the bare one), skipping
    the inside of multi-line strings; enough for flat run configs, whose tomllib error names no key.
    """
    seen: dict[tuple[str, str], int] = {}
    table = ""
    open_quote = ""  # the delimiter of the multi-line string a line is inside, if any
    for number, line in enumerate(text.splitlines(), start=1):
        if last_line is not None and number > last_line:
            break
        if open_quote:
            if line.count(open_quote) % 2:
                open_quote = ""
            continue
        if _HEADER.match(line):
            table = line.strip()
            continue
        match = _KEY_LINE.match(line)
        if match is None:
            continue
        key = _key_name(match.group(1))
        if key is not None:
            if (table, key) in seen:
                return key, seen[(table, key)], number
            seen[(table, key)] = number
        rest = line[match.end() :]
        for quote in ('"""', "'''"):
            if rest.count(quote) % 2:  # a multi-line string opens on this line and does not close on it
                open_quote = quote
                break
    return None


def _key_name(written: str) -> str | None:
    """The key a bare or quoted key stands for (``"dataset"`` is ``dataset``), as tomllib reads it."""
    try:
        return next(iter(tomllib.loads(f"{written} = 0")))
    except (tomllib.TOMLDecodeError, StopIteration):
        return None
