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
can fingerprint both. Node-level central mode is here since its runs seed Python's and numpy's global
generators (which Flower's FedAvg samples nodes with and its DP wrapper draws noise from) from ``noise-seed``.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the configs of this checkout's tests

from tests.support.runs import LEVELS, MODES, PROVENANCE, SMALL_RUN, SUPERVISED_MAP, WALL_CLOCK, comparable  # noqa: E402

# The small runs the end-to-end tests compare (tests/support/runs.py): two nodes, two rounds, a few
# seconds each; run-name is set per run.
RUNS: dict[str, dict[str, Any]] = {
    # sentence level (Purkayastha) and label level (randomized response), local DP
    "sentence-label-local": {**SMALL_RUN, **MODES["local"]},
    # the quickstart's recipe: a supervised public map, labels in the clear
    "sentence-supervised-map": {**SMALL_RUN, **SUPERVISED_MAP},
    # label level alone with the prior-aware randomized response
    "label-rr-prior": {**SMALL_RUN, "sentence-mechanism": "none", "label-mechanism": "rr_prior", "label-epsilon": 1.0},
    # word level (TrLaplace) with RR labels
    "word-local": {**SMALL_RUN, **LEVELS["word"]},
    # document level (DeepCandidate on IMDB)
    "document-local": {**SMALL_RUN, **LEVELS["document"]},
    # user-level central DP (DP-SGD over users' updates)
    "central-user": {**SMALL_RUN, **MODES["central-user"]},
    # node-level central DP (Flower's DP-FedAvg wrappers; sampling and noise seeded from noise-seed)
    "central-node": {
        **SMALL_RUN,
        "mode": "central",
        "central-unit": "node",
        "central-noise-multiplier": 1.0,
        "central-clip": 1.0,
        "fraction-train": 0.5,
    },
}

#: Fields that depend on the wall clock or on where the cache lives, not on the computation.
UNSTABLE = (*WALL_CLOCK, *PROVENANCE)


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
    records = comparable(work / "out" / name)
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
