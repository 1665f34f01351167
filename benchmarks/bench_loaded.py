"""A run on an idle machine against the same run with another process busy on each core (JSON).

Usage: python benchmarks/bench_loaded.py [--repo CHECKOUT] [--config CONFIG] [--set KEY=VALUE ...]
       [--repeats N] [--busy K] [--omp-threads T] [--out FILE]

Defaults: the quickstart (its tuned encoder and embeddings must be cached: a warm-up run, not timed, fills
them), ``--busy`` = the machine's cores. Times ``sanitas run`` (a fresh process of checkout ``--repo``;
an older commit's worktree measures "before") ``--repeats`` times idle, then as often with ``--busy``
processes each spinning a core in pure Python (what "another process busy on each core" means here),
and reports each wall, the medians, their ratio (the target: loaded <= 2x idle), each run's accuracy and
its phase timings from ``summary.json``. ``--omp-threads`` sets ``OMP_NUM_THREADS`` for the runs (the
user's workaround; left unset by default, as a user runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, run_header  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SPIN = "while True:\n    pass\n"


def _run(repo: Path, argv: list[str], out: Path, env: dict[str, str], timeout: float) -> dict[str, Any]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "simulations.cli", "run", *argv, "--out", str(out)],
        cwd=repo, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    wall = round(time.perf_counter() - started, 2)
    record: dict[str, Any] = {"wall_seconds": wall, "returncode": proc.returncode}
    summaries = sorted(out.glob("*/summary.json"))
    if proc.returncode != 0 or not summaries:
        record["stderr"] = proc.stderr[-2000:]
        return record
    summary = json.loads(summaries[-1].read_text())
    record["accuracy"] = summary["final"]["accuracy"]
    record["phases"] = (summary.get("timings") or {}).get("phases")  # seconds per phase of the run
    return record


def _series(repo: Path, argv: list[str], tmp: Path, tag: str, env: dict[str, str], args: Any) -> dict[str, Any]:
    runs = []
    for i in range(args.repeats):
        record = _run(repo, argv, tmp / f"{tag}-{i}", env, args.timeout)
        print(f"{tag} {i}: {record['wall_seconds']} s", file=sys.stderr, flush=True)
        runs.append(record)
    walls = [r["wall_seconds"] for r in runs if r["returncode"] == 0]
    return {"runs": runs, "median_wall_seconds": statistics.median(walls) if walls else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(REPO))
    parser.add_argument("--config", default="simulations/experiments/sst2_class_rr_4000.toml")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 1, help="busy processes (default: one per core)")
    parser.add_argument("--omp-threads", default="", help="OMP_NUM_THREADS for the runs (default: unset)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if not os.environ.get("SANITAS_DATA_DIR"):
        print("set SANITAS_DATA_DIR to the offline data folder (../shared/data)", file=sys.stderr)
        return 2
    repo = Path(args.repo).resolve()
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["PYTHONPATH"] = str(repo)
    if args.omp_threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = args.omp_threads
    argv = [args.config, *[a for s in args.sets for a in ("--set", s)]]
    result: dict[str, Any] = {**run_header(), "benchmark": "idle vs loaded machine", "config": args.config}
    result.update({"sets": args.sets, "busy_processes": args.busy, "omp_num_threads": args.omp_threads or None})
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        _run(repo, argv, tmp / "warm-up", env, args.timeout)  # fills the caches; not timed
        result["idle"] = _series(repo, argv, tmp, "idle", env, args)
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)]
        try:
            time.sleep(1.0)  # the spinners are running before the first loaded run starts
            result["load_average_when_loaded"] = [round(v, 2) for v in os.getloadavg()]
            result["loaded"] = _series(repo, argv, tmp, "loaded", env, args)
        finally:
            for p in spinners:
                p.kill()
                p.wait()
    idle, loaded = result["idle"]["median_wall_seconds"], result["loaded"]["median_wall_seconds"]
    result["loaded_over_idle"] = round(loaded / idle, 2) if idle and loaded else None
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    emit({**result, "repo_commit": commit}, args.out)
    return 0 if result["loaded_over_idle"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
