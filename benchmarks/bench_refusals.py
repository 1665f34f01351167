"""How fast and how cleanly bad input is refused, as a user meets it: each case a fresh ``sanitas`` process.

    SANITAS_DATA_DIR=../shared/data python benchmarks/bench_refusals.py [--repeats 3] [--out refusals.json]

The cases are the ones the bad-input review found slow or unclear (the cohorts' keys, compare's ``--set`` and
``--central-set``, tune's ``--recipes``, TOML files with a repeated key or a byte-order mark, a read-only
``--out``) and a few of each command's flags. For each: the exit code (2 expected), the lines on stderr (one
expected, at most 200 characters), whether anything was left in the output folder (nothing expected) and the
wall seconds of the whole process, median over ``--repeats`` (target: at most 3 s on 2 cores). A read-only folder
is made with ``chattr +i`` (root can write through ``chmod``); the case is skipped where chattr is refused.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, run_header

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "simulations" / "experiments"
COHORTS = str(EXPERIMENTS / "sst2_public_cohorts.toml")
QUICKSTART = str(EXPERIMENTS / "quickstart.toml")
CENTRAL = ["--set", 'mode="central"', "--set", 'map-in="random"']


def cases(folder: Path) -> dict[str, list[str]]:
    """Each case's ``sanitas`` arguments (``OUT`` stands for the case's output folder)."""
    (folder / "twice.toml").write_text('dataset = "sst2"\npublic-size = 200\ndataset = "sst2"\n')
    (folder / "bom.toml").write_bytes(b'\xef\xbb\xbfdataset = "sst2"\nbogus-key = 1\n')
    return {
        "run --set cohort-map-dim=512": ["run", COHORTS, "--set", "cohort-map-dim=512", "--out", "OUT"],
        "compare --set central-noise-multiplier=2.0": [
            "compare", COHORTS, "--set", "central-noise-multiplier=2.0", "--out", "OUT"
        ],
        "compare --central-set cohorts=2": ["compare", COHORTS, "--central-set", "cohorts=2", "--out", "OUT"],
        "tune cohorts config, default --recipes": ["tune", COHORTS, "--epsilons", "6.28", "--out", "OUT"],
        "run TOML key given twice": ["run", str(folder / "twice.toml"), "--out", "OUT"],
        "run TOML with a byte-order mark (and an unknown key)": ["run", str(folder / "bom.toml"), "--out", "OUT"],
        "run read-only --out": ["run", QUICKSTART, "--out", "READONLY/x"],
        "compare --set sentence-mechanism=privnit": [
            "compare", COHORTS, "--set", "sentence-mechanism=privnit", "--out", "OUT"
        ],
        "compare --label-share auto without public data": [
            "compare", QUICKSTART, "--set", "public-size=0", "--set", 'map-in="random"', "--out", "OUT"
        ],
        "sweep --grid sentence-epsilon=1,x": ["sweep", QUICKSTART, "--grid", "sentence-epsilon=1,x", "--out", "OUT"],
        "run --set cohorts=3": ["run", COHORTS, "--set", "cohorts=3", "--out", "OUT"],
        "run --set public-split=bogus": ["run", QUICKSTART, "--set", "public-split=bogus", "--out", "OUT"],
        # strategies (strategies.loading.check_strategy): a non-mean one in central mode, a DP wrapper, bad options
        **{
            f"strategy central {name}": ["run", QUICKSTART, *CENTRAL, "--set", f'strategy="{name}"', "--out", "OUT"]
            for name in ("FedMedian", "FedTrimmedAvg", "Krum", "MultiKrum", "Bulyan", "QFedAvg")
        },
        "strategy DifferentialPrivacyServerSideFixedClipping": [
            "run", QUICKSTART, "--set", 'strategy="DifferentialPrivacyServerSideFixedClipping"', "--out", "OUT"
        ],
        "strategy-options unknown name": [
            "run", QUICKSTART, "--set", 'strategy="FedAdam"', "--set", 'strategy-options="etta = 1"', "--out", "OUT"
        ],
        "strategy on nodes with class-means": ["run", QUICKSTART, "--set", 'strategy="FedAvg"', "--out", "OUT"],
        "compare --set strategy=FedMedian": [
            "compare", QUICKSTART, "--set", 'strategy="FedMedian"', "--set", 'server-model="mlp"', "--out", "OUT"
        ],
    }  # fmt: skip


def _read_only(folder: Path) -> Path | None:
    """An immutable folder (``chattr +i``), or None where that is refused."""
    target = folder / "read-only"
    target.mkdir()
    done = subprocess.run(["chattr", "+i", str(target)], capture_output=True)
    return target if done.returncode == 0 else None


def measure(args: list[str], out: Path) -> dict[str, Any]:
    """One fresh ``sanitas`` process: exit code, stderr lines, what it left, wall seconds."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "simulations.cli", *args], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    left = sorted(str(p.relative_to(out.parent)) for p in out.rglob("*")) if out.exists() else []
    return {
        "exit_code": done.returncode,
        "stderr_lines": len(lines),
        "message": lines[-1] if lines else "",
        "longest_line": max((len(line) for line in lines), default=0),
        "left_behind": left + ([out.name] if out.exists() and not left else []),
        "seconds": round(seconds, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="")
    parser.add_argument("--only", default="", help="only the cases whose name contains this text")
    options = parser.parse_args()
    os.environ.setdefault("SANITAS_DATA_DIR", str(REPO.parent / "shared" / "data"))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        read_only = _read_only(folder)
        try:
            for name, args in cases(folder).items():
                if options.only not in name:
                    continue
                if "READONLY/x" in args and read_only is None:
                    results[name] = {"skipped": "chattr +i refused here"}
                    continue
                runs = []
                for _ in range(options.repeats):
                    out = folder / "out"
                    shutil.rmtree(out, ignore_errors=True)
                    argv = [a.replace("OUT", str(out)).replace("READONLY", str(read_only)) for a in args]
                    runs.append(measure(argv, out))
                first = runs[0]
                results[name] = {
                    **{k: v for k, v in first.items() if k != "seconds"},
                    "seconds_median": round(statistics.median(r["seconds"] for r in runs), 3),
                    "seconds": [r["seconds"] for r in runs],
                    "one_line_exit_2_nothing_left": first["exit_code"] == 2
                    and first["stderr_lines"] == 1
                    and first["longest_line"] <= 200
                    and not first["left_behind"],
                }
                print(f"{results[name]['seconds_median']:6.2f} s  {name}: {first['message'][:110]}", file=sys.stderr)
        finally:
            if read_only is not None:
                subprocess.run(["chattr", "-i", str(read_only)], capture_output=True)
    timed = [r for r in results.values() if "seconds_median" in r]
    emit(
        {
            **run_header(),
            "repeats": options.repeats,
            "cases": results,
            "all_one_line_exit_2_nothing_left": all(r["one_line_exit_2_nothing_left"] for r in timed),
            "slowest_seconds": max(r["seconds_median"] for r in timed),
            "target_seconds": 3.0,
        },
        options.out,
    )


if __name__ == "__main__":
    main()
