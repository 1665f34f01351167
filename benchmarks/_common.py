"""Helpers shared by the benchmark scripts (run as ``python benchmarks/<script>.py``)."""

from __future__ import annotations

import platform
from pathlib import Path

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
