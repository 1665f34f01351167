"""Node-local data for the tests: the training documents that partition ``k`` of a run's dataset holds,
written as that node's own file (node config ``data-path``), in user order. A federation of nodes
reading these files is the same computation as one sharing the dataset."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def run_with_node_files(cfg: Mapping[str, Any], node_configs: Sequence[Mapping[str, Any]] | None = None) -> Path:
    """The run of ``cfg`` on two nodes in this process (the local backend's grid) with these node
    configs (e.g. ``data-path``); its results folder."""
    from clients.app import make_client_app
    from simulations.runtime.local_runtime import run_local
    from strategies.server_app import make_server_app

    run_local(make_server_app(cfg), make_client_app(cfg), 2, dict(cfg), node_configs=node_configs)
    return Path(cfg["out-dir"]) / cfg["run-name"]


def write_node_files(cfg: Mapping[str, Any], folder: Path, suffixes: Sequence[str]) -> list[Path]:
    """One file per node (``len(suffixes)`` nodes, ``.jsonl`` or ``.csv``): the ``text`` and ``label``
    (the class name) of the documents that node's partition of ``cfg``'s dataset holds."""
    from fl.cohort import user_partition
    from fl.data import datasets as data
    from fl.data.partition import cohort

    ds = data.load(cfg.data, cfg.users, cfg.release.level)
    assert isinstance(ds, data.TextDataset)
    parts = user_partition(cfg.data, cfg.users, cfg.release.level)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, suffix in enumerate(suffixes):
        users = cohort(k, len(suffixes), parts.num_users)
        rows = np.concatenate(parts.rows(list(users))).astype(np.int64)
        sub = ds.train.select(rows)
        records = [
            {"text": t, "label": ds.label_names[int(y)]} for t, y in zip(sub["text"][:], sub["label"][:], strict=True)
        ]
        path = folder / f"node{k}{suffix}"
        if suffix == ".csv":
            with path.open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=["text", "label"])
                writer.writeheader()
                writer.writerows(records)
        else:
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
        paths.append(path)
    return paths
