"""``key=value`` overrides: the one parser of ``--set``, ``--central-set`` and ``--grid`` arguments.

``sanitas run``, ``sanitas sweep`` and ``sanitas compare`` (and the sweep's in-process check of
every run's config) all split their ``key=value`` arguments here: at the first ``=``, the key
stripped, the value parsed as TOML (:func:`fl.config.parse_value`: ``2`` is an integer, ``"x"``
a string, an item that is not TOML the bare string). Only :mod:`fl.config` is imported, so the
sweep can check every run's config without the seconds that the simulation's imports take.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fl import config as config_mod
from fl.config.plugins import anchor_specs


def split_override(item: str, option: str = "--set", form: str = "key=value") -> tuple[str, str]:
    """``(key, value text)`` of one ``key=value`` argument: split at the first ``=``, the key
    stripped, the value text as typed.

    Raises ``ConfigError("<option> expects <form>, got '<item>'")`` when there is no ``=``.
    """
    key, sep, text = item.partition("=")
    if not sep:
        raise config_mod.ConfigError(f"{option} expects {form}, got {item!r}")
    return key.strip(), text


def parse_override(item: str, option: str = "--set") -> tuple[str, Any]:
    """``(key, value)`` of one ``key=value`` argument, the value parsed as TOML."""
    key, text = split_override(item, option)
    return key, config_mod.parse_value(text.strip())


def parse_overrides(items: Iterable[str], option: str = "--set") -> dict[str, Any]:
    """``key -> value`` of ``key=value`` arguments, in order (a repeated key: the last one wins)."""
    return dict(parse_override(item, option) for item in items)


def override_key(item: str) -> str:
    """The key of a ``key=value`` argument, or the whole argument (stripped) when it has no ``=``
    (for checks that come before the argument itself is refused)."""
    try:
        return split_override(item)[0]
    except config_mod.ConfigError:
        return item.strip()


def load_with_overrides(path: str | Path, items: Iterable[str], option: str = "--set") -> dict[str, Any]:
    """The raw (unresolved) run config of a TOML file with ``key=value`` arguments applied."""
    raw = config_mod.load_toml(path)
    raw.update(parse_overrides(items, option))
    return dict(anchor_specs(raw, path))  # a user's file.py:Class beside the config file, then in the cwd
