"""TensorBoard: one event file per run, in ``<out>/tensorboard/[<group>/]<run>``: the per-round scalars,
the final metrics (``final/...``, at the last round), the guarantee as text, and the run's config through
the HParams plugin (the keys it sets apart from the defaults, so a sweep's table shows what varies).

Written with ``torch.utils.tensorboard`` (TensorBoard's own event writer; needs the ``tensorboard``
package). ``tensorboard --logdir <out>/tensorboard`` shows a sweep's points as separate runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulations.tracking.records import RunRecord

#: Config keys the HParams table always shows, default or not.
ALWAYS = ("dataset", "mode", "seed")


def hparams_of(params: Mapping[str, Any]) -> dict[str, Any]:
    """The config keys a run sets apart from their defaults, plus :data:`ALWAYS`, as HParams values."""
    from fl.config.keys import DEFAULTS

    out = {}
    for key, value in params.items():
        if key in ALWAYS or (key in DEFAULTS and value != DEFAULTS[key]):
            out[key] = value if isinstance(value, bool | int | float | str) else str(value)
    return out


class TensorBoardBackend:
    """One command's TensorBoard writer (see the module docstring)."""

    name = "tensorboard"

    def __init__(self, root: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401 - refuses here when tensorboard is missing

        self.root = Path(root) / "tensorboard"
        self.group: str | None = None

    def start_group(self, name: str, params: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        """Put the group's runs in one folder (each still a run of its own in TensorBoard)."""
        self.group = name

    def log_run(self, record: RunRecord) -> None:
        """One event file for the run."""
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        folder = self.root / self.group / record.name if self.group else self.root / record.name
        for old in folder.glob("events.out.tfevents.*"):  # a run tracked again replaces its events: one file per run
            old.unlink()
        writer = SummaryWriter(log_dir=str(folder))
        try:
            for step, values in record.rounds:
                for tag, value in values.items():
                    writer.add_scalar(tag, value, step)
            last = record.last_round
            final = {f"final/{k}": v for k, v in record.final.items()}
            for tag, value in final.items():
                writer.add_scalar(tag, value, last)
            for key in ("sanitas.guarantee_statement", "sanitas.flag"):
                if key in record.tags:
                    writer.add_text(key.removeprefix("sanitas."), record.tags[key], last)
            metric_tags = {k: v for k, v in final.items() if k.startswith(("final/final/", "final/outcome/"))}
            for summary in hparams(hparams_of(record.params), metric_tags or final):
                writer.file_writer.add_summary(summary)
        finally:
            writer.close()

    def end_group(self, files: Sequence[Path], ok: bool) -> None:
        """Nothing to close: each run's event file is complete."""
        self.group = None
