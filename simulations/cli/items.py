"""Option types of the list and ``KEY=VALUE`` options (``--set``, ``--central-set``, ``--grid``, ``--seeds``,
``--label-share``, ...): each refuses a bad value while the arguments are parsed, before anything is loaded,
naming the value as the user typed it (argparse adds the flag: ``argument --set: ...``). A command that sets
some config keys itself declares them beside its flags (``owned``: key -> why and which flag sets it), so a
``--set`` of one of them is refused here, not after the work that would discover the clash."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from mechanisms.suggest import did_you_mean
from simulations.cli.options import open_unit_interval, positive_float


def _refuse(problem: str, text: str) -> NoReturn:
    raise argparse.ArgumentTypeError(f"{text!r}: {problem}")


def check_item(text: str, form: str = "KEY=VALUE") -> tuple[str, Any]:
    """``(key, value)`` of one ``KEY=VALUE`` item whose key is a run-config key and whose value has the key's
    type and lies among its choices (the value parsed as TOML, as ``--set`` parses it); the cross-key rules are
    the config's (checked when the config is resolved, still before any work)."""
    from fl.config import CHOICES, DEFAULTS, ConfigError, parse_value
    from fl.config.section import coerce

    key, sep, value_text = text.partition("=")
    key = key.strip()
    if not sep or not key:
        _refuse(f"expects {form}, like map-dim=64", text)
    if key not in DEFAULTS:
        hint = did_you_mean(key, DEFAULTS) or "; sanitas config-reference lists every key"
        _refuse(f"unknown config key {key!r}{hint}", text)
    try:
        value = coerce(key, DEFAULTS[key], parse_value(value_text.strip()))
    except ConfigError as err:
        _refuse(str(err), text)
    if key in CHOICES and value not in CHOICES[key]:
        _refuse(f"{key} must be one of {', '.join(CHOICES[key])}{did_you_mean(str(value), CHOICES[key])}", text)
    return key, value


def set_item(owned: Mapping[str, str] | None = None) -> Callable[[str], str]:
    """The type of ``--set KEY=VALUE`` (and ``--central-set``): :func:`check_item`, and a key of ``owned`` (the
    keys the command sets itself) refused with the reason ``owned`` gives; returns the text as typed."""

    def check(text: str) -> str:
        key, _ = check_item(text)
        if owned and key in owned:
            _refuse(owned[key], text)
        return text

    check.__doc__ = "A KEY=VALUE item of a run-config key" + (f", none of {sorted(owned)}" if owned else "") + "."
    return check


def add_set_option(p: argparse.ArgumentParser, help_text: str) -> None:
    """``--set KEY=VALUE`` (repeatable, collected in ``args.sets``): one spelling for every subcommand, each item's
    key and value checked while the arguments are parsed (:func:`set_item`)."""
    p.add_argument(
        "--set", dest="sets", action="append", default=[], type=set_item(), metavar="KEY=VALUE", help=help_text
    )


def grid_spec(text: str) -> str:
    """``--grid KEY=V1,V2,...``: a run-config key and distinct values (:func:`simulations.drivers.grid.parse_grid`),
    each of the key's type and choices (a value that must agree with other keys is checked when every run's
    config is resolved, still before any run)."""
    from fl.config import ConfigError
    from simulations.drivers.grid import parse_grid

    try:
        axis = parse_grid(text)
    except ConfigError as err:
        _refuse(str(err).replace(f"{text!r}", "it"), text)
    for item in axis.texts:
        try:
            check_item(f"{axis.key}={item}")
        except argparse.ArgumentTypeError as err:
            _refuse(str(err).split(": ", 1)[1], text)  # the whole value as typed, not just the bad item
    return text


def distinct_items(text: str) -> list[str]:
    """The items of a comma-separated value, each given once; an empty item ("1,,2") or a repeated one ("2,2")
    refused."""
    from simulations.drivers.grid import list_problem

    if not text.strip():
        _refuse("lists nothing: give values separated by commas, like 1,2,3", text)
    parts = [t.strip() for t in text.split(",")]
    problem = list_problem(parts)
    if problem:
        _refuse(problem, text)
    return parts


def epsilons(text: str) -> list[float]:
    """A comma-separated list of distinct epsilons, each a finite number > 0; at least one."""
    out = []
    for item in distinct_items(text):
        value = _checked(positive_float, item)
        if value is None:
            _refuse(f"{item!r} is not an epsilon (a finite number > 0), like 1,3.14,6.28", text)
        out.append(value)
    return out


def seed_list(text: str) -> list[int]:
    """``--seeds 1,2,3``: distinct whole numbers >= 0, at least one."""
    seeds = []
    for item in distinct_items(text):
        if not item.isdigit():
            _refuse(f"{item!r} is not a seed: give distinct whole numbers >= 0, like 1,2,3", text)
        seeds.append(int(item))
    return seeds


def share_or_auto(text: str) -> float | str:
    """``--label-share``: ``auto`` or a number strictly between 0 and 1."""
    if text.strip() == "auto":
        return "auto"
    value = _checked(open_unit_interval, text)
    if value is None:
        _refuse("must be 'auto' or a number strictly between 0 and 1, like 0.1", text)
    return value


def positive_numbers(text: str) -> list[str]:
    """A comma-separated list of distinct finite numbers > 0; the items as typed."""
    items = distinct_items(text)
    for item in items:
        if _checked(positive_float, item) is None:
            _refuse(f"{item!r} is not a finite number > 0: give numbers separated by commas, like 0.5,1", text)
    return items


def _checked(kind: Callable[[str], Any], item: str) -> Any:
    """``kind(item)`` (an option type of :mod:`simulations.cli.options`), or None where it refuses the item."""
    try:
        return kind(item)
    except argparse.ArgumentTypeError:
        return None


def distinct_choices(known: tuple[str, ...], like: str) -> Callable[[str], list[str]]:
    """A comma-separated list of distinct names from ``known``, at least one."""

    def check(text: str) -> list[str]:
        names = [t.strip() for t in text.split(",")]
        unknown = [n for n in names if n not in known]
        if unknown:
            _refuse(
                f"{unknown[0]!r} is not one of {', '.join(known)}{did_you_mean(unknown[0], known)}; like {like}", text
            )
        if len(set(names)) != len(names):
            _refuse(f"repeats a value: give distinct values of {', '.join(known)}, like {like}", text)
        return names

    return check
