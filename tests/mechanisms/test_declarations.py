"""What a sentence mechanism declares about itself is true, for every one in the registry: the config
checks refuse a configuration on these declarations alone (``fl.config.rules``), so a wrong one would
let a run start that fails on every node, or refuse one that works."""

from __future__ import annotations

import pytest
import torch

import mechanisms
from fl import config as config_mod
from fl.config.values import make_mechanism
from mechanisms.base import straight_through

SENTENCE = [n for n in mechanisms.names() if n == "none" or mechanisms.mechanism_class(n).level == "sentence"]


def _mechanism(name: str):  # noqa: ANN202 - a mechanism of any class
    cfg = config_mod.resolve({"dataset": "sst2", "sentence-mechanism": name, "sentence-epsilon": 4.0, "map-dim": 8})
    return make_mechanism(cfg, "sentence", input_dim=8, num_classes=3)


def _carries_a_gradient(mech: object) -> bool:
    """Whether training through ``mech`` (straight-through) gives its input a nonzero gradient."""
    x = torch.nn.functional.normalize(torch.randn(16, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    x = x.to(torch.float64).requires_grad_(True)
    out = straight_through(mech, x, torch.Generator().manual_seed(1))
    if not out.requires_grad:
        return False
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(2), dtype=out.dtype)
    (grad,) = torch.autograd.grad((out * weights).sum(), x, allow_unused=True)
    return grad is not None and bool(grad.abs().sum() > 0)


@pytest.mark.parametrize("name", SENTENCE)
def test_a_mechanism_has_a_gradient_path_exactly_when_it_declares_one(name: str) -> None:
    mech = _mechanism(name)
    assert _carries_a_gradient(mech) == mech.gradient_path


def test_the_check_tells_the_two_kinds_apart() -> None:
    """Power: the probe finds no gradient in the class release, and one in a continuous release."""
    assert not _carries_a_gradient(_mechanism("class_rr"))
    assert _carries_a_gradient(_mechanism("purkayastha"))


@pytest.mark.parametrize(
    "keys",
    [
        {"map-in": "leaky", "allow-unaccounted-leakage": True},
        {"map-in": "public", "public-fraction": 0.25},
        {"tuning-noise": True, "encoder-tuning": "public", "public-fraction": 0.25},
    ],
    ids=["leaky", "public", "tuning-noise"],
)
def test_training_through_a_mechanism_without_a_gradient_path_is_refused_in_one_line(keys: dict) -> None:
    base = {"dataset": "sst2", "label-mechanism": "rr", "label-epsilon": 1.0, **keys}
    with pytest.raises(config_mod.ConfigError, match="class_rr' has no gradient path") as err:
        config_mod.resolve({**base, "sentence-mechanism": "class_rr"})
    assert "\n" not in str(err.value)
    config_mod.resolve({**base, "sentence-mechanism": "purkayastha"})  # a mechanism with one passes
