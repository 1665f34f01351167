"""Whole runs with ``device = "cuda"``: every mode's path (local DP with a supervised public map and its
public start, the class-means head, user-level central DP with the head and with LoRA adapters,
node-level central DP) runs on the GPU and lands where the CPU run lands. Skipped without CUDA.

Tolerance: CUDA's matrix products reduce in another order than the CPU's, so floats differ in their
last bits and a few thousand optimizer steps can move a small run's accuracy by a test example or
two; the releases themselves are drawn from CPU generators on both sides (the noise of a seeded run
is the same), so the runs differ only by that arithmetic. Each accuracy must be within 3 test
examples of the CPU's, and the privacy accounting must be the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fl import config as config_mod
from simulations.runtime.api import launch
from tests.support.runs import MODES, SMALL_RUN, SUPERVISED_MAP

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

CASES: dict[str, dict[str, object]] = {
    "local-supervised-map": {**MODES["local"], **SUPERVISED_MAP},
    "local-class-means": {
        "train-size": 400,
        "public-size": 100,
        "users-per-node": 100,
        "map-in": "projection",
        "map-dim": 8,
        "sentence-mechanism": "privunit",
        "sentence-options": "unbiased = true",
        "sentence-epsilon": 8.0,
        "label-mechanism": "rr",
        "label-epsilon": 4.0,
        "server-model": "class-means",
        "clean-evaluation": True,
    },
    "central-user": {**MODES["central-user"], "train-size": 400, "users-per-node": 100, "num-server-rounds": 3},
    "central-user-lora": {
        **MODES["central-user"],
        "map-in": "identity",
        "central-train": "encoder",
        "central-tuning-part": "lora",
        "tuning-layers": 1,
    },
    "central-node": {
        "mode": "central",
        "central-unit": "node",
        "central-noise-multiplier": 0.5,
        "central-clip": 1.0,
        "central-delta": 1e-5,
        "local-epochs": 2,
        "batch-size": 8,
        "users-per-node": 30,
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_cuda_run_lands_where_the_cpu_run_lands(case: str, tmp_path: Path, offline_env: None) -> None:
    summaries = {}
    for device in ("cpu", "cuda"):
        cfg = config_mod.resolve(
            {**SMALL_RUN, **CASES[case], "device": device, "out-dir": str(tmp_path / device), "run-name": "r"}
        )
        folder = launch(cfg, verbose=False)
        assert isinstance(folder, Path), folder
        summaries[device] = json.loads((folder / "summary.json").read_text())
    cpu, gpu = (summaries[d]["final"] for d in ("cpu", "cuda"))
    tests = int(cpu.get("test_users") or cpu.get("num_examples") or SMALL_RUN["test-size"])  # type: ignore[call-overload]
    assert abs(gpu["accuracy"] - cpu["accuracy"]) <= 3 / tests + 1e-9, (cpu["accuracy"], gpu["accuracy"])
    assert summaries["cuda"]["privacy"] == summaries["cpu"]["privacy"]  # the same releases and accounting
