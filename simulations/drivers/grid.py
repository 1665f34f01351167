"""The sweep's grid: ``--grid KEY=V1,V2`` specs parsed as TOML values, their products (``--also``), seeds,
and the runs they make (names, keys). Part of :mod:`simulations.drivers.sweep`, whose docstring gives the
syntax."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fl import config as config_mod
from simulations.runtime.overrides import split_override

EPSILON_KEYS = ("sentence-epsilon", "word-epsilon", "document-epsilon")  # the x axis of the plot, not a line label
#: The keys ``--seeds`` sets in every run, both to the run's seed.
SEED_KEYS = ("seed", "noise-seed")
_OPEN, _CLOSE = "[{", "]}"


@dataclass(frozen=True)
class GridAxis:
    """One ``--grid`` key and its values (``texts`` as typed, ``values`` parsed)."""

    key: str
    texts: tuple[str, ...]
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Run:
    """One run of the sweep: its folder name, its settings and, when seeded, its seed."""

    name: str
    texts: dict[str, str] = field(default_factory=dict)  # key -> value as typed (passed to --set)
    values: dict[str, Any] = field(default_factory=dict)  # key -> parsed value (names, tables)
    seed: int | None = None  # set by --seeds (then values hold seed and noise-seed too)

    @property
    def point_values(self) -> dict[str, Any]:
        """The grid point's settings: ``values`` less the seed keys of a seeded run."""
        if self.seed is None:
            return dict(self.values)
        return {k: v for k, v in self.values.items() if k not in SEED_KEYS}

    @property
    def point(self) -> str:
        """The grid point's name (the run name without its seed); the run name when unseeded."""
        return self.name if self.seed is None else run_name(self.point_values)


def split_values(text: str) -> list[str]:
    """Split ``text`` on commas outside quotes and brackets; items are stripped.

    Raises ``ValueError`` on unbalanced quotes or brackets and on empty items.
    """
    items: list[str] = []
    current: list[str] = []
    quote: str | None = None
    depth = 0
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced {ch!r} in grid values {text!r}")
        elif ch == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    if quote or depth:
        raise ValueError(f"unclosed quote or bracket in grid values {text!r}")
    items.append("".join(current).strip())
    if any(not item for item in items):
        raise ValueError(f"empty value in grid values {text!r}")
    return items


def parse_grid(spec: str) -> GridAxis:
    """Parse one ``KEY=V1,V2,...`` argument (see the module docstring)."""
    key, rest = split_override(spec, "--grid", "KEY=V1,V2,...")
    if not key:
        raise config_mod.ConfigError(f"--grid expects KEY=V1,V2,..., got {spec!r}")
    if key not in config_mod.DEFAULTS:
        raise config_mod.ConfigError(f"--grid: unknown config key {key!r}")
    try:
        texts = split_values(rest)
    except ValueError as err:
        raise config_mod.ConfigError(f"--grid {key}: {err}") from None
    values = [config_mod.parse_value(t) for t in texts]
    if len({format_value(v) for v in values}) != len(values):
        raise config_mod.ConfigError(f"--grid {key}: repeated value in {rest!r}")
    return GridAxis(key, tuple(texts), tuple(values))


def format_value(value: Any) -> str:
    """Short readable form of a grid value for run names and labels (``2.0`` -> ``2``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


#: The longest run name kept whole (a file name may hold 255 bytes; the run's files sit inside its folder).
MAX_NAME = 200


def run_name(values: Mapping[str, Any]) -> str:
    """Folder name of a run: ``key=value`` pairs joined by ``__``, path-safe. A name longer than :data:`MAX_NAME`
    (many ``--central-set`` keys) keeps its first 140 characters and its seed part (``__seed=...``), joined by a
    digest of the whole name: still one name per run, the same on every call."""
    parts = [f"{key}={format_value(value)}" for key, value in values.items()]
    name = re.sub(r"[^A-Za-z0-9._+=-]+", "-", "__".join(parts)).strip("-.")
    if len(name) > MAX_NAME:
        digest = hashlib.sha256(name.encode()).hexdigest()[:12]
        cut = name.find("__seed=")
        tail = name[cut:] if cut >= 0 and len(name) - cut <= 50 else ""
        name = f"{name[:140].rstrip('_-.')}__{digest}{tail}"
    return name or "default"


def expand(blocks: Sequence[Sequence[GridAxis]], seeds: Sequence[int] | None = None) -> list[Run]:
    """The runs: the Cartesian product of each block's axes, blocks one after another; with
    ``seeds``, each point once per seed (:func:`with_seeds`, seeds fastest).

    Raises ``ConfigError`` on a key repeated in a block, on two runs with the same name and on a
    seed key in the grid of a seeded sweep.
    """
    runs: list[Run] = []
    for axes in blocks:
        keys = [a.key for a in axes]
        if len(set(keys)) != len(keys):
            raise config_mod.ConfigError(f"--grid: a key appears twice in one product: {keys}")
        for combo in itertools.product(*(zip(a.texts, a.values) for a in axes)):
            texts = {k: t for k, (t, _) in zip(keys, combo)}
            values = {k: v for k, (_, v) in zip(keys, combo)}
            runs.append(Run(run_name(values), texts, values))
    names = [r.name for r in runs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise config_mod.ConfigError(f"--grid: runs with the same name (repeated grid point?): {duplicates}")
    return with_seeds(runs, seeds) if seeds else runs


def list_items(text: str, flag: str) -> list[str]:
    """The items of a comma-separated option value: the one list parser of the drivers (``compare``'s lists,
    ``sweep``'s and ``compare``'s ``--seeds``). An empty item ("1,,2") or an item given twice ("2,2") is refused
    with a ``ConfigError`` naming ``flag`` and what was typed; an empty value is an empty list."""
    if not text.strip():
        return []
    parts = [t.strip() for t in text.split(",")]
    problem = list_problem(parts)
    if problem:
        raise config_mod.ConfigError(f"{flag} {text}: {problem}")
    return parts


def list_problem(parts: Sequence[str]) -> str | None:
    """What is wrong with the items of a comma-separated value (an empty item, an item given twice), or None:
    the one rule of :func:`list_items` and of the command line's list options (``simulations.cli.items``)."""
    if any(not t for t in parts):
        return "an empty item between commas; list each value once, like 1,2,3"
    twice = sorted({t for t in parts if parts.count(t) > 1})
    return f"{', '.join(twice)} given twice; list each value once" if twice else None


def parse_seeds(text: str | Sequence[Any]) -> list[int]:
    """``--seeds 1,2,3`` (or a list): distinct non-negative integers, in order.

    Raises ``ConfigError`` on an empty list, a non-integer, a negative or a repeated seed.
    """
    items = list_items(text, "--seeds") if isinstance(text, str) else [str(t).strip() for t in text]
    if not items or any(not t for t in items):
        raise config_mod.ConfigError(f"--seeds expects distinct integers like 1,2,3, got {text!r}")
    try:
        seeds = [int(t) for t in items]
    except ValueError:
        raise config_mod.ConfigError(f"--seeds expects integers like 1,2,3, got {text!r}") from None
    if any(s < 0 for s in seeds):
        raise config_mod.ConfigError(f"--seeds must be >= 0 (noise-seed -1 means a secret OS seed), got {seeds}")
    if len(set(seeds)) != len(seeds):
        raise config_mod.ConfigError(f"--seeds must be distinct, got {seeds}")
    return seeds


def with_seeds(runs: Sequence[Run], seeds: Sequence[int], name_keys: Sequence[str] = ("seed",)) -> list[Run]:
    """Each run once per seed (seeds fastest), with ``seed`` and ``noise-seed`` both set to it
    (paired, not crossed); the run name gets ``name_keys`` (``__seed=2``).

    Raises ``ConfigError`` when a run already sets a seed key (e.g. ``--grid seed=...``).
    """
    clash = sorted({k for r in runs for k in r.values if k in SEED_KEYS})
    if clash:
        raise config_mod.ConfigError(f"--seeds sets {' and '.join(SEED_KEYS)} of every run; remove {clash} from --grid")
    out = []
    for run in runs:
        for seed in seeds:
            s = int(seed)
            values = {**run.values, **dict.fromkeys(SEED_KEYS, s)}
            texts = {**run.texts, **dict.fromkeys(SEED_KEYS, str(s))}
            out.append(Run(run_name({**run.values, **dict.fromkeys(name_keys, s)}), texts, values, seed=s))
    return out


def grid_keys(runs: Iterable[Run]) -> list[str]:
    """All grid keys of the sweep, in first-seen order (the leading table columns); with seeds,
    ``seed`` and ``noise-seed`` too."""
    return list(dict.fromkeys(k for r in runs for k in r.values))


def point_keys(runs: Iterable[Run]) -> list[str]:
    """The grid keys of the points (:func:`grid_keys` less the seed keys that ``--seeds`` set)."""
    return list(dict.fromkeys(k for r in runs for k in r.point_values))
