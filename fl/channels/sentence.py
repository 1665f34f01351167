"""Sentence level: one sanitized embedding per document (Du et al. 2023, §3.2).

The node maps the frozen encoder's embedding through M1, normalises it and
runs the sentence mechanism (Purkayastha, planar Laplace, PrivEmb, clipped
Laplace/Gaussian, or ``none``). One release is one use of the mechanism's
guarantee.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mechanisms.guarantee import Guarantee

from .. import maps
from ..accounting.charges import Charge
from ..config import make_mechanism
from .base import Drawn, EmbeddingChannel, ReleaseInputs


class SentenceChannel(EmbeddingChannel):
    """Release ``mechanism(n(M1 G(doc)))`` per document; in the leaky mode also dLoss/dM1."""

    level = "sentence"
    mechanism_key = "sentence-mechanism"
    epsilon_key = "sentence-epsilon"

    def __init__(self, cfg: Mapping[str, Any], input_dim: int) -> None:
        super().__init__(cfg, input_dim)
        self.mechanism = make_mechanism(cfg, "sentence", input_dim=input_dim)

    @property
    def guarantee(self) -> Guarantee:
        return self.mechanism.guarantee

    def row_charges(self, n: int, extras: Mapping[str, np.ndarray]) -> list[Charge]:
        return [Charge(self.guarantee, mechanism=self.mechanism.name)] * n  # the name picks its dp-accounting event

    def source(self, inputs: ReleaseInputs, rows: np.ndarray) -> torch.Tensor:
        """The encoder's embedding of each row's document (before M1)."""
        c = inputs.cohort
        return (c.train_emb if inputs.purpose == "train" else c.test_emb)[rows]

    def release(self, inputs: ReleaseInputs, rows: np.ndarray, generator: torch.Generator) -> Drawn:
        source = self.source(inputs, rows)
        if inputs.leaky and inputs.purpose == "train":
            if inputs.matrix is None or inputs.model is None:
                raise ValueError("the leaky mode needs M1 and the server model")
            y = inputs.cohort.train_y[rows]
            released, grad = maps.leaky_map_gradient(inputs.matrix, inputs.model, source, y, self.mechanism, generator)
            return Drawn(released.to(torch.float32), grad=grad)
        released = self.mechanism.sanitize(maps.apply_input_map(source, inputs.matrix), generator=generator)
        return Drawn(released.to(torch.float32))
