"""Fixtures of the strategy tests (defined in tests/support/grids.py)."""

from tests.support.grids import task_identity  # noqa: F401  (autouse fixture, by name)
