"""The README's first run from nothing cached, end to end, and what its encoding gives (JSON).

Usage: python benchmarks/cold_quickstart.py [--repo DIR] [--keep-cache DIR] [--out FILE]
       python benchmarks/cold_quickstart.py --compare-caches BEFORE_CACHE AFTER_CACHE [--out FILE]

Run mode: ``sanitas run simulations/experiments/quickstart.toml`` of the checkout ``--repo`` (default: this one)
in a fresh process with an empty embedding cache (``SANITAS_CACHE_DIR``) and an empty Hugging Face cache
(``HF_HOME``), both in a new temporary folder (kept as ``--keep-cache`` when given); reports the wall time, the
CPU use, the run's own phases and its final accuracy. Needs ``SANITAS_DATA_DIR``.

Compare mode: the embeddings two cache folders (``SANITAS_CACHE_DIR``; run mode's is ``<cache>/sanitas``)
hold for every SST-2 text the quickstart encodes (its training and dev splits), read through the cache's
checks: the largest absolute difference per coordinate and the smallest cosine between the two copies of a
text (the encoder tests hold 2e-5). The accuracy of each cache's runs is compared by
``benchmarks/seed_equivalence.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(1, str(REPO))

from _common import emit, run_header  # noqa: E402

QUICKSTART = "simulations/experiments/quickstart.toml"


def cold_run(repo: Path, cache: Path) -> dict[str, Any]:
    """One cold ``sanitas run`` of the quickstart with ``cache`` as its (empty) caches."""
    out = cache / "results"
    env = {**os.environ, "SANITAS_CACHE_DIR": str(cache / "sanitas"), "HF_HOME": str(cache / "hf")}
    env["PYTHONPATH"] = str(repo)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "simulations.cli", "run", QUICKSTART, "--out", str(out)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"the cold run failed: {done.stderr[-2000:]}")
    (summary_path,) = out.glob("*/summary.json")
    summary = json.loads(summary_path.read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "cores_busy": round(cpu / wall, 2),
        "run_wall_seconds": summary.get("wall_seconds"),
        "final_accuracy": summary["final"]["accuracy"],
        "encoding_line": next((line for line in done.stdout.splitlines() if "encoding" in line), None),
    }


def compare_caches(before: Path, after: Path) -> dict[str, Any]:
    """The embeddings two cache folders (``SANITAS_CACHE_DIR``s) hold for every quickstart text (through the
    checked cache reads)."""
    import numpy as np

    from fl import config
    from fl.data import datasets
    from fl.encoding.embedding_cache import EmbeddingCache
    from fl.encoding.encoder import model_id
    from fl.encoding.prefill import texts_to_encode

    cfg = config.as_run_config(config.resolve(config.load_toml(REPO / QUICKSTART)))
    ds = datasets.load(cfg.data, cfg.users, cfg.release.level)
    texts = texts_to_encode(ds)
    tables = []
    for root in (before, after):
        _, found = EmbeddingCache(Path(root), model_id(cfg.encoder.encoder)).lookup(texts)
        if any(v is None for v in found):
            raise SystemExit(f"{root} does not hold every quickstart text")
        tables.append(np.stack(found).astype(np.float64))
    a, b = tables
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {
        "texts": len(texts),
        "max_abs_difference": float(np.abs(a - b).max()),
        "texts_bit_identical": int((a == b).all(axis=1).sum()),
        "min_cosine": float(cos.min()),
        "tolerance_of_the_encoder_tests": 2e-5,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(REPO))
    parser.add_argument("--keep-cache", default="")
    parser.add_argument("--compare-caches", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if not os.environ.get("SANITAS_DATA_DIR"):
        raise SystemExit("set SANITAS_DATA_DIR (the offline datasets, e.g. ../shared/data)")
    result = run_header()
    if args.compare_caches:
        result["compare_caches"] = compare_caches(*map(Path, args.compare_caches))
    else:
        cache = Path(args.keep_cache) if args.keep_cache else Path(tempfile.mkdtemp(prefix="sanitas-cold-"))
        if cache.exists() and any(cache.iterdir()):
            raise SystemExit(f"{cache} is not empty: a cold run needs empty caches")
        cache.mkdir(parents=True, exist_ok=True)
        result.update(
            {"repo": str(args.repo), "cache": str(cache), "cold_quickstart": cold_run(Path(args.repo), cache)}
        )
    emit(result, args.out)


if __name__ == "__main__":
    main()
