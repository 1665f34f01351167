"""Results folder of a run: config, per-round records, summary and plots.

Layout (one folder per run)::

    config.json              resolved run config (+ dataset description)
    rounds.jsonl             one JSON object per round (metrics + privacy)
    rounds.csv               the same, flattened, for spreadsheets
    summary.json             final numbers, guarantees in words, wall time
    accuracy_vs_round.png    accuracy / macro-F1 / clean accuracy per round
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _jsonable(value: Any) -> Any:
    """Replace non-finite floats by None so every file is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def run_folder(cfg: Mapping[str, Any]) -> Path:
    """``<out-dir>/<run-name>``; the default name is dataset-mechanism-eps-timestamp (central mode:
    dataset-central-z<noise>-timestamp)."""
    name = cfg["run-name"]
    if not name and cfg.get("mode") == "central":
        z = cfg["central-noise-multiplier"]
        name = f"{Path(cfg['dataset']).stem}-central-z{z:g}-{time.strftime('%Y%m%d-%H%M%S')}"
    elif not name:
        from .channels import run_label  # the level's mechanism and epsilon

        name = f"{Path(cfg['dataset']).stem}-{run_label(cfg)}-{time.strftime('%Y%m%d-%H%M%S')}"
    return Path(cfg["out-dir"]).expanduser().resolve() / name


class RunWriter:
    """Writes the files of one run; created only after the config has been validated."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        if self.folder.exists() and any(self.folder.iterdir()):
            raise FileExistsError(f"results folder {self.folder} already exists and is not empty")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.rounds: list[dict[str, Any]] = []
        self.started = time.time()

    def write_json(self, name: str, data: Mapping[str, Any]) -> Path:
        path = self.folder / name
        path.write_text(json.dumps(_jsonable(data), indent=2, allow_nan=False) + "\n")
        return path

    def append_round(self, record: Mapping[str, Any]) -> None:
        """Append one round record to ``rounds.jsonl`` (and rewrite ``rounds.csv``)."""
        record = _jsonable(dict(record))
        self.rounds.append(record)
        with (self.folder / "rounds.jsonl").open("a") as fh:
            fh.write(json.dumps(record, allow_nan=False) + "\n")
        self._write_csv()

    def _write_csv(self) -> None:
        rows = [_flatten(r) for r in self.rounds]
        fields = list(dict.fromkeys(k for r in rows for k in r))
        with (self.folder / "rounds.csv").open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)

    def plot(self, title: str, test_label: str = "sanitized test") -> Path:
        """Accuracy, macro-F1 and clean accuracy against the round.

        ``test_label`` names what the scores were computed on (central DP mode:
        "raw test", where the clean line is the same).
        """
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rounds = [r["round"] for r in self.rounds]
        fig, ax = plt.subplots(figsize=(6, 4))
        for key, label, style in (
            ("accuracy", f"accuracy ({test_label})", "o-"),
            ("macro_f1", f"macro-F1 ({test_label})", "s--"),
            ("clean_accuracy", "accuracy (clean test)", "^:"),
        ):
            if key == "clean_accuracy" and test_label != "sanitized test":
                continue
            values = [r.get(key) for r in self.rounds]
            ax.plot(rounds, [math.nan if v is None else v for v in values], style, label=label)
        ax.set_xlabel("round")
        ax.set_ylabel("score")
        ax.set_ylim(0, 1)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = self.folder / "accuracy_vs_round.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path


def _flatten(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        elif isinstance(value, list):
            out[name] = json.dumps(value)
        else:
            out[name] = value
    return out
