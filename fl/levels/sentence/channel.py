"""Sentence level: one sanitized embedding per document (Du et al. 2023, §3.2).

The node maps the frozen encoder's embedding through M1, normalises it and
runs the sentence mechanism (Purkayastha, planar Laplace, PrivEmb, clipped
Laplace/Gaussian, or ``none``). One release is one use of the mechanism's
guarantee.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from fl.accounting.charges import Charge
from fl.levels.base import MappedChannel, ReleaseInputs
from mechanisms.guarantee import Guarantee


class SentenceChannel(MappedChannel):
    """Release ``mechanism(n(M1 G(doc)))`` per document; in the leaky mode also dLoss/dM1."""

    level = "sentence"
    channel = "sentence"

    @property
    def guarantee(self) -> Guarantee:
        return self.mechanism.guarantee

    def row_charges(self, n: int, extras: Mapping[str, np.ndarray]) -> list[Charge]:
        # The guarantee carries the kind its mechanism declared, which picks its dp-accounting event.
        return [Charge(self.guarantee)] * n

    def source(self, inputs: ReleaseInputs, rows: np.ndarray) -> torch.Tensor:
        """The encoder's embedding of each row's document (before M1)."""
        c = inputs.cohort
        return (c.train_emb if inputs.purpose == "train" else c.test_emb)[rows]
