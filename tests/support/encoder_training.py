"""A tiny labelled text set and config for the central encoder-training tests (CPU and GPU)."""

from __future__ import annotations

import torch

from fl import config as config_mod

TEXTS = [
    "a gripping , beautifully acted film .",
    "dull and far too long .",
    "the jokes never land",
    "one of the year 's best",
    "an utter mess",
    "warm , funny and wise .",
    "i wanted my two hours back .",
]


LABELS = torch.tensor([1, 0, 0, 1, 0, 1, 0])


def encoder_cfg(part: str, layers: int = 1) -> config_mod.RunConfig:
    return config_mod.resolve(
        {
            "mode": "central",
            "central-train": "encoder",
            "central-tuning-part": part,
            "tuning-layers": layers,
            "tuning-lora-rank": 2,
            "device": "cpu",
        }
    )
