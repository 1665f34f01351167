"""The release channel: one level's path from a user's document to what the server sees.

A channel is built once from the config (on each node and on the server) and
owns, for its level:

* the draw: :meth:`EmbeddingChannel.release` turns the requested rows of a
  node's cohort into released rows, with the node's generator;
* the charge: :meth:`EmbeddingChannel.charges` states what each row's release
  guarantees (:class:`~fl.accounting.charges.Charge`). The client's budget
  check and the server's ledger both read these charges, and the charges
  travel with the release on the wire;
* the wire form of its per-row extras (word counts, sentence counts, candidate
  indices instead of vectors): :meth:`to_record` / :meth:`from_record`;
* its words for the run's summary and its per-level privacy report.

Which channel applies is decided once, by :func:`fl.levels.channels.make_channels`.
A new level is one module with a subclass and one entry in ``fl.levels.channels.CHANNELS``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from flwr.app import Array, ArrayRecord

from fl.accounting.charges import Charge, costs, index_charges
from fl.cohort import Cohort
from fl.config import ReleaseConfig
from fl.levels.spec import LevelSpec
from fl.maps import input_map as maps
from mechanisms.guarantee import Guarantee


@dataclass
class ReleaseInputs:
    """What a node hands a channel to draw releases of one split.

    ``matrix`` is M1 (``None``: identity); ``model`` the server model when the
    message carried one (leaky mode, model prior); ``rewrite`` yields the
    word-level rewrite in force for the split (the node counts its draws).
    """

    cohort: Cohort
    purpose: str  # "train" or "test"
    matrix: torch.Tensor | None = None
    model: torch.nn.Module | None = None
    rewrite: Callable[[], Any] | None = None
    leaky: bool = False


@dataclass
class Drawn:
    """Released rows: vectors float32 [n, r], public candidate indices when the channel sends those,
    and (leaky mode only, not private) the unsanitized M1 gradient."""

    emb: torch.Tensor
    ids: np.ndarray | None = None
    grad: torch.Tensor | None = None


@dataclass
class Received:
    """One reply's releases as the server reads them back (:meth:`EmbeddingChannel.from_record`)."""

    emb: np.ndarray  # float32 [n, r]
    extras: dict[str, np.ndarray] = field(default_factory=dict)


class EmbeddingChannel(ABC):
    """The release path of the document representation at one level.

    Parameters
    ----------
    release : ReleaseConfig
        The run's release section (the mechanisms and their budgets).
    input_dim : int
        m', the dimension the mechanism sees (M1's output).
    num_classes : int, optional
        The run's number of classes (a task-aware mechanism such as ``class_rr`` releases one).
    """

    level: ClassVar[str]
    extra_keys: ClassVar[tuple[str, ...]] = ()  # per-row arrays on the wire besides the rows
    channel: ClassVar[str]  # whose ``<channel>-mechanism`` and ``<channel>-epsilon`` name the mechanism and budget
    unit_suffix: ClassVar[str] = ""  # "-per-word": what the epsilon in a run name is per
    needs_public_setup: ClassVar[bool] = False  # the server builds public material and sends it to nodes

    def __init__(self, release: ReleaseConfig, input_dim: int, num_classes: int | None = None) -> None:
        self.release_config = release
        self.input_dim = int(input_dim)
        self.num_classes = num_classes  # the run's classes (a task-aware mechanism releases one of them)

    # ------------------------------------------------------------- privacy
    @property
    @abstractmethod
    def guarantee(self) -> Guarantee:
        """The per-unit guarantee (per release, per word, per sentence of a document)."""

    @abstractmethod
    def row_charges(self, n: int, extras: Mapping[str, np.ndarray]) -> list[Charge]:
        """One charge for each of ``n`` rows, from their extras (both ends call this with the same extras)."""

    def charges(self, n: int, extras: Mapping[str, np.ndarray]) -> tuple[list[Charge], np.ndarray]:
        """Distinct charges of the rows and each row's index into them."""
        return index_charges(self.row_charges(n, extras))

    def costs(self, n: int, extras: Mapping[str, np.ndarray]) -> np.ndarray:
        """Pure-LDP epsilon of each row's release: what the budget check and the ledger charge."""
        table, index = self.charges(n, extras)
        return costs(table, index)

    # ------------------------------------------------------------- the draw
    def extras(self, cohort: Cohort, purpose: str, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Per-row extras of these cohort rows (known before the draw: word or sentence counts)."""
        return {}

    @abstractmethod
    def release(self, inputs: ReleaseInputs, rows: np.ndarray, generator: torch.Generator) -> Drawn:
        """Draw one release per row with ``generator`` (fresh noise per row)."""

    def clean(self, inputs: ReleaseInputs, rows: np.ndarray) -> torch.Tensor | None:
        """Noise-free rows in the release space, for on-device inference (the model applied to the clean
        test input; never released); ``None`` when releases do not live in M1's output space."""
        c = inputs.cohort
        if c.release_dim != c.map_dim:
            return None
        emb = c.train_emb if inputs.purpose == "train" else c.test_emb
        return maps.apply_input_map(emb[rows], inputs.matrix).to(torch.float32)

    def breakdown(self, extras: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """Per-row sizes to break evaluation scores down by (sentences per document), if any."""
        return None

    # ------------------------------------------------------------- the server's side
    @classmethod
    def public_setup(cls, spec: LevelSpec, device: Any) -> Any:
        """Public material the server builds before the first round (``None``: none needed)."""
        return None

    @classmethod
    def early_warning(cls, release: ReleaseConfig, num_users: int) -> str | None:
        """A loud warning about this level's guarantee for ``num_users`` users, before anything runs."""
        return None

    @classmethod
    def diagnostics(cls, spec: LevelSpec) -> tuple[str, dict[str, Any]] | None:
        """``(name, data)`` of a diagnostic the driver computes once per run (``<name>.json``)."""
        return None

    # ------------------------------------------------------------- the wire
    def to_record(self, emb: np.ndarray, ids: np.ndarray | None, extras: Mapping[str, np.ndarray]) -> dict[str, Array]:
        """The rows' wire arrays (vectors, or candidate indices) and their extras."""
        arrays = {"embeddings": Array(np.asarray(emb, dtype=np.float32))}
        arrays.update({k: Array(np.asarray(extras[k], dtype=np.int64)) for k in self.extra_keys})
        return arrays

    def from_record(self, record: ArrayRecord) -> Received:
        """Inverse of :meth:`to_record` on the server."""
        return Received(
            record["embeddings"].numpy() if "embeddings" in record else np.zeros((0, 0), np.float32),
            {k: record[k].numpy() for k in self.extra_keys},
        )

    # ------------------------------------------------------------- words
    def statement(self) -> dict[str, Any]:
        """Entries of the summary's ``guarantee`` block for this level (beyond ``"sentence"``)."""
        return {}

    def sentence_text(self, base: str) -> str:
        """The summary's words for the embedding release (``base``: the sentence mechanism's)."""
        return base

    def report(self, seen: Mapping[str, np.ndarray], warning: str | None = None) -> tuple[str, dict[str, Any]] | None:
        """``(key, block)`` of a per-level privacy report from the extras of the fresh releases so far."""
        return None

    @classmethod
    def run_label(cls, release: ReleaseConfig) -> str:
        """Mechanism and epsilon for run names and plot titles (``purkayastha-eps10``,
        ``cmp-eps10-per-word``); needs only the release section."""
        name = release.mechanism_name(cls.channel)
        return name if name == "none" else f"{name}-eps{release.epsilon(cls.channel):g}{cls.unit_suffix}"

    @property
    def mechanism_name(self) -> str:
        """Registry name of the mechanism."""
        return self.release_config.mechanism_name(self.channel)

    @property
    def epsilon(self) -> float:
        """The configured per-unit epsilon."""
        return self.release_config.epsilon(self.channel)


class MappedChannel(EmbeddingChannel):
    """A channel whose release is ``mechanism(n(M1 source))`` per row: the sentence mechanism applied to
    M1 of an embedding the subclass chooses (:meth:`source`). In the leaky mode the training release
    also carries dLoss/dM1. The sentence and word levels are such channels (the word level's sentence
    mechanism is ``none``: its noise is in the rewrite)."""

    def __init__(self, release: ReleaseConfig, input_dim: int, num_classes: int | None = None) -> None:
        super().__init__(release, input_dim, num_classes)
        self.mechanism = release.mechanism("sentence", input_dim=input_dim, num_classes=num_classes)

    @abstractmethod
    def source(self, inputs: ReleaseInputs, rows: np.ndarray) -> torch.Tensor:
        """The embedding of each requested row before M1."""

    def release(self, inputs: ReleaseInputs, rows: np.ndarray, generator: torch.Generator) -> Drawn:
        source = self.source(inputs, rows)
        if inputs.leaky and inputs.purpose == "train":
            if inputs.matrix is None or inputs.model is None:
                raise ValueError("the leaky mode needs M1 and the server model")
            y = inputs.cohort.train_y[rows]
            released, grad = maps.leaky_map_gradient(inputs.matrix, inputs.model, source, y, self.mechanism, generator)
            return Drawn(released.to(torch.float32), grad=grad)
        released = self.mechanism.sanitize(maps.apply_input_map(source, inputs.matrix), generator=generator)
        return Drawn(released.to(torch.float32))

    def clean(self, inputs: ReleaseInputs, rows: np.ndarray) -> torch.Tensor | None:
        """The mechanism's noise-free release of each row's n(M1 x) (``SentenceMechanism.clean``: the public
        class's one-hot row for class_rr, the row itself for the others), for on-device inference; ``None``
        when it does not live in the release space."""
        c = inputs.cohort
        emb = c.train_emb if inputs.purpose == "train" else c.test_emb
        out = self.mechanism.clean(maps.apply_input_map(emb[rows], inputs.matrix))
        return out.to(torch.float32) if out.shape[1] == c.release_dim else None


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def described(g: Guarantee) -> dict[str, Any]:
    """A guarantee as a report entry: its fields, its pure-LDP equivalent and its words."""
    return {**g.to_dict(), "pure_ldp": _finite(g.as_ldp()[0]), "text": g.describe()}


def concat_extras(parts: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per-key concatenation of extras (the rows seen so far)."""
    keys = {k for p in parts for k in p}
    return {k: np.concatenate([np.asarray(p[k]) for p in parts if k in p]) for k in keys}


def as_records(arrays: Mapping[str, np.ndarray]) -> ArrayRecord:
    return ArrayRecord({k: Array(v) for k, v in arrays.items()})
