"""Results folder of a run: config, per-round records, summary and plots.

Layout (one folder per run)::

    status.json              written first, updated every round, "complete" last
    config.json              resolved run config (+ dataset description)
    rounds.jsonl             one JSON object per round (metrics + privacy), appended and synced per round
    rounds.csv               the same, flattened, for spreadsheets
    summary.json             final numbers, guarantees in words, wall time (only in a complete run)
    accuracy_vs_round.png    accuracy / macro-F1 / clean accuracy per round
    checkpoints/, nodes/     while the run is incomplete: what ``sanitas run --resume`` needs
                             (the server's state after each round; each simulated node's state)

A file is either absent or whole: JSON, CSV and checkpoints are written to a
temporary file in the same folder and renamed over the old one; rounds.jsonl
only ever gains whole lines. A killed run leaves ``status.json`` saying
"running" (or "failed"), never "complete", and no ``summary.json``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import tempfile
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


STATUS = "status.json"


def write_atomic(path: Path, data: bytes, sync: bool = True) -> None:
    """Replace ``path`` by ``data`` all at once: a reader sees the old file or the new one, never a part.
    ``sync``: on disk (fsync) before the rename; ``False`` leaves the flush to the caller (one
    ``os.sync()`` for many files)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_status(folder: Path) -> dict[str, Any]:
    """A results folder's ``status.json`` ({} when absent: not a Sanitas run folder, or a very old one)."""
    path = Path(folder) / STATUS
    return json.loads(path.read_text()) if path.is_file() else {}


#: The run's log (``simulations.runtime.console``), opened by the launcher before the server writes anything.
RUN_LOG = "run.log"


class RunWriter:
    """Writes the files of one run; created only after the config has been validated.

    Creating it writes ``status.json`` ("running") before anything else; :meth:`finish`
    marks the run "complete" after everything else is written.
    """

    def __init__(self, folder: Path, num_rounds: int = 0) -> None:
        self.folder = Path(folder)
        if self.folder.exists() and any(p.name != RUN_LOG for p in self.folder.iterdir()):
            raise FileExistsError(f"results folder {self.folder} already exists and is not empty")
        self.folder.mkdir(parents=True, exist_ok=True)
        try:  # claim the folder: of two runs started at once with one name, only one creates status.json
            os.close(os.open(self.folder / STATUS, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            raise FileExistsError(f"results folder {self.folder} is being written by another run") from None
        self.rounds: list[dict[str, Any]] = []
        self.started = time.time()
        self.num_rounds = int(num_rounds)
        self.set_status("running")

    @classmethod
    def reopen(cls, folder: Path, completed_rounds: int) -> RunWriter:
        """The writer of an incomplete run, resumed after round ``completed_rounds``: rounds.jsonl is cut
        back to those rounds (a round recorded after the last checkpoint is run again)."""
        writer = cls.__new__(cls)
        writer.folder = Path(folder)
        status = read_status(writer.folder)
        if status.get("status") == "complete":
            raise ValueError(f"results folder {folder} holds a complete run: nothing to resume")
        writer.num_rounds = int(status.get("num_rounds", 0))
        path = writer.folder / "rounds.jsonl"
        lines = path.read_text().splitlines() if path.is_file() else []
        rounds = []
        for line in lines:
            try:
                rounds.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut by the kill: it and anything after it are dropped
        writer.rounds = [r for r in rounds if int(r.get("round", 0)) <= completed_rounds]
        write_atomic(path, "".join(json.dumps(r, allow_nan=False) + "\n" for r in writer.rounds).encode())
        writer._write_csv()
        writer.started = time.time()
        writer.set_status("running", resumed_from=completed_rounds)
        return writer

    def set_status(self, status: str, **extra: Any) -> None:
        """Record where the run stands (``running``, ``complete``, ``failed`` or ``interrupted``) in
        ``status.json``."""
        data = {
            "status": status,
            "completed_rounds": len(self.rounds),
            "num_rounds": self.num_rounds,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
            **extra,
        }
        write_atomic(self.folder / STATUS, (json.dumps(_jsonable(data), indent=2) + "\n").encode())

    def finish(self) -> None:
        """Mark the run complete (its summary and plot are written) and drop its resume state."""
        for name in ("checkpoints", "nodes"):
            shutil.rmtree(self.folder / name, ignore_errors=True)
        self.set_status("complete")

    def write_json(self, name: str, data: Mapping[str, Any]) -> Path:
        path = self.folder / name
        write_atomic(path, (json.dumps(_jsonable(data), indent=2, allow_nan=False) + "\n").encode())
        return path

    def append_round(self, record: Mapping[str, Any]) -> None:
        """Append one round record to ``rounds.jsonl`` (synced to disk), rewrite ``rounds.csv``
        and count the round in ``status.json``."""
        row = _jsonable(dict(record))
        self.rounds.append(row)
        with (self.folder / "rounds.jsonl").open("a") as fh:
            fh.write(json.dumps(row, allow_nan=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._write_csv()
        self.set_status("running")

    def _write_csv(self) -> None:
        rows = [_flatten(r) for r in self.rounds]
        fields = list(dict.fromkeys(k for r in rows for k in r))
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
        write_atomic(self.folder / "rounds.csv", text.getvalue().encode())

    def plot(self, title: str, test_label: str = "sanitized test", reference: float | None = None) -> Path:
        """Accuracy, macro-F1 and clean accuracy against the round (integer ticks).

        ``test_label`` names what the scores were computed on (central DP mode:
        "raw test", where the clean line is the same). Also drawn when known: the
        random-guess line (the records' ``random_guess_f1``, the score of guessing
        with the test label frequencies), the non-private ``reference`` accuracy
        (``reference-accuracy``), and, on a second axis, the cumulative per-user
        epsilon after each round (:func:`round_epsilon`).
        """
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator

        rounds = [r["round"] for r in self.rounds]
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for key, label, style in (
            ("accuracy", f"accuracy ({test_label})", "o-"),
            ("macro_f1", f"macro-F1 ({test_label})", "s--"),
            ("clean_accuracy", "accuracy (clean test)", "^:"),
        ):
            if key == "clean_accuracy" and test_label != "sanitized test":
                continue
            # the rounds evaluated (a central run scores every evaluate-every rounds)
            scored = [(int(r["round"]), float(r[key])) for r in self.rounds if r.get(key) is not None]
            ax.plot([x for x, _ in scored], [v for _, v in scored], style, label=label)
        guess = next((r["random_guess_f1"] for r in reversed(self.rounds) if r.get("random_guess_f1")), None)
        if guess is not None:
            ax.axhline(guess, color="grey", ls=":", lw=1, label=f"random guess ({guess:.3f})")
        if reference:
            ax.axhline(reference, color="black", ls="-.", lw=1, label=f"non-private reference ({reference:.3f})")
        last = self.rounds[-1] if self.rounds else {}
        for keys, label, ls in (
            (("public_only_accuracy",), test_label, "--"),
            (("public_only_clean_accuracy", "public_only_head_clean_accuracy"), "clean test", ":"),
        ):
            # the strongest model fitted on the public data alone, on the same test inputs
            measured = [v for v in (last.get(key) for key in keys) if v is not None and v == v]
            if measured:
                public = max(measured)
                ax.axhline(public, color="darkorange", ls=ls, lw=1.2, label=f"public-only, {label} ({public:.3f})")
        ax.set_xlabel("round")
        ax.set_ylabel("score")
        ax.set_ylim(0, 1)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        epsilons = [round_epsilon(r) for r in self.rounds]
        if any(e is not None for e in epsilons):
            ax2 = ax.twinx()
            ax2.plot(rounds, [math.nan if e is None else e for e in epsilons], "d-", color="tab:red", alpha=0.6)
            ax2.set_ylabel("cumulative per-user epsilon", color="tab:red")
            ax2.tick_params(axis="y", colors="tab:red")
            ax2.set_ylim(bottom=0)
            handles.append(ax2.lines[0])
            labels.append(epsilon_label(self.rounds[-1]))
        ax.legend(handles, labels, fontsize=7, loc="lower right")
        fig.tight_layout()
        path = self.folder / "accuracy_vs_round.png"
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=120)
        plt.close(fig)
        write_atomic(path, buffer.getvalue())
        return path


def round_epsilon(record: Mapping[str, Any]) -> float | None:
    """The cumulative per-user epsilon a round record reports: central mode's ``epsilon`` (at its
    delta), local mode's largest per-user pure-LDP total (``epsilon_total``; ``epsilon_ldp`` when
    labels are in the clear). None when the record has no guarantee (e.g. the leaky map)."""
    p = record.get("privacy") or {}
    if record.get("mode") == "central" or p.get("mode") == "central":
        return p.get("epsilon")
    if record.get("ldp_guarantee_holds") is False:
        return None
    total = p.get("epsilon_total")  # None when labels are released in the clear
    return total if total is not None else p.get("epsilon_ldp")


def epsilon_label(record: Mapping[str, Any]) -> str:
    """Legend text of the epsilon curve: what kind of epsilon it is."""
    p = record.get("privacy") or {}
    if record.get("mode") == "central" or p.get("mode") == "central":
        return f"per-user epsilon (delta={p.get('delta', float('nan')):g}, {p.get('accountant', '')})"
    return "per-user pure-LDP epsilon (max over users)"


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


def keep_round(
    records: list[dict[str, Any]], writer: RunWriter | None, record: dict[str, Any], logger: Any, privacy: str
) -> None:
    """The end of every mode's round: ``record`` appended to the strategy's ``records`` and to the run's
    ``rounds.jsonl`` / ``rounds.csv`` (when there is a ``writer``), and one log line with its scores and
    ``privacy`` (the mode's figure, in words)."""
    records.append(record)
    if writer is not None:
        writer.append_round(record)
    if record["accuracy"] is None:  # a round not evaluated (evaluate-every)
        logger.info("round %d: not evaluated, %s", record["round"], privacy)
        return
    logger.info(
        "round %d: accuracy %.4f, macro-F1 %.4f, %s", record["round"], record["accuracy"], record["macro_f1"], privacy
    )
