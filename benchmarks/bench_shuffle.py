"""Time of the shuffling amplification bound for large n (JSON).

Usage: python benchmarks/bench_shuffle.py [--n 67349,1000000,10000000] [--epsilon0 1,4]
       [--delta 1e-6] [--repeats 5] [--budget SECONDS] [--out FILE]

For each n in --n and each epsilon0 in --epsilon0 it times
``fl.accounting.analysis.shuffle.shuffle_bound(epsilon0, n, delta)`` (what
``shuffle_amplification`` and the per-round accounting call: the numerical
clones bound and, where valid, the closed form): one warm-up call, then the
median of --repeats calls. It reports the bound too (epsilon, method), so a
timing is never read without the answer it took.

The defaults include n = 1e7, epsilon0 = 1, delta = 1e-6: the case the unit test
tests/fl/accounting/analysis/test_shuffle.py::test_large_n checks for correctness only (it used to
assert that it took under 15 s; it takes ~0.1 s on a laptop). With --budget S,
the script exits with status 1 when a median exceeds S seconds, for a CI job
that owns a quiet machine.

Timings are wall-clock, so other work on the machine skews them; the load
average is recorded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmark this checkout

from _common import emit, run_header  # noqa: E402  (benchmarks/ is sys.path[0])
from fl.accounting.analysis.shuffle import shuffle_bound  # noqa: E402


def time_bound(epsilon0: float, n: int, delta: float, repeats: int) -> dict:
    """Median wall seconds of shuffle_bound after one warm-up call, with the bound it returns."""
    bound = shuffle_bound(epsilon0, n, delta)
    seconds = []
    for _ in range(max(repeats, 1)):
        start = time.perf_counter()
        shuffle_bound(epsilon0, n, delta)
        seconds.append(time.perf_counter() - start)
    return {
        "n": n,
        "epsilon0": epsilon0,
        "seconds": round(statistics.median(seconds), 5),
        "seconds_max": round(max(seconds), 5),
        "epsilon": bound.epsilon,
        "method": bound.method,
    }


def _numbers(text: str, kind: type) -> list:
    return [kind(float(s)) for s in text.split(",") if s.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="67349,1000000,10000000", help="comma-separated numbers of reports")
    parser.add_argument("--epsilon0", default="1,4", help="comma-separated local epsilons")
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per figure (median)")
    parser.add_argument(
        "--budget",
        type=float,
        default=0.0,
        help="exit with status 1 when a median exceeds this many seconds (0: no budget)",
    )
    parser.add_argument("--out", default="", help="also write the JSON to this file")
    args = parser.parse_args()
    ns, epsilon0s = _numbers(args.n, int), _numbers(args.epsilon0, float)

    result = {
        **run_header(),
        "function": "fl.accounting.analysis.shuffle.shuffle_bound",
        "delta": args.delta,
        "repeats": args.repeats,
        "budget_seconds": args.budget or None,
        "cases": [time_bound(e, n, args.delta, args.repeats) for e in epsilon0s for n in ns],
    }
    over = [c for c in result["cases"] if args.budget and c["seconds"] > args.budget]
    result["over_budget"] = [{"n": c["n"], "epsilon0": c["epsilon0"], "seconds": c["seconds"]} for c in over]
    emit(result, args.out)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
