"""What a user waits for before any work: ``sanitas --help``, a refusal, and the warm quickstart's start-up (JSON).

Usage: python benchmarks/bench_startup.py [--repeats 5] [--skip-quickstart] [--out FILE]

Each case is a fresh process of this checkout (``python -m simulations.cli``, as the ``sanitas`` script runs
it), run ``--repeats`` times; the median and the spread are reported:

* ``help``: ``sanitas --help`` (target: <= 1 s);
* ``refusal``: ``sanitas run`` of a config with a bad value, refused in one line (exit 2; target: <= 5 s);
* ``quickstart``: ``sanitas run simulations/experiments/quickstart.toml`` with the embeddings cached (run it
  once first), end to end, with the run's own phases from ``summary.json`` (``interpreter and imports`` and
  ``launcher``: the start-up, target <= 2.5 s; the whole run, target <= 6 s).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _common import emit  # noqa: E402  (benchmarks/ is sys.path[0])

CLI = [sys.executable, "-m", "simulations.cli"]
START_UP = ("interpreter and imports", "launcher (imports, config and data checks)")


def _timed(cmd: list[str], expect: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != expect:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}, not {expect}: {done.stderr[-300:]}")
    return seconds


def _summary(walls: list[float]) -> dict[str, Any]:
    return {"median_seconds": round(statistics.median(walls), 3), "walls": [round(w, 3) for w in walls]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-quickstart", action="store_true")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    from _common import run_header

    result: dict[str, Any] = {"benchmark": "startup", **run_header()}
    result["help"] = _summary([_timed([*CLI, "--help"], 0) for _ in range(args.repeats)])
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "bad.toml"
        bad.write_text('dataset = "sst2"\nnoise-seed = -7\n')
        refusal = [_timed([*CLI, "run", str(bad), "--out", tmp], 2) for _ in range(args.repeats)]
        result["refusal"] = _summary(refusal)
        if not args.skip_quickstart:
            walls, phases = [], []
            for i in range(args.repeats):
                out = Path(tmp) / f"q{i}"
                walls.append(_timed([*CLI, "run", "simulations/experiments/quickstart.toml", "--out", str(out)], 0))
                summary = json.loads(next(out.glob("*/summary.json")).read_text())
                phases.append(summary["timings"]["phases"])
            result["quickstart"] = _summary(walls)
            keys = sorted({k for p in phases for k in p})
            result["quickstart"]["phases_median"] = {
                k: round(statistics.median(p.get(k, 0.0) for p in phases), 3) for k in keys
            }
            result["quickstart"]["start_up_median"] = round(
                statistics.median(sum(p.get(k, 0.0) for k in START_UP) for p in phases), 3
            )
    emit(result, args.out)


if __name__ == "__main__":
    main()
