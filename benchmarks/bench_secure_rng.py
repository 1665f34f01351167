"""What ``secure-rng = true`` costs: the mechanisms' draws and the warm quickstart, against the default (JSON).

Usage: python benchmarks/bench_secure_rng.py [--repeats 3] [--rows 100000] [--skip-run] [--out FILE]

* ``samplers``: seconds for ``--rows`` releases of each sentence and label mechanism at m = 64 (the
  quickstart's release width), from torch's generator and from the ChaCha20 keystream
  (:class:`mechanisms.keystream.SecureGenerator`), best of ``--repeats``; and the raw draws
  (uniforms, normals) per 10^6 numbers.
* ``quickstart``: ``sanitas run simulations/experiments/quickstart.toml`` end to end (a fresh process,
  embeddings cached: run it once first), default and ``--set secure-rng=true`` alternately, ``--repeats``
  times each; the median wall seconds and their ratio (target: within 1.2x).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import mechanisms  # noqa: E402
from _common import emit, run_header  # noqa: E402  (benchmarks/ is sys.path[0])
from mechanisms import random_source as rs  # noqa: E402
from mechanisms.keystream import SecureGenerator  # noqa: E402

DIM = 64
SENTENCE = {
    "purkayastha": {"epsilon": 6.28},
    "planar_laplace": {"epsilon": 6.28},
    "privunit": {"epsilon": 6.28},
    "laplace": {"epsilon": 6.28},
    "gaussian": {"epsilon": 6.28},
    "privemb": {"epsilon": 6.28},
}
LABEL = {"rr": {"epsilon": 1.0}, "rr_prior": {"epsilon": 1.0}}


def _best(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def samplers(rows: int, repeats: int) -> dict[str, Any]:
    """Best-of-``repeats`` seconds per mechanism and generator."""
    x = torch.randn(rows, DIM, generator=torch.Generator().manual_seed(0))
    x = x / x.norm(dim=1, keepdim=True)
    y = torch.randint(0, 2, (rows,), generator=torch.Generator().manual_seed(0))
    out: dict[str, Any] = {}
    gens = {"torch": lambda: torch.Generator().manual_seed(1), "chacha20": SecureGenerator}
    for name, params in {**SENTENCE, **LABEL}.items():
        mech = mechanisms.create(name, **params)
        row: dict[str, float] = {}
        for kind, make in gens.items():
            if name in LABEL:
                row[kind] = _best(lambda: mech.sanitize(y, num_classes=2, generator=make()), repeats)  # noqa: B023
            else:
                row[kind] = _best(lambda: mech.sanitize(x, generator=make()), repeats)  # noqa: B023
        row["ratio"] = row["chacha20"] / row["torch"]
        out[name] = {k: round(v, 4) for k, v in row.items()}
    for what, draw in {"uniform": rs.rand, "normal": rs.randn}.items():
        row = {kind: _best(lambda: draw(10**6, make()), repeats) for kind, make in gens.items()}  # noqa: B023
        row["ratio"] = row["chacha20"] / row["torch"]
        out[f"{what} x 1e6"] = {k: round(v, 4) for k, v in row.items()}
    return out


def quickstart(repeats: int) -> dict[str, Any]:
    """Median wall seconds of the warm quickstart, default and secure-rng, run alternately."""
    walls: dict[str, list[float]] = {"default": [], "secure-rng": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            for kind, extra in (("default", []), ("secure-rng", ["--set", "secure-rng=true"])):
                cmd = ["sanitas", "run", "simulations/experiments/quickstart.toml", "--out", tmp, *extra]
                start = time.perf_counter()
                subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
                walls[kind].append(round(time.perf_counter() - start, 2))
    med = {k: statistics.median(v) for k, v in walls.items()}
    return {
        "walls": walls,
        "median_seconds": med,
        "ratio": round(med["secure-rng"] / med["default"], 3),
        "target_ratio": 1.2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--skip-run", action="store_true", help="the samplers only")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    result: dict[str, Any] = {"benchmark": "secure_rng", **run_header(), "rows": args.rows, "dim": DIM}
    result["samplers"] = samplers(args.rows, args.repeats)
    if not args.skip_run:
        result["quickstart"] = quickstart(args.repeats)
    emit(result, args.out)


if __name__ == "__main__":
    main()
