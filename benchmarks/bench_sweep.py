"""A sweep against one of its runs: wall seconds of ``sanitas sweep`` and of ``sanitas run`` (JSON).

Usage: python benchmarks/bench_sweep.py [--repo CHECKOUT] [--config CONFIG] [--set KEY=VALUE ...]
       [--grid KEY=V1,V2,...] [--seeds 1,2,3] [--out FILE]

Defaults: the quickstart recipe on full SST-2 (``train-size = 0``) and a 5-point epsilon sweep of its
sentence epsilon. Runs, in fresh processes of checkout ``--repo`` (default: this one; a git worktree
of an older commit measures "before"): one ``sanitas run`` at the first grid value (after a
warm-up run that fills the caches, not timed), then the whole ``sanitas sweep``. Reports both walls,
their ratio (the issue's target: <= 2), each point's accuracy, and, from the runs' summaries, the
wire bytes and whether the points shared a federation. Embeddings and public work must be cached
(the warm-up run does it for the first point; the others share its encoder).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, run_header  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _sanitas(repo: Path, argv: list[str], timeout: float) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "simulations.cli", *argv], cwd=repo, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    return round(time.perf_counter() - started, 2), proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(REPO))
    parser.add_argument("--config", default="simulations/experiments/sst2_class_rr_4000.toml")
    parser.add_argument("--set", dest="sets", action="append", default=None, metavar="KEY=VALUE")
    parser.add_argument("--grid", default="sentence-epsilon=2.826,4.239,5.652,8.478,11.304")
    parser.add_argument("--seeds", default="", help="a seeded sweep (--seeds of sanitas sweep)")
    parser.add_argument("--skip-single", action="store_true", help="time the sweep only")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if not os.environ.get("SANITAS_DATA_DIR"):
        print("set SANITAS_DATA_DIR to the offline data folder (../shared/data)", file=sys.stderr)
        return 2
    repo = Path(args.repo)
    sets = args.sets if args.sets is not None else ["train-size=0"]
    key, _, values = args.grid.partition("=")
    first = values.split(",")[0]
    result: dict[str, Any] = {**run_header(), "benchmark": "sweep vs one of its runs", "config": args.config}
    result.update({"sets": sets, "grid": args.grid, "seeds": args.seeds})
    set_args = [a for s in sets for a in ("--set", s)]
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_single:
            single = [*set_args, "--set", f"{key}={first}"]
            _sanitas(repo, ["run", args.config, *single, "--out", f"{tmp}/warm"], args.timeout)  # fills the caches
            wall, proc = _sanitas(repo, ["run", args.config, *single, "--out", f"{tmp}/single"], args.timeout)
            if proc.returncode != 0:
                result["single_error"] = proc.stderr[-2000:]
            else:
                summary = json.loads(next(Path(tmp, "single").glob("*/summary.json")).read_text())
                result["single"] = {"wall_seconds": wall, "accuracy": summary["final"]["accuracy"]}
            print(f"single run: {wall} s", file=sys.stderr, flush=True)
        command = ["sweep", args.config, *set_args, "--grid", args.grid, "--out", f"{tmp}/sweep", "--name", "s"]
        if args.seeds:
            command += ["--seeds", args.seeds]
        wall, proc = _sanitas(repo, command, args.timeout)
        print(f"sweep: {wall} s", file=sys.stderr, flush=True)
        points = []
        for summary_path in sorted(Path(tmp, "sweep", "s").glob("*/summary.json")):
            summary = json.loads(summary_path.read_text())
            timings = summary.get("timings") or {}
            points.append(
                {
                    "run": summary_path.parent.name,
                    "accuracy": summary["final"]["accuracy"],
                    "shared_by_points": timings.get("shared_by_points"),
                    "wire_bytes_sent": (timings.get("wire") or {}).get("bytes_sent"),
                }
            )
        result["sweep"] = {"wall_seconds": wall, "returncode": proc.returncode, "points": points}
        if proc.returncode != 0:
            result["sweep"]["stderr"] = proc.stderr[-2000:]
    if "single" in result:
        result["sweep_over_single"] = round(result["sweep"]["wall_seconds"] / result["single"]["wall_seconds"], 2)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    emit({**result, "repo_commit": commit}, args.out)
    return 0 if result["sweep"]["returncode"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
