"""A finished run's results folder as a tracker logs it: its config (params), its per-round metrics, its
final metrics, its tags and its files.

Everything is read back from the files the run wrote (``config.json``, ``rounds.jsonl``, ``summary.json``),
after the run: a tracker never sits in a run's path, so a tracker that fails cannot change or stop it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fl.config.keys import DEFAULTS
from fl.config.values import level_of
from simulations.outputs.writers import read_jsonl

#: The files of a run folder a tracker keeps as artifacts (with every PNG the run drew).
ARTIFACTS = ("summary.json", "config.json", "rounds.jsonl", "rounds.csv", "status.json")

#: The keys of a run's config that name what it is, as tags (``sanitas.<key>``).
TAG_KEYS = (
    "dataset",
    "mode",
    "central-unit",
    "sentence-mechanism",
    "label-mechanism",
    "word-mechanism",
    "document-mechanism",
    "server-model",
    "seed",
    "noise-seed",
)


def numbers(tree: Any, prefix: str = "", depth: int = 3) -> dict[str, float]:
    """The finite numbers of a JSON tree, by slash-joined path (``privacy/epsilon``): booleans, text, nulls,
    lists and anything deeper than ``depth`` dicts are left out."""
    out: dict[str, float] = {}
    if isinstance(tree, Mapping) and depth > 0:
        for key, value in tree.items():
            out.update(numbers(value, f"{prefix}{key}/", depth - 1))
    elif isinstance(tree, int | float) and not isinstance(tree, bool) and math.isfinite(tree):
        out[prefix.rstrip("/")] = float(tree)
    return out


@dataclass(frozen=True)
class RunRecord:
    """One finished run, as every tracker logs it."""

    name: str
    folder: Path
    params: dict[str, Any]  # the resolved run config, every key
    rounds: list[tuple[int, dict[str, float]]]  # (round, its numbers) in round order
    final: dict[str, float]  # the summary's numbers: final metrics, outcome, best accuracy, wall time
    tags: dict[str, str]
    files: list[Path] = field(default_factory=list)
    failed: bool = False

    @property
    def last_round(self) -> int:
        """The last round number (0 for a run without rounds)."""
        return self.rounds[-1][0] if self.rounds else 0


def _flags(summary: Mapping[str, Any]) -> str:
    """What the run's outcome flags, in words ("" when nothing): a model at the majority-class rate, one that
    adds nothing over the public-only model, one that learned nothing."""
    outcome = summary.get("outcome") or {}
    flags = []
    if outcome.get("beats_majority_class") is False:
        flags.append("at the majority-class rate")
    if outcome.get("learned_nothing"):
        flags.append("learned nothing")
    if outcome.get("adds_over_public") is False:
        flags.append("adds nothing over the public-only model")
    return "; ".join(flags)


def read_run(folder: Path) -> RunRecord:
    """The record of the run in ``folder`` (a run without ``summary.json`` is a failed one: its config and
    rounds so far, no final metrics). Raises ``FileNotFoundError`` when ``folder`` holds no ``config.json``."""
    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())["config"]
    summary_path = folder / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    rounds = [
        (int(r["round"]), numbers({k: v for k, v in r.items() if k != "round"}))
        for r in read_jsonl(folder / "rounds.jsonl")
    ]
    final = numbers(
        {k: summary.get(k) for k in ("final", "outcome", "users", "best_accuracy", "wall_seconds") if k in summary}
    )
    level = level_of({**DEFAULTS, **config})  # the one rule (a config.json of an older run may lack keys)
    tags = {f"sanitas.{k}": str(config[k]) for k in TAG_KEYS if k in config}
    tags.update(
        {
            "sanitas.level": level,
            "sanitas.folder": str(folder.resolve()),
            "sanitas.status": "complete" if summary else "failed",
        }
    )
    for key in ("guarantee_statement", "guarantee_covers", "strategy"):
        if summary.get(key) is not None:
            tags[f"sanitas.{key}"] = str(summary[key])
    if "ldp_guarantee_holds" in summary:
        tags["sanitas.ldp_guarantee_holds"] = str(bool(summary["ldp_guarantee_holds"])).lower()
    flags = _flags(summary)
    if flags:
        tags["sanitas.flag"] = flags
    files = [folder / name for name in ARTIFACTS if (folder / name).is_file()] + sorted(folder.glob("*.png"))
    return RunRecord(folder.name, folder, dict(config), rounds, final, tags, files, failed=not summary)


def group_files(folder: Path) -> list[Path]:
    """The tables, plots and reports a sweep, comparison or reproduction wrote at the top of ``folder``."""
    return sorted(
        p for p in Path(folder).iterdir() if p.is_file() and p.suffix in (".csv", ".json", ".jsonl", ".md", ".png")
    )
