"""What a privacy unit's mode is on the server: one registered extension point.

A mode (local DP; central DP per user; central DP per node) owns, on the server side:

* ``scope``: ``"local"`` or ``"central"`` (what its guarantee covers, ``fl.accounting.scope``), and
  ``wire_scopes``: the message audit's scopes of its messages (``fl.wire.DECLARED_FIELDS``; its declared
  fields are :func:`declared_fields`);
* ``check(cfg)``: its config rules, before anything runs;
* ``start(grid, cfg, writer, timeout)``: its strategy, accounting outermost, and where the model starts;
* ``owns(strategy)``: whether a checkpointed strategy is its own (a resumed run finds its mode so);
* ``summary(cfg, run)``: its summary fields, plot title and test label;
* ``attack_state(cfg, run, final)``: what ``sanitas attack`` reads, or ``None`` with the reason logged;
* ``releases_embeddings``: whether its users release (sanitized) embeddings an attacker can read.

The ServerApp (``strategies.server_app``) dispatches through :func:`server_mode` and :func:`mode_of`;
no other module branches on the mode or checks a mode's strategy class. The node side is
``clients.modes``; the mode's name (``fl.config.mode_name``) joins the two.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from flwr.app import ArrayRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fl import wire
from fl.attacks.state import AttackState
from fl.config import RunConfig, mode_name
from fl.reporting.results import RunWriter


@dataclass
class ModeRun:
    """One mode's strategy (its accounting outermost) and how its summary and plot read."""

    strategy: Strategy
    initial_arrays: ArrayRecord
    start: str = ""  # where the model started (central mode)
    info: Any = None  # node-level central mode: a node's CohortInfo (the model's shape)

    @property
    def records(self) -> list[dict[str, Any]]:
        """The round records the mode's strategy kept."""
        return self.strategy.records  # type: ignore[attr-defined]


class ServerMode(Protocol):
    """The server side of a mode (module docstring)."""

    name: str
    scope: str
    wire_scopes: tuple[str, ...]
    releases_embeddings: bool

    def check(self, cfg: RunConfig) -> None: ...

    def start(self, grid: Grid, cfg: RunConfig, writer: RunWriter, timeout: float) -> ModeRun: ...

    def owns(self, strategy: Strategy) -> bool: ...

    def summary(self, cfg: RunConfig, run: ModeRun) -> tuple[dict[str, Any], str, str]: ...

    def attack_state(self, cfg: RunConfig, run: ModeRun, final: ArrayRecord) -> AttackState | None: ...

    def holds_own_files(self, run: ModeRun) -> bool: ...

    def run_name(self, cfg: RunConfig) -> str: ...


#: The registered modes by name (``fl.config.mode_name``), in registration order.
MODES: dict[str, ServerMode] = {}


def register(mode: ServerMode) -> ServerMode:
    """Add ``mode`` to :data:`MODES` under its name (a name registered twice, or a mode whose wire scopes
    declare no message field, is an error)."""
    if mode.name in MODES:
        raise ValueError(f"a mode named {mode.name!r} is registered already")
    if not declared_fields(mode):
        raise ValueError(f"mode {mode.name!r}: no message field is declared for its wire scopes {mode.wire_scopes}")
    MODES[mode.name] = mode
    return mode


def server_mode(cfg: RunConfig) -> ServerMode:
    """The registered mode a resolved config selects."""
    name = mode_name(cfg)
    if name not in MODES:
        raise ValueError(f"no registered mode {name!r} (registered: {sorted(MODES)})")
    return MODES[name]


def mode_of(strategy: Strategy) -> ServerMode:
    """The registered mode whose strategy ``strategy`` is (a checkpoint's, on resume)."""
    for mode in MODES.values():
        if mode.owns(strategy):
            return mode
    raise TypeError(f"{type(strategy).__name__} is not the strategy of a registered mode ({sorted(MODES)})")


def final_fields(records: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    """The summary fields every mode has from its round records: rounds, the last round's ``keys`` and the
    best accuracy."""
    last = records[-1] if records else {}
    best = max(
        (r["accuracy"] for r in records if r["accuracy"] is not None and not math.isnan(r["accuracy"])), default=None
    )
    return {"rounds": len(records), "final": {k: last.get(k) for k in keys}, "best_accuracy": best}


def data_fields(cfg: RunConfig) -> dict[str, Any]:
    """The summary's ``data`` block (documents, public split and its overlap), where the dataset has text."""
    from fl.data import datasets as data

    return {} if cfg.data.synthetic else {"data": data.load(cfg.data, cfg.users, cfg.release.level).describe()}


def user_documents(cfg: RunConfig, users: np.ndarray) -> np.ndarray:
    """The training-split rows of these users' documents."""
    from fl.cohort import user_partition

    rows = user_partition(cfg.data, cfg.users, cfg.release.level).rows(users.tolist())
    return np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, dtype=np.int64)


def declared_fields(mode: ServerMode) -> list[wire.DeclaredField]:
    """The keys a node may send in ``mode`` (``fl.wire.DECLARED_FIELDS`` in its wire scopes): what the
    message audit allows its replies to carry."""
    return [f for f in wire.DECLARED_FIELDS if set(f.scopes) & set(mode.wire_scopes)]


def run_folder(cfg: RunConfig) -> Path:
    """``<out-dir>/<run-name>``; without a ``run-name``, the mode's name for the run (dataset, mechanism or
    noise, epsilon) and a timestamp."""
    name = cfg.output.run_name or f"{server_mode(cfg).run_name(cfg)}-{time.strftime('%Y%m%d-%H%M%S')}"
    return Path(cfg.output.out_dir).expanduser().resolve() / name


def any_node_local(infos: Any) -> bool:
    """Whether any of these node descriptions (``fl.wire.CohortInfo``) trained on the node's own file
    (``data-path``): a mode's ``holds_own_files``."""
    return any(getattr(v, "node_local", 0) for v in infos)
