"""The statistical check for a change that moves floats: three seeds of the runs it touches, before and
after, every accuracy within one seed standard deviation of before (JSON).

A faster path may change results in their last bits (a fused optimizer step, another reduction
order); the rounds-equality fingerprints (``rounds_equality.py``) then differ, and what must hold
instead is that the results are the same within seed noise. Per run below and seed s (``seed = s``,
``noise-seed = s``: the data split and the noise both change with s), one ``sanitas run`` of each
checkout; the check passes when, for every run and seed, ``|after_s - before_s| <= sd(before)``, the
sample standard deviation of before's accuracies over the seeds (a floor of one test example where
the three seeds agree exactly). Usage::

    python benchmarks/seed_equivalence.py --code /tmp/before --out before.json   # an older checkout's code
    python benchmarks/seed_equivalence.py --out after.json
    python benchmarks/seed_equivalence.py --compare before.json after.json --out check.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_run_phases import one_run  # noqa: E402

#: name -> (config, --set values): the quickstart (the class-means head), full SST-2 with the MLP
#: server model (the server step this check guards; the encoder untuned, since each seed's public
#: split would tune its own for minutes), a user-level central run (20 rounds) and the MLP on continuous releases.
RUNS: dict[str, tuple[str, list[str]]] = {
    "quickstart": ("simulations/experiments/quickstart.toml", []),
    "full-sst2-mlp": ("simulations/experiments/sst2_class_rr_4000.toml", ["train-size=0", 'encoder-tuning="none"']),
    "user-central": ("simulations/experiments/sst2_user_central.toml", ["num-server-rounds=20"]),
    # The MLP on continuous releases (Purkayastha, 4,000 sentences): class_rr's releases take two values,
    # so its accuracy barely depends on the step; here every input is distinct.
    "mlp-purkayastha-4000": (
        "simulations/experiments/sst2_class_rr_4000.toml",
        ['sentence-mechanism="purkayastha"', 'encoder-tuning="none"'],
    ),
}
SEEDS = (1, 2, 3)


def one(code: Path, config: str, sets: list[str], seed: int, timeout: float) -> dict[str, Any]:
    """One seeded ``sanitas run`` of checkout ``code`` (the configs are this checkout's)."""
    with tempfile.TemporaryDirectory() as tmp:
        seeded = [*sets, f"seed={seed}", f"noise-seed={seed}"]
        run = one_run(str(REPO / config), seeded, "local", Path(tmp), timeout, code)
    if "error" in run:
        return {"seed": seed, "error": run["error"], "wall_seconds": run["wall_seconds"]}
    return {k: run[k] for k in ("accuracy", "test_users", "wall_seconds")} | {"seed": seed}


def measure(code: Path, names: list[str], timeout: float) -> dict[str, Any]:
    out: dict[str, Any] = {"code": str(code), "runs": {}}
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=code, capture_output=True, text=True).stdout.strip()
    out["commit"] = commit
    for name in names:
        config, sets = RUNS[name]
        out["runs"][name] = {"config": config, "sets": sets, "seeds": []}
        for seed in SEEDS:
            result = one(code, config, sets, seed, timeout)
            out["runs"][name]["seeds"].append(result)
            print(f"{name} seed {seed}: {result.get('accuracy', result.get('error', '')[-200:])}", file=sys.stderr)
    return out


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Per run: before's and after's accuracies, before's sd, each seed's difference, and whether every
    difference is within one sd (``passed`` over all runs)."""
    verdicts: dict[str, Any] = {}
    for name, b in before["runs"].items():
        a = after["runs"].get(name)
        if a is None:
            continue
        acc_b = [s["accuracy"] for s in b["seeds"]]
        acc_a = [s["accuracy"] for s in a["seeds"]]
        tests = next((s["test_users"] for s in b["seeds"] if s.get("test_users")), None)
        sd = statistics.stdev(acc_b)
        bound = max(sd, 1.0 / tests) if (sd == 0 and tests) else sd
        diffs = [round(x - y, 6) for x, y in zip(acc_a, acc_b, strict=True)]
        verdicts[name] = {
            "before": acc_b,
            "after": acc_a,
            "before_sd": round(sd, 6),
            "bound": round(bound, 6),
            "differences": diffs,
            "within_one_sd": all(abs(d) <= bound + 1e-12 for d in diffs),
            "wall_seconds_before": [s["wall_seconds"] for s in b["seeds"]],
            "wall_seconds_after": [s["wall_seconds"] for s in a["seeds"]],
        }
    return {"runs": verdicts, "passed": all(v["within_one_sd"] for v in verdicts.values()) and bool(verdicts)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", default=str(REPO), help="the checkout whose code runs (default: this one)")
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=sorted(RUNS))
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(Path(p).read_text()) for p in args.compare)
        result = {**compare(before, after), "before_commit": before.get("commit"), "after_commit": after.get("commit")}
    else:
        if not os.environ.get("SANITAS_DATA_DIR"):
            print("set SANITAS_DATA_DIR to the offline data folder (../shared/data)", file=sys.stderr)
            return 2
        result = measure(Path(args.code).resolve(), args.runs, args.timeout)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if result.get("passed", True) else 1


if __name__ == "__main__":
    sys.exit(main())
