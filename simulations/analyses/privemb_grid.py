"""The default grid of ``sanitas privemb-errors`` (:mod:`simulations.analyses.privemb_errors`), apart from the
analysis so that the command line's help reads it without importing torch."""

from __future__ import annotations

EPSILONS: tuple[float, ...] = (1.0, 2.0, 5.0)
BETAS: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9)
DELTA = 1e-6  # the paper's delta (§5)
SOURCES: tuple[str, ...] = ("glove", "sentences", "synthetic")
