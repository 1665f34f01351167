"""A whole ``sanitas compare``, timed end to end, with where its time went (JSON).

Usage: python benchmarks/bench_compare.py [--config CONFIG] [--epsilons ...] [--central-epsilons ...]
       [--seeds 1,2,3] [--central-set KEY=VALUE ...] [--repo CHECKOUT] [--out FILE]

Defaults: the SST-2 200-public comparison of ``docs/results/federation-gain/run.sh`` (5 local and 5 central
epsilons, 30 central rounds) at 3 seeds. Runs the command in a fresh process of checkout ``--repo``
(default: this one) into a temporary folder, and reports its wall seconds and, from every run's
``summary.json``, the runs by kind (local points, central points, and the noise-free and public
reference runs) with their wall seconds and summed phases (``fl.reporting.timing``). The points of one
seed share a federation and the workers run side by side, so the sums overlap: they say where the work
went, the wall says what it cost.
Embeddings must be cached (a first ``sanitas run`` of the config does it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, run_header  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _kind(summary: dict[str, Any], folder: Path) -> str:
    """local / central, and whether the run is a reference (noise-free ceiling) rather than a point."""
    mode = str(summary.get("mode", "local"))
    if "ceiling" in folder.name or "noise-free" in folder.name or "reference" in folder.name:
        return f"{mode} reference"
    return mode


def phases_by_kind(root: Path) -> dict[str, Any]:
    """Every run's summary under ``root``, grouped by kind: count, wall seconds and summed phases."""
    kinds: dict[str, dict[str, Any]] = defaultdict(lambda: {"runs": 0, "wall_seconds": 0.0, "phases": {}, "wire": {}})
    for path in sorted(root.rglob("summary.json")):
        summary = json.loads(path.read_text())
        entry = kinds[_kind(summary, path.parent)]
        entry["runs"] += 1
        entry["wall_seconds"] += float(summary.get("wall_seconds") or 0.0)
        timings = summary.get("timings") or {}
        for name, seconds in (timings.get("phases") or {}).items():
            entry["phases"][name] = entry["phases"].get(name, 0.0) + float(seconds)
        for name, value in (timings.get("wire") or {}).items():
            if isinstance(value, int | float):
                entry["wire"][name] = entry["wire"].get(name, 0) + value
    for entry in kinds.values():
        entry["wall_seconds"] = round(entry["wall_seconds"], 2)
        entry["phases"] = {k: round(v, 2) for k, v in sorted(entry["phases"].items(), key=lambda kv: -kv[1])}
        entry["wire"] = {k: round(v, 3) if isinstance(v, float) else v for k, v in entry["wire"].items()}
    return dict(kinds)


def timed_compare(
    repo: Path,
    config: str,
    epsilons: str,
    central_epsilons: str,
    seeds: str,
    central_sets: list[str],
    sets: list[str],
    timeout: float,
) -> dict[str, Any]:
    """One ``sanitas compare`` of checkout ``repo`` in a fresh process: its wall seconds and its runs by
    kind (:func:`phases_by_kind`), or its error."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [
            sys.executable, "-m", "simulations.cli", "compare", config, "--epsilons", epsilons,
            "--central-epsilons", central_epsilons, "--seeds", seeds, "--out", tmp, "--name", "bench",
        ]  # fmt: skip
        argv += [a for item in central_sets for a in ("--central-set", item)]
        argv += [a for item in sets for a in ("--set", item)]
        env = {**os.environ, "PYTHONPATH": str(repo)}
        started = time.perf_counter()
        proc = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
        out: dict[str, Any] = {
            "command": " ".join(["sanitas", *argv[3:]]).replace(tmp, "OUT"),
            "wall_seconds": round(time.perf_counter() - started, 1),
        }
        if proc.returncode != 0:
            return {**out, "error": proc.stderr[-3000:]}
        kinds = phases_by_kind(Path(tmp))
    return {
        **out,
        "runs": sum(k["runs"] for k in kinds.values()),
        # Summed over runs: the points of one seed share a federation (strategies.points) and the
        # workers run side by side, so these sums overlap and exceed the wall.
        "by_kind_note": "wall_seconds and phases summed over the runs of a kind; shared federations and "
        "parallel workers overlap them",
        "by_kind": kinds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(REPO))
    parser.add_argument("--config", default="simulations/experiments/sst2_public.toml")
    parser.add_argument("--epsilons", default="1,2,3.14,6.28,12.6")
    parser.add_argument("--central-epsilons", default="0.5,1,2,4,8")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--central-set", action="append", default=None, metavar="KEY=VALUE")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--timeout", type=float, default=7200.0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if not os.environ.get("SANITAS_DATA_DIR"):
        print("set SANITAS_DATA_DIR to the offline data folder (../shared/data)", file=sys.stderr)
        return 2
    central_sets = args.central_set if args.central_set is not None else ["num-server-rounds=30"]
    report: dict[str, Any] = {**run_header(), "benchmark": "sanitas compare end to end, with its runs' phases"}
    result = timed_compare(
        Path(args.repo), args.config, args.epsilons, args.central_epsilons, args.seeds, central_sets, args.sets,
        args.timeout,
    )  # fmt: skip
    if "error" in result:
        print(result["error"], file=sys.stderr)
        return 1
    report.update({**result, "load_average_at_end": [round(v, 2) for v in os.getloadavg()]})
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
