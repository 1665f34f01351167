"""Where a run's wall time goes: named phases measured in the process that runs them.

The launcher and the ServerApp (one process, whatever the backend) add their phases to
:data:`PHASES`; the summary's ``timings`` record is its snapshot. A phase may be entered many
times (every round's ``train`` round trip); its seconds and count add up.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Phases:
    """Seconds and entries per named phase (not thread-safe: one driver thread measures)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.marks: dict[str, float] = {}

    def mark(self, name: str) -> None:
        """Remember now as ``name`` (e.g. when a backend starts: its start-up ends when the ServerApp runs)."""
        self.marks[name] = time.perf_counter()

    def end(self, name: str) -> None:
        """Add the seconds since mark ``name`` as phase ``name`` and forget the mark (nothing when no
        such mark is set: a ServerApp started by ``flwr run``, not by the launcher)."""
        started = self.marks.pop(name, None)
        if started is not None:
            self.add(name, time.perf_counter() - started)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.counts[name] = self.counts.get(name, 0) + 1

    @contextmanager
    def measure(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def reset(self) -> None:
        self.seconds.clear()
        self.counts.clear()
        self.marks.clear()

    def snapshot(self) -> dict[str, float]:
        """Seconds per phase, rounded to milliseconds, in the order the phases were first entered."""
        return {name: round(s, 3) for name, s in self.seconds.items()}


PHASES = Phases()


def process_age() -> float:
    """Seconds since this process started (from ``/proc``; 0.0 where that is unavailable), i.e. the
    interpreter's start-up and imports when called at the launcher's entry."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
