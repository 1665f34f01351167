"""Where a run's time goes, for any checkout, old ones included: the ServerApp profiled (JSON).

Usage: python benchmarks/bench_server_profile.py [--repo CHECKOUT] [--set KEY=VALUE ...] [--out FILE]
       [CONFIG]

Runs ``sanitas run CONFIG`` (default ``simulations/experiments/sst2_class_rr_4000.toml``) of checkout
``--repo`` (default: this one) in this process, with ``cProfile`` enabled in the thread that runs
``strategies.server_app.run_server`` (on the Ray backend Flower runs the ServerApp in a thread of
the driver). It needs nothing from the checkout but that function, so it measures commits from
before ``fl.reporting.timing`` existed (the "before" of ``docs/results/run-speed``). It reports the wall
seconds of the whole command, the server's seconds, their difference (interpreter, imports, data
checks, the backend's start and shutdown) and the cumulative seconds of the server-side
functions below: node discovery and the public map (``discover``, ``choose_map_scale``), the
round trips (``send_and_receive``), server training (``train_epochs``), checkpoints and writing.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: (label, function name, file suffix) of the cumulative times reported.
FUNCTIONS = (
    ("discovery (node queries, cohort builds)", "discover_nodes", "strategies/discovery.py"),
    ("public map: scale choice", "choose_map_scale", "fl/maps/public_start.py"),
    ("public map: all of M1", "supervised_start", "fl/maps/public_start.py"),
    ("round trips (all types)", "send_and_receive", ""),
    ("server training (train_epochs)", "train_epochs", "fl/maps/pipeline.py"),
    ("server aggregate_train", "aggregate_train", "strategies/local/accounting.py"),
    ("server aggregate_evaluate", "aggregate_evaluate", "strategies/local/accounting.py"),
    ("checkpoints", "save_checkpoint", "strategies/checkpoint.py"),
    ("plot", "plot", "fl/reporting/results.py"),
)


def cumulative(stats: pstats.Stats, name: str, suffix: str) -> float:
    """Cumulative seconds of the outermost calls of function ``name`` (in a file ending in ``suffix``)."""
    total = 0.0
    for (path, _, function), (_, _, _, cum, callers) in stats.stats.items():  # type: ignore[attr-defined]
        if function != name or not path.endswith(suffix):
            continue
        recursive = any(c[2] == name and c[0].endswith(suffix) for c in callers)
        if not recursive:
            total += cum
    return round(total, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="simulations/experiments/sst2_class_rr_4000.toml")
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    started = time.perf_counter()
    out_file = Path(args.out).resolve() if args.out else None  # before the chdir below
    repo = Path(args.repo).resolve()
    os.chdir(repo)
    sys.path.insert(0, str(repo))
    import strategies.server_app as server_app
    from simulations import cli

    profile = cProfile.Profile()
    server_seconds = 0.0
    original = server_app.run_server

    def profiled(*a: Any, **k: Any) -> Any:
        nonlocal server_seconds
        t0 = time.perf_counter()
        profile.enable()
        try:
            return original(*a, **k)
        finally:
            profile.disable()
            server_seconds = time.perf_counter() - t0

    server_app.run_server = profiled
    with tempfile.TemporaryDirectory() as out:
        argv = ["run", args.config, "--out", out]
        for item in args.sets:
            argv += ["--set", item]
        code = cli.main(argv)
        summary = json.loads(next(Path(out).glob("*/summary.json")).read_text()) if code == 0 else {}
    wall = time.perf_counter() - started
    stats = pstats.Stats(profile)
    result = {
        "benchmark": "sanitas run with the ServerApp profiled (cProfile, cumulative seconds)",
        "repo": str(repo),
        "config": args.config,
        "sets": args.sets,
        "returncode": code,
        "accuracy": (summary.get("final") or {}).get("accuracy"),
        "wall_seconds": round(wall, 2),
        "server_seconds": round(server_seconds, 2),
        "outside_server_seconds": round(wall - server_seconds, 2),
        "server_functions": {label: cumulative(stats, name, suffix) for label, name, suffix in FUNCTIONS},
        "note": "cProfile slows Python-heavy code; compare the shares, and the wall clock of unprofiled runs",
        "load_average_at_end": [round(v, 2) for v in os.getloadavg()],
    }
    text = json.dumps(result, indent=1)
    print(text)
    if out_file is not None:
        out_file.write_text(text + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
