"""Helpers shared by the benchmark scripts (run as ``python benchmarks/<script>.py``)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import torch

import mechanisms


def mechanisms_at_level(level: str) -> list[str]:
    """Registry names of the mechanisms of one level (``"sentence"``, ``"word"``, ...)."""
    return [name for name in mechanisms.names() if mechanisms.mechanism_class(name).level == level]


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU model from /proc/cpuinfo (else the platform's)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_header() -> dict[str, Any]:
    """What a timing depends on besides the code: torch, threads, cores, the machine's load."""
    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": [round(v, 2) for v in os.getloadavg()],  # other work on the machine skews timings
    }


def emit(result: dict[str, Any], out: str) -> None:
    """Add the load at the end, print the JSON, and write it to ``out`` when given."""
    result["load_average_at_end"] = [round(v, 2) for v in os.getloadavg()]
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        Path(out).write_text(text + "\n")
