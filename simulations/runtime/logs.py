"""The console logging of Sanitas' own packages, set up once per command (``sanitas`` and each point a warm
worker runs)."""

from __future__ import annotations

import logging

#: The loggers of Sanitas' own packages, which :func:`setup_logging` configures.
SANITAS_LOGGERS = ("fl", "clients", "strategies", "simulations", "sanitas")


def setup_logging() -> None:
    """INFO logs of Sanitas' own packages (Flower configures its own logger)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s sanitas.%(name)s: %(message)s"))
    # A long phase's progress lines are for run.log: the console shows its bar (fl.reporting.progress).
    handler.addFilter(lambda record: not record.name.startswith("fl.progress"))
    for name in SANITAS_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        for old in [h for h in logger.handlers if getattr(h, "sanitas_cli", False)]:
            logger.removeHandler(old)  # a warm worker calls main() once per point
        handler.sanitas_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False
