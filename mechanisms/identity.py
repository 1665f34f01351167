"""The ``"none"`` mechanism: release in the clear, with an honest guarantee.

It exists so that non-private baselines run through the same code path. Its
guarantee has epsilon = inf, so no run that uses it ever reports a finite
epsilon for the channel it covers.
"""

from __future__ import annotations

import torch

from .base import LEVELS, Mechanism, check_embeddings, check_labels
from .guarantee import Guarantee, no_privacy


class NoPrivacy(Mechanism):
    """Identity release (no privacy) at a chosen level.

    Parameters
    ----------
    level : {"sentence", "label", "document", "word"}
        The channel this mechanism stands in for (default ``"sentence"``).
    """

    name = "none"
    gradient_path = True  # clean(x) = x (as SentenceMechanism.gradient_path declares for the sentence level)

    def __init__(self, level: str = "sentence") -> None:
        if level not in LEVELS:
            raise ValueError(f"unknown level {level!r}; use one of {LEVELS}")
        self.level = level  # type: ignore[misc]  # instance-level: one class, every level

    @property
    def guarantee(self) -> Guarantee:
        return no_privacy(self.level)

    def output_dim(self, d: int) -> int:
        """Releases keep the input's dimension (as ``SentenceMechanism.output_dim``)."""
        return d

    def clean(self, x: torch.Tensor) -> torch.Tensor:
        """The release itself (as ``SentenceMechanism.clean``)."""
        return x

    def unbiased_moments(self, d: int) -> float | None:
        """The release is its unit input: unbiased, second moment 1 (as ``SentenceMechanism.unbiased_moments``)."""
        return 1.0

    def second_moment_law(self, d: int) -> tuple[float, float] | None:
        """The release is its input: E[z z^T | u] = u u^T (as ``SentenceMechanism.second_moment_law``)."""
        return 1.0, 0.0

    @torch.no_grad()
    def sanitize(
        self,
        x: torch.Tensor,
        num_classes: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Return a copy of ``x`` (embeddings [n, m], or labels [n] with ``num_classes``)."""
        if self.level == "label":
            if num_classes is None:
                raise ValueError("label release needs num_classes")
            return check_labels(x, num_classes).clone()
        return check_embeddings(x).clone()
