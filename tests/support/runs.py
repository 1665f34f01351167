"""The small runs the end-to-end comparisons share (SST-2 at the sentence and label levels, the word and
document levels, user-level central DP), and how two runs' rounds are compared."""

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


#: The quickstart's recipe at a small size, as changes to ``SMALL_RUN``: a supervised public map
#: (m' = 2), labels in the clear.
SUPERVISED_MAP: dict[str, object] = {
    "train-size": 400,
    "public-fraction": 0.25,
    "users-per-node": 100,
    "map-in": "supervised",
    "map-dim": 2,
    "map-scale": 0.0,
}


#: The other levels, as changes to ``SMALL_RUN``: word (TrLaplace, RR labels) and document (DeepCandidate
#: on IMDB).
LEVELS: dict[str, dict[str, object]] = {
    "word": {
        "sentence-mechanism": "none",
        "map-in": "identity",
        "word-mechanism": "trlaplace",
        "word-epsilon": 20.0,
        "word-options": "vocab_size = 20000",
        "word-quality-docs": 20,
        "word-support-words": 1,
        "label-mechanism": "rr",
        "label-epsilon": 2.0,
        "max-epsilon": 150.0,
    },
    "document": {
        "dataset": "imdb",
        "train-size": 80,
        "test-size": 20,
        "public-fraction": 0.5,
        "users-per-node": 20,
        "sentence-mechanism": "none",
        "map-in": "identity",
        "document-mechanism": "deepcandidate",
        "document-epsilon": 10.0,
        "recoder-clusters": 4,
        "recoder-epochs": 2,
        "num-candidates": 20,
        "candidate-min-sentences": 4,
    },
}
# 300 synthetic users (no documents) on 3 nodes in user-level central DP: a run of about a second.
SYNTHETIC_USER_CENTRAL: dict[str, object] = {
    "dataset": "synthetic",
    "num-users": 300,
    "synthetic-test-users": 60,
    "synthetic-dim": 16,
    "users-per-node": 100,
    "mode": "central",
    "central-unit": "user",
    "map-in": "identity",
    "central-cohort-size": 50.0,
    "noise-seed": 0,
}

#: Round-record fields that depend on the wall clock, and on where a result came from (``cached``: the
#: path of a cache file the run read or wrote) rather than on what it is.
WALL_CLOCK = ("seconds", "timing")
PROVENANCE = ("cached",)


def _computed(value: object) -> object:
    """``value`` without its ``PROVENANCE`` fields, at any depth."""
    if isinstance(value, dict):
        return {k: _computed(v) for k, v in value.items() if k not in PROVENANCE}
    return [_computed(v) for v in value] if isinstance(value, list) else value


def comparable(folder: Path) -> list[dict]:
    """A run's round records without their wall-clock fields and cache provenance: what two runs of the
    same computation share (the first computes the document level's public setup, the second reads it)."""
    return [_computed(r) for r in timeless(folder)]


def timeless(folder: Path) -> list[dict]:
    """A run's round records without their wall-clock fields (``seconds``, ``timing``)."""
    rows = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in rows]
