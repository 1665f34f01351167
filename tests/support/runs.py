"""The small SST-2 run the end-to-end comparisons share, and how they compare two runs' rounds."""

from __future__ import annotations

import json
from pathlib import Path

# 60 training and 40 test users, 30 per node: two nodes, simulated or deployed.
SMALL_RUN: dict[str, object] = {
    "dataset": "sst2",
    "train-size": 60,
    "test-size": 40,
    "users-per-node": 30,
    "num-server-rounds": 2,
    "fraction-train": 0.5,
    "sentence-epsilon": 10.0,
    "server-epochs": 3,
    "noise-seed": 0,
    "run-name": "r",
}
#: The two modes every comparison runs: local DP (sentence level, RR labels) and user-level central DP.
MODES: dict[str, dict[str, object]] = {
    "local": {"label-mechanism": "rr", "label-epsilon": 2.0},
    "central-user": {
        "mode": "central",
        "central-unit": "user",
        "central-cohort-size": 20.0,
        "central-noise-multiplier": 1.0,
        "central-clip": 1.0,
    },
}


def timeless(folder: Path) -> list[dict]:
    """A run's round records without their wall-clock fields (``seconds``, ``timing``)."""
    rows = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("seconds", "timing")} for r in rows]
