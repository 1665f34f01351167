"""Seeded runs, one per level and mode, fingerprinted so that two versions of the code can be compared.

A restructuring must not change behaviour: the same seeded config gives the same ``rounds.jsonl``. This
script runs each config below with ``sanitas run`` (local backend, a fresh cache folder) and records,
per run, the SHA-256 of its ``rounds.jsonl`` with the wall-clock fields left out (``seconds``,
``timing``, and ``cached``, the path of a cache file the run read or wrote), and the records
themselves. Run it on two versions and compare::

    python benchmarks/rounds_equality.py --out before.json          # at the old commit
    python benchmarks/rounds_equality.py --out after.json           # at the new one
    python benchmarks/rounds_equality.py --compare before.json after.json

``--code DIR`` runs the code of another checkout (it goes first on ``PYTHONPATH``), so one environment
can fingerprint both. Node-level central mode is not here: Flower's FedAvg samples nodes with Python's
unseeded ``random.sample`` and its DP wrapper draws unseeded noise, so two runs of the same code differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# 60 training and 40 test SST-2 users over two nodes, two rounds: small enough for a few seconds each.
SMALL: dict[str, Any] = {
    "dataset": "sst2",
    "train-size": 60,
    "test-size": 40,
    "users-per-node": 30,
    "num-server-rounds": 2,
    "fraction-train": 0.5,
    "sentence-epsilon": 10.0,
    "server-epochs": 3,
    "noise-seed": 0,
}

RUNS: dict[str, dict[str, Any]] = {
    # sentence level (Purkayastha) and label level (randomized response), local DP
    "sentence-label-local": {**SMALL, "label-mechanism": "rr", "label-epsilon": 2.0},
    # the quickstart's recipe: a supervised public map, labels in the clear, prior-aware labels off
    "sentence-supervised-map": {
        **SMALL,
        "train-size": 400,
        "public-fraction": 0.25,
        "users-per-node": 100,
        "map-in": "supervised",
        "map-dim": 2,
        "map-scale": 0.0,
    },
    # label level alone with the prior-aware randomized response
    "label-rr-prior": {**SMALL, "sentence-mechanism": "none", "label-mechanism": "rr_prior", "label-epsilon": 1.0},
    # word level (TrLaplace) with RR labels
    "word-local": {
        **SMALL,
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
    # document level (DeepCandidate on IMDB)
    "document-local": {
        **SMALL,
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
    # user-level central DP (DP-SGD over users' updates)
    "central-user": {
        **SMALL,
        "mode": "central",
        "central-unit": "user",
        "central-cohort-size": 20.0,
        "central-noise-multiplier": 1.0,
        "central-clip": 1.0,
    },
}

#: Fields that depend on the wall clock or on where the cache lives, not on the computation.
UNSTABLE = ("seconds", "timing", "cached")


def stable_records(rounds: Path) -> list[dict[str, Any]]:
    """The run's round records without the fields in ``UNSTABLE``."""
    rows = [json.loads(line) for line in rounds.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in row.items() if k not in UNSTABLE} for row in rows]


def fingerprint(name: str, config: dict[str, Any], work: Path, code: Path | None) -> dict[str, Any]:
    """Run one config with ``sanitas run`` and fingerprint its rounds."""
    path = work / f"{name}.toml"
    path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in {**config, "run-name": name}.items()))
    env = dict(os.environ, SANITAS_CACHE_DIR=str(work / "cache"))
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    argv = [sys.executable, "-c", "from simulations.cli import entry; entry()", "run", str(path)]
    argv += ["--out", str(work / "out"), "--set", f'cache-dir="{work / "cache"}"']
    done = subprocess.run(argv, env=env, cwd=code or Path.cwd(), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"run {name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    records = stable_records(work / "out" / name / "rounds.jsonl")
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "rounds": records}


def compare(a: Path, b: Path) -> int:
    """Print one line per run: identical, or the first differing round; exit 1 on any difference."""
    left, right = json.loads(a.read_text())["runs"], json.loads(b.read_text())["runs"]
    status = 0
    for name in sorted(set(left) | set(right)):
        if name not in left or name not in right:
            print(f"{name}: only in {'the first' if name in left else 'the second'} file")
            status = 1
        elif left[name]["sha256"] == right[name]["sha256"]:
            print(f"{name}: identical ({len(left[name]['rounds'])} rounds, sha256 {left[name]['sha256'][:12]})")
        else:
            status = 1
            pairs = zip(left[name]["rounds"], right[name]["rounds"], strict=False)
            first = next((i for i, (x, y) in enumerate(pairs) if x != y), None)
            print(f"{name}: DIFFERENT (first differing record: {first})")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="JSON file for the fingerprints")
    parser.add_argument("--code", type=Path, help="run the code of this checkout instead of the installed one")
    parser.add_argument("--only", nargs="*", choices=sorted(RUNS), help="run these configs only")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two fingerprint files")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        parser.error("--out is required unless --compare is given")
    code = args.code.resolve() if args.code else None
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or sorted(RUNS):
            print(f"running {name}", flush=True)
            runs[name] = fingerprint(name, RUNS[name], Path(tmp), code)
    revision = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=code or Path.cwd(), capture_output=True, text=True
    ).stdout.strip()
    args.out.write_text(json.dumps({"revision": revision, "unstable_fields": UNSTABLE, "runs": runs}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
