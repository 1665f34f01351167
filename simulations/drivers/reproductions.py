"""The registry of paper reproductions that ``sanitas reproduce NAME`` runs.

Each reproduction is a TOML spec, ``simulations/experiments/reproductions/specs/NAME.toml`` (the keys are
:class:`Reproduction`'s fields; ``specs/README.md`` describes them): the flat run-config file under
``simulations/experiments/reproductions/`` it starts from, the sweep grid (products, as ``sanitas sweep
--grid``), the seeds, which grid key is the x axis and which the series, and the paper's numbers for the
points it reports (docs/SPEC.md §12, where the settings behind each number are listed). Our numbers come
from the repository's honest pipeline (frozen MiniLM encoder, a public or random M1), so they are *not
expected* to equal the paper's; the ``differences`` say why, and ``docs/REPRODUCTION.md`` discusses each
claim. A malformed spec is a :class:`SpecError` naming the file and the key, raised when this module is
imported.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

#: The flat run-config files a spec's ``config`` names (by file name).
CONFIG_DIR = Path(__file__).resolve().parents[1] / "experiments" / "reproductions"
#: The reproduction specs, one ``NAME.toml`` per reproduction.
SPEC_DIR = CONFIG_DIR / "specs"


@dataclass(frozen=True)
class Reproduction:
    """One figure or table of a paper, as a seeded sweep.

    ``blocks``: the sweep's products (each a list of ``KEY=V1,V2`` grid specs). ``x``: the grid
    key on the plot's x axis; ``series``: the grid key whose values are the lines. A block that
    sweeps another key (a word-level line beside document-level ones) names it in ``x_also`` /
    ``series_also``: a point's x is the first of ``x, *x_also`` it sets, its series the first of
    ``series, *series_also`` set to something other than "none" (else "none"). ``paper``:
    (series value, x value) -> the paper's number (same metric as ``metric``). ``quick``: grid
    specs and ``--set`` items of a tiny version for CI (seconds per run, not a measurement).
    ``by_sentences_at``: see the field.
    """

    name: str
    title: str
    citation: str
    config: str
    blocks: tuple[tuple[str, ...], ...]
    x: str
    series: str
    x_also: tuple[str, ...] = ()
    series_also: tuple[str, ...] = ()
    metric: str = "accuracy"
    seeds: tuple[int, ...] = (1, 2, 3)
    paper: Mapping[tuple[str, float], float] = field(default_factory=dict)
    paper_note: str = ""
    differences: tuple[str, ...] = ()
    quick_blocks: tuple[tuple[str, ...], ...] = ()
    quick_sets: tuple[str, ...] = ()
    log_x: bool = False
    #: Document level: also write ``sanitas report-documents``' macro-F1 plots and tables (by epsilon,
    #: and by number of sentences at this epsilon) into the reproduction's folder.
    by_sentences_at: float | None = None

    @property
    def x_keys(self) -> tuple[str, ...]:
        """The grid keys a point's x may come from, in order (``x`` first)."""
        return (self.x, *self.x_also)

    @property
    def series_keys(self) -> tuple[str, ...]:
        """The grid keys a point's series may come from, in order (``series`` first)."""
        return (self.series, *self.series_also)

    @property
    def config_path(self) -> Path:
        return CONFIG_DIR / self.config


class SpecError(ValueError):
    """A malformed reproduction spec; the message is one line naming the file and the key."""


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _texts(v: Any) -> tuple[str, ...] | None:
    return tuple(v) if isinstance(v, list) and all(isinstance(s, str) and s for s in v) else None


def _blocks(v: Any) -> tuple[tuple[str, ...], ...] | None:
    blocks = [_texts(b) for b in v] if isinstance(v, list) and v else [None]
    return tuple(blocks) if all(blocks) else None  # type: ignore[arg-type]


def _seeds(v: Any) -> tuple[int, ...] | None:
    ok = isinstance(v, list) and v and all(isinstance(s, int) and not isinstance(s, bool) for s in v)
    return tuple(v) if ok else None


def _number(v: Any) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None


def _flag(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


#: Each key of a spec: what it must hold (in the words of the error message) and how to read it
#: (None when the value is mistyped). ``paper`` is read by :func:`_paper`.
_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "name": ("a non-empty string", _text),
    "title": ("a non-empty string", _text),
    "citation": ("a non-empty string", _text),
    "config": ("a non-empty string (a file name)", _text),
    "blocks": ("a non-empty list of non-empty lists of grid specs (strings)", _blocks),
    "x": ("a non-empty string", _text),
    "series": ("a non-empty string", _text),
    "x_also": ("a list of strings", _texts),
    "series_also": ("a list of strings", _texts),
    "metric": ("a non-empty string", _text),
    "seeds": ("a non-empty list of whole numbers", _seeds),
    "paper": ("a table of tables (series -> x value -> number)", lambda v: v if isinstance(v, dict) else None),
    "paper_note": ("a non-empty string", _text),
    "differences": ("a list of strings", _texts),
    "quick_blocks": ("a non-empty list of non-empty lists of grid specs (strings)", _blocks),
    "quick_sets": ("a list of strings", _texts),
    "log_x": ("true or false", _flag),
    "by_sentences_at": ("a number", _number),
}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _paper(table: Mapping[str, Any], where: str) -> dict[tuple[str, float], float]:
    """``[paper.SERIES]`` tables of ``"X" = number`` as (series, float x) -> number."""
    paper: dict[tuple[str, float], float] = {}
    for series, points in table.items():
        if not isinstance(points, dict):
            raise SpecError(
                f"{where}: key 'paper.{series}' must be a table of \"x value\" = number, not {_short(points)}"
            )
        for x, value in points.items():
            key = f'paper.{series}."{x}"'
            try:
                x_value = _number(float(x))
            except ValueError:
                x_value = None
            number = _number(value)
            if x_value is None:
                raise SpecError(f"{where}: key '{key}': the x value must be a number written as a string")
            if number is None:
                raise SpecError(f"{where}: key '{key}' must be a number, not {_short(value)}")
            paper[(series, x_value)] = number
    return paper


_FIELDS = {f.name: f for f in fields(Reproduction)}
assert set(_KEYS) == set(_FIELDS), "every field of Reproduction is a spec key"
_REQUIRED = tuple(name for name, f in _FIELDS.items() if f.default is MISSING and f.default_factory is MISSING)


def load_spec(path: Path) -> Reproduction:
    """The reproduction of one spec file; a :class:`SpecError` naming the file and the key if malformed."""
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{where}: not valid TOML: {e}") from None
    unknown = [k for k in data if k not in _FIELDS]
    if unknown:
        raise SpecError(f"{where}: unknown key '{unknown[0]}' (known: {', '.join(_FIELDS)})")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise SpecError(f"{where}: missing key '{missing[0]}' (required: {', '.join(_REQUIRED)})")
    values: dict[str, Any] = {}
    for key, value in data.items():
        kind, read = _KEYS[key]
        values[key] = read(value)
        if values[key] is None:
            raise SpecError(f"{where}: key '{key}' must be {kind}, not {_short(value)}")
    if "paper" in values:
        values["paper"] = _paper(values["paper"], where)
    if values["name"] != path.stem:
        raise SpecError(f"{where}: key 'name' is {values['name']!r}; it must be the file's name, {path.stem!r}")
    if not (CONFIG_DIR / values["config"]).is_file():
        raise SpecError(f"{where}: key 'config': no run config {values['config']!r} in {CONFIG_DIR}")
    return Reproduction(**values)


def load(directory: Path = SPEC_DIR) -> dict[str, Reproduction]:
    """Every spec (``*.toml``) in ``directory``, by name; a :class:`SpecError` for a malformed one."""
    paths = sorted(Path(directory).glob("*.toml"))
    if not paths:
        raise SpecError(f"{directory}: no reproduction specs (*.toml) found")
    return {rep.name: rep for rep in map(load_spec, paths)}


REPRODUCTIONS: dict[str, Reproduction] = load()


def get(name: str) -> Reproduction:
    """The registered reproduction ``name`` (a clear error listing the known names otherwise)."""
    try:
        return REPRODUCTIONS[name]
    except KeyError:
        raise ValueError(f"unknown reproduction {name!r}; known: {', '.join(sorted(REPRODUCTIONS))}") from None
