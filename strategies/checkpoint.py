"""Crash and resume: the server's state after every round, and a run continued from it.

:class:`RoundCheckpoints` wraps a mode's strategy (outermost, around its
accounting). After each completed round it saves the whole strategy (model,
optimizer, stored releases, ledger, round records, the generator of the
training batches) and the current arrays to ``<run>/checkpoints/round-R.pt``.
``sanitas run --resume DIR`` loads the last one and runs the remaining rounds:
completed rounds send nothing, and every later request carries
``resumed-from = R`` so that each node restores its own state as it was at the
end of round R (``clients.node_state``): its noise secret, draw counters and
cached releases. With a fixed seed and noise-seed the resumed run's results
equal those of an uninterrupted one (``tests/integration/test_resume.py``).

Node ids are new in a new simulation: the restored strategy's nodes are matched
to the new ones by the users they hold (:func:`remap_nodes`).
"""

from __future__ import annotations

import io
import logging
import pickle
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fl import faults, wire
from fl.reporting.results import write_atomic
from fl.reporting.timing import PHASES

log = logging.getLogger(__name__)

#: Config-record key of requests in a resumed run: the last round completed before the crash.
RESUMED_FROM = "resumed-from"
#: Attributes that hold live connections or files, not state: detached while saving.
_LIVE = ("writer", "_grid")


def _chain(strategy: Any) -> list[Any]:
    """The strategy and everything it wraps (``.strategy`` attributes)."""
    out, seen = [strategy], 0
    while isinstance(getattr(out[-1], "strategy", None), Strategy) and seen < 16:
        out.append(out[-1].strategy)
        seen += 1
    return out


def checkpoint_path(folder: Path, server_round: int) -> Path:
    return Path(folder) / "checkpoints" / f"round-{server_round:05d}.pt"


def last_checkpoint(folder: Path) -> int:
    """The last round with a saved checkpoint in a run folder (0: none)."""
    found = sorted((Path(folder) / "checkpoints").glob("round-*.pt"))
    return int(found[-1].stem.split("-")[1]) if found else 0


def save_checkpoint(
    folder: Path, server_round: int, strategy: Strategy, arrays: ArrayRecord, extra: Mapping[str, Any] | None = None
) -> Path:
    """Save ``strategy`` (without its writer and grid), ``arrays`` and ``extra`` after ``server_round``;
    older checkpoints are removed once this one is on disk."""
    detached: list[tuple[Any, str, Any]] = []
    for part in _chain(strategy):
        for name in _LIVE:
            if hasattr(part, name):
                detached.append((part, name, getattr(part, name)))
                setattr(part, name, None)
    try:
        buffer = io.BytesIO()
        torch.save(
            {"round": server_round, "strategy": strategy, "arrays": own_arrays(arrays), "extra": dict(extra or {})},
            buffer,
            pickle_module=OWNING_PICKLE,
        )
    finally:
        for part, name, value in detached:
            setattr(part, name, value)
    path = checkpoint_path(folder, server_round)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buffer.getvalue())
    for old in path.parent.glob("round-*.pt"):
        if old != path:
            old.unlink(missing_ok=True)
    return path


class _OwningPickler(pickle.Pickler):
    """Pickles every Flower ``Array`` as a copy of its values. A strategy may keep arrays it sent
    (Flower's strategies keep ``current_arrays``); sending deflates them into chunks that are
    memoryviews into the message's buffers, which cannot be pickled."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Array):
            return Array, (np.array(obj.numpy(), copy=True),)
        return NotImplemented


#: A pickle module for ``torch.save(..., pickle_module=...)``, which uses only its ``Pickler``.
OWNING_PICKLE = types.ModuleType("owning_pickle")
OWNING_PICKLE.Pickler = _OwningPickler  # type: ignore[attr-defined]


def own_arrays(arrays: ArrayRecord) -> dict[str, np.ndarray]:
    """The arrays as plain numpy copies: an ArrayRecord that went out in a message holds its wire
    chunks (memoryviews into the message's buffers), which can neither be pickled nor outlive them."""
    return {name: np.array(array.numpy(), copy=True) for name, array in arrays.items()}


def load_checkpoint(folder: Path, writer: Any) -> tuple[int, Strategy, ArrayRecord, dict[str, Any]]:
    """(round, strategy, arrays, extra) of the last checkpoint; the strategy gets ``writer`` back."""
    server_round = last_checkpoint(folder)
    if server_round == 0:
        raise FileNotFoundError(
            f"results folder {folder} has no checkpoint: the run stopped before its first round completed "
            "(start it again instead)"
        )
    # The checkpoint is this run's own file (written by save_checkpoint), not untrusted input.
    # A run checkpointed on a GPU resumes on a machine without one: its tensors load to the CPU, and
    # the strategy's parts compute there.
    cuda = torch.cuda.is_available()
    data = torch.load(checkpoint_path(folder, server_round), weights_only=False, map_location=None if cuda else "cpu")
    strategy = data["strategy"]
    for part in _chain(strategy):
        if hasattr(part, "writer"):
            part.writer = writer
        if not cuda and isinstance(getattr(part, "device", None), torch.device) and part.device.type == "cuda":
            part.device = torch.device("cpu")
    arrays = data["arrays"]
    if isinstance(arrays, dict):
        arrays = ArrayRecord({name: Array(value) for name, value in arrays.items()})
    return server_round, strategy, arrays, data.get("extra", {})


def _key(info: wire.CohortInfo) -> str:
    return faults.node_key(info.train_users_lo, info.test_users_lo)


def remap_nodes(strategy: Strategy, new: Mapping[int, wire.CohortInfo]) -> None:
    """Give the restored strategy the new simulation's node ids (matched by the users each holds).

    Rewrites every ``nodes`` mapping, ``train_nodes`` / ``test_nodes`` list and
    ``_setup_sent`` set along the strategy chain; raises if a node is missing.
    """
    by_key = {_key(info): node for node, info in new.items()}
    for part in _chain(strategy):
        old = getattr(part, "nodes", None)
        if not isinstance(old, dict) or not old:
            continue
        missing = [k for k in map(_key, old.values()) if k not in by_key]
        if missing:
            raise RuntimeError(f"resume: {len(missing)} node(s) of the interrupted run are not in the new federation")
        id_map = {node: by_key[_key(info)] for node, info in old.items()}
        part.nodes = {id_map[n]: info for n, info in old.items()}
        for name in ("train_nodes", "test_nodes"):
            if isinstance(getattr(part, name, None), list):
                setattr(part, name, [id_map[n] for n in getattr(part, name)])
        if isinstance(getattr(part, "_setup_sent", None), set):
            part._setup_sent = {id_map[n] for n in part._setup_sent if n in id_map}


class RoundCheckpoints(Strategy):
    """Save the wrapped strategy after every round; in a resumed run, skip the completed rounds.

    Parameters
    ----------
    strategy : Strategy
        The mode's strategy with its accounting (``LocalDPAccounting``,
        ``CentralDPAccounting`` or ``UserLevelDPFedAvg``), fresh or restored.
    folder : Path
        The run's results folder.
    resumed_from : int
        Rounds already completed (0 for a new run).
    arrays : ArrayRecord or None
        The arrays after round ``resumed_from`` (resumed runs).
    extra : Mapping or None
        Small facts saved with every checkpoint (how the model started, diagnostics).
    """

    def __init__(
        self,
        strategy: Strategy,
        folder: Path,
        resumed_from: int = 0,
        arrays: ArrayRecord | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.strategy = strategy
        self.folder = Path(folder)
        self.resumed_from = int(resumed_from)
        self.arrays = arrays if arrays is not None else ArrayRecord()
        self.extra = dict(extra or {})  # saved with every checkpoint (how the run started, diagnostics)
        self.unsaveable = ""  # why the strategy cannot be checkpointed (a local object), once it is known

    def _tag(self, messages: Iterable[Message]) -> list[Message]:
        messages = list(messages)
        if self.resumed_from:
            for m in messages:
                if wire.CONFIG in m.content:
                    wire.config_record(m.content, wire.CONFIG)[RESUMED_FROM] = self.resumed_from
                else:
                    m.content[wire.CONFIG] = ConfigRecord({RESUMED_FROM: self.resumed_from})
        return messages

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        if server_round <= self.resumed_from:
            return []
        if server_round == self.resumed_from + 1 and self.resumed_from:
            arrays = self.arrays  # Flower's loop holds the initial arrays: use the checkpoint's
        with PHASES.measure("server configure_train"):  # round 1 of the local mode: discovery and M1
            return self._tag(self.strategy.configure_train(server_round, arrays, config, grid))

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        if server_round <= self.resumed_from:
            return (self.arrays if server_round == self.resumed_from else None), None
        with PHASES.measure("server aggregate_train"):
            arrays, metrics = self.strategy.aggregate_train(server_round, replies)
        if arrays is not None:
            self.arrays = arrays
        return arrays, metrics

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        if server_round <= self.resumed_from:
            return []
        with PHASES.measure("server configure_evaluate"):
            return self._tag(self.strategy.configure_evaluate(server_round, arrays, config, grid))

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        if server_round <= self.resumed_from:
            return None
        with PHASES.measure("server aggregate_evaluate"):
            metrics = self.strategy.aggregate_evaluate(server_round, replies)
        with PHASES.measure("checkpoint"):
            if not self.unsaveable:
                try:
                    save_checkpoint(self.folder, server_round, self.strategy, self.arrays, self.extra)
                except (pickle.PicklingError, AttributeError, TypeError) as err:
                    if "pickle" not in str(err):  # not a pickling failure: a bug, raised as such
                        raise
                    # A strategy object defined inside a function (handed over from Python) cannot be pickled:
                    # the run goes on, without checkpoints, and says it cannot be resumed.
                    self.unsaveable = f"{type(err).__name__}: {err}"
                    log.warning("NO CHECKPOINTS: the strategy cannot be saved (%s); this run cannot be resumed", err)
        return metrics

    def summary(self) -> None:
        self.strategy.summary()
