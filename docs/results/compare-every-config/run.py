"""``sanitas compare`` on every shipped config of simulations/experiments/, at small sizes: each runs to the end
with no ``--central-set``, or is refused in one line before any work.

    SANITAS_DATA_DIR=../shared/data python docs/results/compare-every-config/run.py [--out DIR] [--timeout 600]

Per config: one seed, one local and one central epsilon, ``train-size`` and ``test-size`` small (``--set``), the
config otherwise as shipped. Writes ``outcomes.csv`` (config, exit code, wall seconds, what happened: "ran" with
the results folder, or the refusal line with its length) into ``--out`` (default: results/compare-every-config,
outside the repository); ``--out docs/results/compare-every-config`` updates the committed table.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SMALL = ["--set", "train-size=800", "--set", "test-size=300"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/compare-every-config")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for config in sorted((REPO / "simulations" / "experiments").glob("*.toml")):
        cmd = [
            sys.executable, "-m", "simulations.cli", "compare", str(config.relative_to(REPO)),
            "--epsilons", "8", "--central-epsilons", "4",
            "--seeds", "1", *SMALL, "--out", str((out / "runs").resolve()), "--name", config.stem,
        ]  # fmt: skip
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.timeout)
            code, err = done.returncode, done.stderr
        except subprocess.TimeoutExpired:
            code, err = -1, f"timed out after {args.timeout:g} s"
        wall = time.perf_counter() - start
        errors = [line for line in err.splitlines() if line.startswith("sanitas: error")]
        if code == 0:
            what = "ran to the end"
        elif code == 2 and len(errors) == 1:
            what = f"refused ({len(errors[0])} characters): {errors[0]}"
        else:
            what = f"FAILED: {(errors or err.strip().splitlines() or ['?'])[-1][:300]}"
        rows.append({"config": config.name, "exit_code": code, "wall_seconds": round(wall, 1), "outcome": what})
        print(f"{config.name}: exit {code} in {wall:.0f} s: {what}", flush=True)
    with (out / "outcomes.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    failed = [r["config"] for r in rows if r["exit_code"] not in (0, 2)]
    print(f"wrote {out / 'outcomes.csv'}; {len(rows) - len(failed)} of {len(rows)} ran or were refused at once")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
