"""Throughput of every sentence-level mechanism against torch.randn (JSON).

Usage: python benchmarks/bench_mechanisms.py [--sizes 16,384,768] [--n 100000]
       [--epsilon 10] [--repeats 5] [--threads T] [--mechanisms a,b] [--out FILE]

For each registered mechanism whose class level is "sentence" ("none" is
skipped: its level is set per instance, and ``torch.randn`` is the reference
anyway), each m in --sizes and each device (CPU, and CUDA when available), it
times ``sanitize`` on an [n, m] float32 batch: one warm-up call, then the
median of --repeats calls. Each figure is given as samples (rows) per second
and as a ratio to ``torch.randn(n, m)`` on the same device, timed alternately
with that mechanism's calls so that both see the same machine ("x_randn": 3.0
means three times as slow as randn; the "randn" entry is the median of all
those reference calls). On CUDA the generator lives on the device and timings
are bracketed by ``torch.cuda.synchronize()``.

It also times the Purkayastha tables a new (m, epsilon) pair has to build:
``purarc_table`` (the inverse-CDF table) and ``purarc_guide`` (the index of
the CPU search), with their lru caches cleared before each build.

``--mechanisms`` restricts the run to some of them (default: all). The
mechanisms are constructed with ``mechanisms.create(name, epsilon=...)``
only; one that needs other parameters, or fails, is reported with its error.
The output width is recorded, since a mechanism may change the dimension.

Timings are wall-clock, so other work on the machine skews them; the load
average is recorded. On an oversubscribed machine, multi-threaded torch ops
stall at every OpenMP barrier; --threads 1 gives steadier figures there.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmark this checkout

import torch  # noqa: E402

import mechanisms  # noqa: E402
from _common import device_name, emit, mechanisms_at_level, run_header  # noqa: E402  (benchmarks/ is sys.path[0])
from mechanisms import purkayastha  # noqa: E402


def time_pair(
    fn: Callable[[], object], reference: Callable[[], object], repeats: int, device: torch.device
) -> tuple[float, list[float]]:
    """Median wall seconds of ``fn``, and the wall seconds of ``reference`` timed
    alternately with it (so that both see the same machine), after one warm-up call each."""

    def timed(call: Callable[[], object]) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        call()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    timed(fn)
    timed(reference)
    seconds, reference_seconds = [], []
    for _ in range(repeats):
        reference_seconds.append(timed(reference))
        seconds.append(timed(fn))
    return statistics.median(seconds), reference_seconds


def bench_device(
    device: torch.device, names: list[str], sizes: list[int], n: int, epsilon: float, repeats: int
) -> dict:
    gen = torch.Generator(device=device).manual_seed(0)
    out: dict = {"device": device_name(device), "sizes": {}}
    for m in sizes:
        x = torch.randn(n, m, generator=gen, device=device)

        def randn() -> torch.Tensor:
            return torch.randn(n, m, generator=gen, device=device)

        row: dict = {}
        all_randn: list[float] = []
        for name in names:
            try:
                mech = mechanisms.create(name, epsilon=epsilon)
                width = mech.sanitize(x[:2], generator=gen).shape[1]
                seconds, randn_times = time_pair(lambda: mech.sanitize(x, generator=gen), randn, repeats, device)
            except Exception as err:  # report and go on: one broken mechanism must not hide the rest
                row[name] = {"error": f"{type(err).__name__}: {err}"}
                continue
            all_randn += randn_times
            row[name] = {
                "seconds": round(seconds, 5),
                "samples_per_second": round(n / seconds),
                "x_randn": round(seconds / statistics.median(randn_times), 2),
                "out_dim": width,
            }
        if not all_randn:
            _, all_randn = time_pair(randn, randn, repeats, device)
        randn_s = statistics.median(all_randn)
        reference = {"seconds": round(randn_s, 5), "samples_per_second": round(n / randn_s)}
        out["sizes"][str(m)] = {"randn": reference, **row}
    return out


def bench_purkayastha_tables(sizes: list[int], epsilon: float, repeats: int) -> dict:
    """Milliseconds to build the tables of a new (m, epsilon), caches cleared (median of repeats)."""
    out = {}
    for m in sizes:
        table_ms, guide_ms = [], []
        for _ in range(max(repeats, 1)):
            purkayastha.purarc_table.cache_clear()
            purkayastha.purarc_guide.cache_clear()
            start = time.perf_counter()
            purkayastha.purarc_table(m, epsilon)
            middle = time.perf_counter()
            purkayastha.purarc_guide(m, epsilon)
            end = time.perf_counter()
            table_ms.append((middle - start) * 1e3)
            guide_ms.append((end - middle) * 1e3)
        table, guide = statistics.median(table_ms), statistics.median(guide_ms)
        out[str(m)] = {
            "purarc_table_ms": round(table, 2),
            "purarc_guide_ms": round(guide, 2),
            "total_ms": round(table + guide, 2),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,384,768", help="comma-separated input dimensions m")
    parser.add_argument("--n", type=int, default=100_000, help="rows per call")
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per figure (median)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--mechanisms", default="", help="comma-separated names to time (default: every sentence one)")
    parser.add_argument("--out", default="", help="also write the JSON to this file")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    names = mechanisms_at_level("sentence")
    if args.mechanisms:
        wanted = [name.strip() for name in args.mechanisms.split(",") if name.strip()]
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            parser.error(f"not sentence mechanisms: {', '.join(unknown)} (choose from {', '.join(names)})")
        names = [name for name in names if name in wanted]
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    result = {
        **run_header(),
        "n": args.n,
        "epsilon": args.epsilon,
        "repeats": args.repeats,
        "input": "float32 torch.randn rows",
        "mechanisms": names,
        "skipped": [name for name in mechanisms.names() if name == "none"],
        "devices": {d.type: bench_device(d, names, sizes, args.n, args.epsilon, args.repeats) for d in devices},
        "purkayastha_table_build": bench_purkayastha_tables(sizes, args.epsilon, args.repeats),
    }
    emit(result, args.out)


if __name__ == "__main__":
    main()
