"""Every flag of ``run``, ``sweep``, ``compare`` and ``tune``, and every run-config key given with ``--set``, is
refused before any work when its value is bad: the cases are generated from the parser's declarations and the
config's key declarations (fl.config.keys), not listed by hand, so a new flag or key cannot come without its
refusal.

For each declared flag that takes a value, the first value of :data:`CANDIDATES` its own type (or choices)
refuses is fed to ``sanitas SUBCOMMAND``: the answer must be exit 2, exactly one line of at most 200 characters
on stderr naming the flag as the user typed it, no file or folder written, and the subcommand's handler never
reached. A flag whose type refuses none of the candidates fails the test (add a candidate it refuses).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from simulations import cli
from tests.support.cli import block_handlers

SUBCOMMANDS = ("run", "sweep", "compare", "tune")
#: Values tried in order; the first one a flag's own type refuses is the case. ``{file}`` is an existing file.
CANDIDATES = ("", ",", "abc", "-1", "0", "1,1", "inf", "x=1", "bogus-key=1", "a/b", "{file}", "{file}/below")
#: What each subcommand needs besides the flag under test (the config file is the shipped quickstart).
REQUIRED = {"run": [], "sweep": ["--grid", "sentence-epsilon=1"], "compare": [], "tune": ["--epsilons", "1"]}
CONFIG = Path(__file__).resolve().parents[3] / "simulations" / "experiments" / "quickstart.toml"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: sub.choices[name] for name in SUBCOMMANDS}


def _refused(action: argparse.Action, value: str) -> bool:
    if action.choices is not None and action.type is None:
        return value not in action.choices
    try:
        converted = action.type(value) if action.type else value  # type: ignore[operator]
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return True
    return action.choices is not None and converted not in action.choices


def _cases() -> list[Any]:
    cases = []
    for name, sub in _subparsers().items():
        for action in sub._actions:
            if not action.option_strings or action.nargs == 0 or action.dest == "help":
                continue
            if action.type is None and action.choices is None:
                continue  # a free string (a name, a path to read): nothing to refuse at parse time
            cases.append(pytest.param(name, action, id=f"{name} {action.option_strings[0]}"))
    return cases


@pytest.mark.parametrize(("subcommand", "action"), _cases())
def test_every_flag_refuses_a_bad_value_in_one_line_before_any_work(
    subcommand: str,
    action: argparse.Action,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    values = [c.replace("{file}", str(a_file)) for c in CANDIDATES]
    bad = next((v for v in values if _refused(action, v)), None)
    assert bad is not None, f"{action.option_strings[0]} refuses none of {CANDIDATES}: add a value it refuses"
    block_handlers(monkeypatch, "the bad value")
    out = tmp_path / "out"
    flag = action.option_strings[0]
    args = [subcommand, str(CONFIG), *REQUIRED[subcommand]]
    args += ([] if flag == "--out" else ["--out", str(out)]) + [f"{flag}={bad}"]
    code = cli.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("sanitas: error: ") and len(err[0]) <= 200 and flag in err[0], err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def _key_cases() -> list[Any]:
    from fl.config import CHOICES, DEFAULTS

    cases = []
    for key, default in DEFAULTS.items():
        if key in CHOICES:
            cases.append(pytest.param(key, "not-a-choice", id=key))
        elif isinstance(default, bool):
            cases.append(pytest.param(key, "maybe", id=key))
        elif isinstance(default, int | float):
            cases.append(pytest.param(key, '"abc"', id=key))
    return cases


@pytest.mark.parametrize(("key", "value"), _key_cases())
def test_every_config_key_given_with_set_refuses_a_bad_value_while_parsing(
    key: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value of the wrong type, or outside the key's choices, in ``--set`` of each subcommand: one line naming
    ``--set`` and the key, before the handler (every key of fl.config.keys that has a type or choices)."""
    block_handlers(monkeypatch, "the bad value")
    for subcommand in SUBCOMMANDS:
        args = [
            subcommand,
            str(CONFIG),
            *REQUIRED[subcommand],
            "--out",
            str(tmp_path / "out"),
            "--set",
            f"{key}={value}",
        ]
        assert cli.main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--set" in err[0] and key in err[0] and len(err[0]) <= 200, err
    assert not (tmp_path / "out").exists()


def test_the_cases_cover_the_flags_that_take_values() -> None:
    """Power: the generated cases include the flags this issue's refusals were about."""
    ids = {p.id for p in _cases()}
    for case in ("compare --set", "compare --central-set", "compare --seeds", "compare --epsilons", "tune --recipes"):
        assert case in ids
    assert {"sweep --grid", "run --out", "tune --out", "compare --label-share"} <= ids


@pytest.mark.parametrize("flag", ["--set", "--central-set"])
def test_every_key_compare_sets_itself_is_refused_in_one_short_line(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each key of compare's declared OWNED table (and, in --central-set, of the local class-means keys) with a
    valid value: refused while parsing, one line of at most 200 characters naming the flag and the key."""
    from simulations.cli import compare
    from simulations.drivers.compare_plan import LOCAL_ONLY

    block_handlers(monkeypatch, "the owned key")
    keys = [*compare.OWNED, *(LOCAL_ONLY if flag == "--central-set" else ())]
    for key in keys:
        from fl.config import DEFAULTS

        value = DEFAULTS[key]
        text = f'"{value}"' if isinstance(value, str) else str(value).lower()
        assert cli.main(["compare", str(CONFIG), flag, f"{key}={text}", "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and flag in err[0] and key in err[0] and len(err[0]) <= 200, err
    assert not (tmp_path / "out").exists()
