"""The one-call GPU check: the GPU tests, then the runs the project times, with ``device = "cpu"`` and
``device = "cuda"`` side by side on the same machine, into one JSON file.

Usage (on a machine with torch and CUDA, from the repository root, after ``benchmarks/gpu/setup.sh``):

    python benchmarks/gpu/check.py --out gpu-check.json [--budget 450]

Steps, in order of what they decide (each skipped, and said so, once the budget would be overrun;
the JSON is rewritten after every step, so a killed check still leaves what it measured):

1. ``pytest -m gpu`` (every GPU test; they skip without CUDA);
2. the quickstart (``simulations/experiments/quickstart.toml``, the README's main job: full SST-2,
   local DP, the class-means head): a cold CUDA run (it embeds SST-2 and fills the caches), then a
   warm CUDA run and a warm CPU run (target: CUDA within 1.5x of CPU);
3. the LoRA + head central run on CUDA (``bench_run_phases.py``'s ``lora-central``: full SST-2, 50
   rounds, per-user epsilon 2; target <= 60 s). Its CPU side is the 2-core figure in
   ``docs/results/central-speed`` (on this machine's cores it would take most of the budget);
4. the SST-2 200-public comparison on CUDA (``bench_compare.py``: 5 local and 5 central epsilons, 3 seeds,
   30 central rounds; target <= 4 minutes; its 2-core CPU figure is in ``docs/results/central-round``);
5. full SST-2 local with the MLP server model (``sst2_class_rr_4000.toml`` at ``train-size = 0``,
   encoder tuning off so that neither side tunes: the server's training is what it times), CUDA then CPU;
6. a 5-point epsilon sweep of step 5's recipe, CUDA then CPU (sweep over one run: target <= 2).

Runs are real ``sanitas run`` / ``sanitas sweep`` processes on the local backend with the data of
``$SANITAS_DATA_DIR``; the card's name, torch's version and the core count head the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from _common import run_header  # noqa: E402
from bench_compare import timed_compare  # noqa: E402
from bench_run_phases import LORA, one_run  # noqa: E402
from bench_sweep import _sanitas as sanitas  # noqa: E402

QUICKSTART = "simulations/experiments/quickstart.toml"
SEEDED = ["noise-seed=1"]  # the same releases on both devices: the accuracies differ only by the arithmetic
MLP = "simulations/experiments/sst2_class_rr_4000.toml"
MLP_SETS = ["train-size=0", 'encoder-tuning="none"', *SEEDED]
GRID = "sentence-epsilon=2.826,4.239,5.652,8.478,11.304"


class Check:
    """The JSON being built, written after each step; the time left of the budget."""

    def __init__(self, out: Path, budget: float) -> None:
        self.out, self.budget, self.started = out, budget, time.perf_counter()
        import torch

        self.data: dict[str, Any] = {
            **run_header(),
            "benchmark": "GPU check: GPU tests, then runs with device cpu and cuda side by side",
            "card": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "cuda_available": torch.cuda.is_available(),
            "commit": os.environ.get("SANITAS_COMMIT", ""),
            "budget_seconds": budget,
            "steps": {},
        }
        self.write()

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.started)

    def step(self, name: str, value: Any) -> None:
        self.data["steps"][name] = value
        self.data["elapsed_seconds"] = round(time.perf_counter() - self.started, 1)
        self.write()
        print(f"[{self.data['elapsed_seconds']:7.1f} s] {name}: {_brief(value)}", flush=True)

    def write(self) -> None:
        self.out.write_text(json.dumps(self.data, indent=1) + "\n")


def _brief(value: Any) -> str:
    if isinstance(value, dict):
        keys = ("wall_seconds", "accuracy", "summary", "skipped", "error", "sweep_over_single")
        return ", ".join(f"{k}={str(value[k])[:300]}" for k in keys if k in value)
    return str(value)[:300]


def gpu_tests(timeout: float) -> dict[str, Any]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-rfEs", "tests"],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    lines = proc.stdout.strip().splitlines()
    return {
        "returncode": proc.returncode,
        "summary": lines[-1] if lines else "",
        "wall_seconds": round(time.perf_counter() - started, 1),
        "output_tail": proc.stdout[-6000:] + proc.stderr[-2000:],
    }


def run(config: str, sets: list[str], device: str, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = one_run(config, [*sets, f'device="{device}"'], "local", Path(tmp), timeout, REPO)
        if "error" in out:  # the run's own log says where it broke (the folder goes with the block)
            out["log_tail"] = "".join(p.read_text()[-4000:] for p in Path(tmp).glob("*/run.log"))
    return {"device": device, **out}


def sweep(config: str, sets: list[str], device: str, timeout: float) -> dict[str, Any]:
    set_args = [a for s in [*sets, f'device="{device}"'] for a in ("--set", s)]
    with tempfile.TemporaryDirectory() as tmp:
        wall, proc = sanitas(REPO, ["sweep", config, *set_args, "--grid", GRID, "--out", tmp, "--name", "s"], timeout)
        accuracies = [
            json.loads(p.read_text())["final"]["accuracy"] for p in sorted(Path(tmp, "s").glob("*/summary.json"))
        ]
    out: dict[str, Any] = {"device": device, "wall_seconds": wall, "returncode": proc.returncode}
    out["accuracies"] = accuracies
    if proc.returncode != 0:
        out["error"] = proc.stderr[-2000:]
    return out


def compare(device: str, timeout: float) -> dict[str, Any]:
    """The SST-2 200-public comparison (``bench_compare.py``'s defaults: 5 local and 5 central epsilons, 3
    seeds, 30 central rounds) on ``device``; its 2-core CPU figure is in ``docs/results/central-round``."""
    sets = [f'device="{device}"']
    return {
        "device": device,
        **timed_compare(
            REPO,
            "simulations/experiments/sst2_public.toml",
            "1,2,3.14,6.28,12.6",
            "0.5,1,2,4,8",
            "1,2,3",
            ["num-server-rounds=30", *sets],
            sets,
            timeout,
        ),  # fmt: skip
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu-check.json")
    parser.add_argument("--budget", type=float, default=450.0, help="seconds; steps that would overrun are skipped")
    args = parser.parse_args()
    if not os.environ.get("SANITAS_DATA_DIR"):
        print("set SANITAS_DATA_DIR to the offline data folder", file=sys.stderr)
        return 2
    check = Check(Path(args.out), args.budget)
    # (name, seconds it needs at least to be worth starting, the work)
    plan: list[tuple[str, float, Any]] = [
        ("gpu_tests", 30, lambda t: gpu_tests(t)),
        ("quickstart_cuda_cold", 30, lambda t: run(QUICKSTART, SEEDED, "cuda", t)),
        ("quickstart_cuda_warm", 15, lambda t: run(QUICKSTART, SEEDED, "cuda", t)),
        ("quickstart_cpu_warm", 15, lambda t: run(QUICKSTART, SEEDED, "cpu", t)),
        ("lora_central_cuda", 60, lambda t: run("simulations/experiments/sst2_encoder.toml", LORA, "cuda", t)),
        ("compare_sst2_public200_cuda", 240, lambda t: compare("cuda", t)),
        ("full_sst2_mlp_cuda", 30, lambda t: run(MLP, MLP_SETS, "cuda", t)),
        ("full_sst2_mlp_cpu", 30, lambda t: run(MLP, MLP_SETS, "cpu", t)),
        ("sweep5_cuda", 60, lambda t: sweep(MLP, MLP_SETS, "cuda", t)),
        ("sweep5_cpu", 60, lambda t: sweep(MLP, MLP_SETS, "cpu", t)),
    ]
    for name, least, work in plan:
        left = check.left()
        if left < least:
            check.step(name, {"skipped": f"budget: {left:.0f} s left"})
            continue
        try:
            check.step(name, work(left))
        except subprocess.TimeoutExpired:
            check.step(name, {"error": f"killed at the budget ({left:.0f} s)"})
    steps = check.data["steps"]
    ratios = {}
    for cuda, cpu in (("quickstart_cuda_warm", "quickstart_cpu_warm"), ("full_sst2_mlp_cuda", "full_sst2_mlp_cpu")):
        if "wall_seconds" in steps[cuda] and "wall_seconds" in steps[cpu] and "error" not in steps[cuda]:
            ratios[f"{cuda}_over_cpu"] = round(steps[cuda]["wall_seconds"] / steps[cpu]["wall_seconds"], 2)
    for device in ("cuda", "cpu"):
        single, many = steps[f"full_sst2_mlp_{device}"], steps[f"sweep5_{device}"]
        if "error" not in single and "error" not in many and "wall_seconds" in single and "wall_seconds" in many:
            ratios[f"sweep5_over_single_{device}"] = round(many["wall_seconds"] / single["wall_seconds"], 2)
    check.data["ratios"] = ratios
    check.step("done", ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
