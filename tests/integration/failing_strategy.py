"""A strategy that fails in round 1's aggregation: a run that breaks after it started (test_console_run)."""

from __future__ import annotations

from typing import Any

from strategies.local.release_training import ReleaseTraining


class FailsInRoundOne(ReleaseTraining):
    def aggregate_train(self, server_round: int, replies: Any) -> Any:
        raise RuntimeError("the strategy broke in round 1")
