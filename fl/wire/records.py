"""The typed views of the records that cross: a node's cohort description and a release with its charges.

The ClientApp writes them and the ServerApp reads them with the same code, so the two ends cannot drift.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from fl.accounting.charges import Charge
from fl.wire.keys import CHANNELS, CHARGES, RELEASE
from fl.wire.reads import array_record, config_record, read_int


@dataclass(frozen=True)
class CohortInfo:
    """What a node reports about the users it holds and the shapes of its releases."""

    train_users_lo: int
    train_users_hi: int
    num_train_users: int
    num_train_docs: int
    test_users_lo: int
    test_users_hi: int
    num_test_users: int
    num_classes: int
    encoder_dim: int
    map_dim: int
    release_dim: int
    partition_id: int = 0  # the node's place in the federation (node config), the order of its users
    num_partitions: int = 1
    # 1: the node's training documents are its own file (node config ``data-path``); until the server
    # assigns its user ids (``USERS``), ``train_users_*`` count from 0 and ``num_train_users`` is 0.
    node_local: int = 0

    def to_record(self) -> MetricRecord:
        return MetricRecord({f.name.replace("_", "-"): int(getattr(self, f.name)) for f in fields(self)})

    @classmethod
    def from_record(cls, record: MetricRecord) -> CohortInfo:
        values: dict[str, int] = {}
        missing: list[str] = []
        for f in fields(cls):
            key = f.name.replace("_", "-")
            if key in record:
                values[f.name] = read_int(record, key)
            elif f.default is MISSING:
                missing.append(f.name)
        if missing:
            raise KeyError(f"cohort record lacks {', '.join(missing)}")
        return cls(**values)  # absent optional keys take the field's default

    @property
    def num_local_users(self) -> int:
        return self.train_users_hi - self.train_users_lo

    @property
    def holds_test_users(self) -> bool:
        return self.test_users_hi > self.test_users_lo

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class Release:
    """Rows a node releases in one reply, and what each costs.

    ``rows`` holds the channel's wire arrays (vectors or candidate indices, and
    per-row extras such as ``num-words``); ``charges[channel]`` is the list of
    distinct charges of that channel and ``index[channel]`` each row's entry in
    it. Re-sent rows carry their charge too; only ``fresh`` rows are new spend.
    """

    user_ids: np.ndarray
    fresh: np.ndarray  # bool per row
    rows: dict[str, Array]
    charges: dict[str, list[Charge]]
    index: dict[str, np.ndarray]
    doc_ids: np.ndarray | None = None  # training releases: the document's row in the train split
    labels: np.ndarray | None = None  # training releases: sanitized labels

    def to_content(self) -> dict[str, ArrayRecord | ConfigRecord]:
        arrays = {
            "user-ids": Array(np.asarray(self.user_ids, dtype=np.int64)),
            "fresh": Array(np.asarray(self.fresh, dtype=np.uint8)),
            **self.rows,
        }
        if self.doc_ids is not None:
            arrays["doc-ids"] = Array(np.asarray(self.doc_ids, dtype=np.int64))
        if self.labels is not None:
            arrays["labels"] = Array(np.asarray(self.labels, dtype=np.int64))
        for channel, index in self.index.items():
            arrays[f"{channel}-charge"] = Array(np.asarray(index, dtype=np.int64))
        charges = ConfigRecord({c: json.dumps([x.to_dict() for x in table]) for c, table in self.charges.items()})
        return {RELEASE: ArrayRecord(arrays), CHARGES: charges}

    @classmethod
    def from_content(cls, content: RecordDict) -> Release:
        record = array_record(content, RELEASE)
        known = {"user-ids", "fresh", "doc-ids", "labels", *(f"{c}-charge" for c in CHANNELS)}
        table = config_record(content, CHARGES)
        charges = {c: [Charge.from_dict(d) for d in json.loads(str(v))] for c, v in table.items()}
        return cls(
            user_ids=record["user-ids"].numpy(),
            fresh=record["fresh"].numpy().astype(bool),
            rows={k: record[k] for k in record if k not in known},
            charges=charges,
            index={c: record[f"{c}-charge"].numpy() for c in charges},
            doc_ids=record["doc-ids"].numpy() if "doc-ids" in record else None,
            labels=record["labels"].numpy() if "labels" in record else None,
        )

    def rows_record(self) -> ArrayRecord:
        """The channel's wire arrays, for ``EmbeddingChannel.from_record``."""
        return ArrayRecord(dict(self.rows))

    def fresh_charges(self, channel: str) -> list[tuple[np.ndarray, Charge]]:
        """(user ids, charge) groups of the fresh rows of ``channel`` (no group for an absent channel)."""
        if channel not in self.index:
            return []
        idx, users = self.index[channel][self.fresh], self.user_ids[self.fresh]
        return [(users[idx == i], charge) for i, charge in enumerate(self.charges[channel]) if (idx == i).any()]
