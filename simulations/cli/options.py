"""What every ``sanitas`` subcommand shares: a parser whose errors are one line, option types that
refuse a bad value while the arguments are parsed (before any work), and the common options."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from mechanisms.suggest import did_you_mean


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr, ``sanitas: error: ...``, naming the
    subcommand and the option the user typed, with exit code 2 (argparse prints its usage first)."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("sanitas").strip()
        text = " ".join(message.split())
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", text)
        if choice:  # a mistyped subcommand or choice: name the closest one
            known = [c.strip().strip("'") for c in choice.group(2).split(",")]
            text += did_you_mean(choice.group(1), known)
        self.exit(2, f"sanitas: error: {where + ': ' if where else ''}{text}\n")


def _refuse(problem: str, text: str) -> NoReturn:
    raise argparse.ArgumentTypeError(f"{problem}, got {text!r}")


def _bounded(
    kind: Callable[[str], float], within: Callable[[float], bool], not_a_number: str, out_of_range: str, doc: str
) -> Callable[[str], Any]:
    """An option type: ``kind(text)`` when it parses and lies ``within`` the range, else the problem."""

    def check(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            _refuse(not_a_number, text)
        if not within(value):
            _refuse(out_of_range, text)
        return value

    check.__doc__ = doc
    return check


_WHOLE_1, _WHOLE_0 = "must be a whole number >= 1", "must be a whole number >= 0"
positive_int = _bounded(int, lambda v: v >= 1, _WHOLE_1, _WHOLE_1, "A whole number >= 1.")
nonnegative_int = _bounded(int, lambda v: v >= 0, _WHOLE_0, _WHOLE_0, "A whole number >= 0.")
positive_float = _bounded(
    float, lambda v: 0 < v < float("inf"), "must be a number > 0", "must be a finite number > 0", "A finite number > 0."
)
open_unit_interval = _bounded(
    float,
    lambda v: 0 < v < 1,
    "must be a number between 0 and 1",
    "must lie strictly between 0 and 1",
    "A number strictly between 0 and 1 (a probability such as 1 - confidence).",
)


def _first_file_on_the_way(path: Path) -> Path | None:
    """The path itself or the nearest existing ancestor of it that is not a folder, if any."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def _refuse_unwritable(folder: Path) -> None:
    """Refuse the option when no file can be written into ``folder`` (or, where it does not exist yet, into
    the nearest existing folder above it): the file system is asked by writing a temporary file there and
    removing it (:func:`fl.config.paths.write_problem`; ``os.access`` says yes to root where a read-only
    file system or an immutable folder still refuses)."""
    from fl.config.paths import write_problem

    problem = write_problem(folder)
    if problem is not None:
        where, reason = problem
        create = f"cannot create {str(folder)!r}: " if where != folder.expanduser() else ""
        raise argparse.ArgumentTypeError(
            f"{create}cannot write into {str(where)!r} ({reason}): choose a writable folder"
        )


def out_dir(text: str) -> str:
    """A folder to write into: absent (it is created) or a folder, never a file or under one, and one
    the user can write into (where it is absent: the nearest existing folder above it)."""
    blocker = _first_file_on_the_way(Path(text))
    if blocker is not None:
        which = "is a file" if blocker == Path(text) else f"lies under the file {str(blocker)!r}"
        _refuse(f"must be a folder, and it {which}", text)
    _refuse_unwritable(Path(text))
    return text


def folder_name(text: str) -> str:
    """``--name``: one folder name (no path separator, not empty, not ``.`` or ``..``)."""
    if not text.strip() or "/" in text or "\\" in text or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r}: must be one folder name, like sst2-compare (--out is its parent)")
    return text


def out_file(text: str) -> str:
    """A file to write: not a folder, in a folder that exists and can be written into; an existing file
    must be writable too."""
    path = Path(text)
    if path.is_dir():
        _refuse("must be a file name, and it is a folder", text)
    if not path.parent.is_dir():
        _refuse(f"must be in an existing folder, and {str(path.parent)!r} is not one", text)
    _refuse_unwritable(path.parent)
    if path.is_file():
        try:
            with path.open("ab"):  # opened for appending, nothing written: the file is unchanged
                pass
        except OSError as err:
            raise argparse.ArgumentTypeError(
                f"cannot write {text!r} ({err.strerror or type(err).__name__}): choose another file"
            ) from None
    return text


def existing_dir(text: str) -> str:
    """A folder that exists."""
    if not Path(text).is_dir():
        _refuse("must be an existing folder", text)
    return text


def numbers(kind: Callable[[str], Any], what: str, allow_empty: bool = False) -> Callable[[str], str]:
    """A comma-separated list, each item parsed by ``kind`` (``int`` or ``float``); returns the text."""

    def check(text: str) -> str:
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items and not allow_empty:
            _refuse(f"must list at least one {what}", text)
        for item in items:
            try:
                kind(item)
            except ValueError:
                _refuse(f"must be {what}s separated by commas ({item!r} is not one)", text)
        return text

    return check


def epsilon_list(text: str) -> list[float]:
    """A comma-separated list of epsilons, each a finite number > 0; at least one."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        _refuse("must list at least one epsilon, like 1,3.14,6.28", text)
    out = []
    for item in items:
        try:
            value = float(item)
        except ValueError:
            value = float("nan")
        if not (0 < value < float("inf")):
            _refuse(f"must be epsilons (finite numbers > 0) separated by commas ({item!r} is not one)", text)
        out.append(value)
    return out


def choices_list(known: tuple[str, ...], what: str, everything: str | None = None) -> Callable[[str], list[str]]:
    """A comma-separated list of names from ``known`` (``everything``, e.g. ``all``, stands for all)."""

    def check(text: str) -> list[str]:
        names = [t.strip() for t in text.split(",") if t.strip()]
        if everything is not None and names == [everything]:
            return list(known)
        unknown = [n for n in names if n not in known]
        if unknown:
            also = f", or {everything}" if everything else ""
            hint = did_you_mean(unknown[0], known)
            _refuse(f"unknown {what} {', '.join(map(repr, unknown))}{hint} (known: {', '.join(known)}{also})", text)
        return names

    return check


def attack_names(text: str) -> list[str]:
    """``--attacks``: names from ``simulations.analyses.attack.ATTACKS``, or ``all``; empty for none."""
    from simulations.analyses.attack import ATTACKS

    return choices_list(tuple(ATTACKS), "attack", everything="all")(text)


def add_timeout_option(p: argparse.ArgumentParser) -> None:
    """``--timeout SECONDS`` and ``--jobs N`` of the subcommands that run many points (warm workers,
    :mod:`simulations.runtime.warm`)."""
    p.add_argument(
        "--timeout", type=positive_float, default=None, help="seconds before a run is killed and marked failed"
    )
    p.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        help="points run at once, each in its own warm worker (default 1; more where cores allow)",
    )


def add_attacks_option(p: argparse.ArgumentParser) -> None:
    """``--attacks mia,lira,...``: attack every finished run afterwards (``simulations.analyses.attack``)."""
    p.add_argument(
        "--attacks",
        type=attack_names,
        default=[],
        metavar="A1,A2,...",
        help="after the runs, attack each (mia, lira, attribute, inversion; 'all'): attacks.csv and "
        "attacks_vs_epsilon.png next to the accuracy table",
    )


def tracker_name(text: str) -> str:
    """``--track``: a tracker that can log here (known, its packages installed; simulations.tracking)."""
    from simulations.tracking import unavailable

    problem = unavailable([text])
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


#: The schemes of MLflow's tracking URIs (a path without one is a local store).
MLFLOW_SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "file", "databricks", "databricks-uc")


def tracking_uri(text: str) -> str:
    """``--tracking-uri``: an MLflow tracking URI of a known scheme, or a local path; not empty, no spaces."""
    if not text.strip() or any(c.isspace() for c in text):
        _refuse("must be an MLflow tracking URI like sqlite:///mlflow.db or http://host:5000 (no spaces)", text)
    scheme, colon, _ = text.partition(":")
    if colon and "/" not in scheme and len(scheme) > 1 and scheme.split("+")[0] not in MLFLOW_SCHEMES:
        hint = did_you_mean(scheme, MLFLOW_SCHEMES)
        _refuse(f"has the unknown scheme {scheme!r}{hint} (known: {', '.join(MLFLOW_SCHEMES[:7])}, ...)", text)
    return text


def add_track_options(p: argparse.ArgumentParser) -> None:
    """``--track NAME`` (repeatable) and ``--tracking-uri URI``: log the finished runs to MLflow, TensorBoard
    or W&B (:mod:`simulations.tracking`; docs/tracking.md)."""
    p.add_argument(
        "--track",
        action="append",
        default=[],
        type=tracker_name,
        metavar="NAME",
        help="log the finished runs to mlflow, tensorboard or wandb (repeatable; with the config's track key); "
        "stores in the --out folder by default (docs: tracking)",
    )
    p.add_argument(
        "--tracking-uri",
        type=tracking_uri,
        default=None,
        metavar="URI",
        help="MLflow tracking URI (default: the config's tracking-uri, else $MLFLOW_TRACKING_URI, else "
        "<out>/mlflow.db)",
    )


def command_line(args: argparse.Namespace) -> str:
    """The command the user typed, as the tables record it (``sanitas SUBCOMMAND ...``)."""
    return " ".join(["sanitas", *getattr(args, "argv", sys.argv[1:])])
