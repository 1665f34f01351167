"""Adding a mechanism is one file and one registry line: a sentence mechanism written here (the file) and
registered (the line) runs a whole local-DP run end to end, its guarantee reported and accounted, with
nothing else of Sanitas changed. What the run needs of it is what the mechanism says about itself
(``level``, ``guarantee``, ``gradient_path``, ``output_dim``), never its name."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import ClassVar

import pytest
import torch

import mechanisms
from fl import config as config_mod
from mechanisms.base import SentenceMechanism, check_epsilon, normalize_rows
from mechanisms.guarantee import Guarantee
from mechanisms.registry import _REGISTRY
from simulations.runtime.api import launch
from tests.support.runs import SMALL_RUN


class SignResponse(SentenceMechanism):
    """Binary randomized response on the sign of the first coordinate: the release is +e1 or -e1,
    the true sign with probability e^eps / (1 + e^eps). Pure eps-LDP per sentence (the output depends
    on the input only through one bit, released by binary randomized response)."""

    name = "sign_response"
    gradient_path: ClassVar[bool] = False  # the release is a sign

    def __init__(self, epsilon: float) -> None:
        self.epsilon = check_epsilon(epsilon)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee("pure", self.epsilon, granularity="sentence", accounting="randomized_response", buckets=2)

    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        rows = normalize_rows(x.detach().to(torch.float64))
        sign = torch.where(rows[:, 0] >= 0, 1.0, -1.0).to(torch.float64)
        keep = torch.rand(rows.shape[0], generator=generator, dtype=torch.float64, device=rows.device)
        flip = keep >= math.exp(self.epsilon) / (1.0 + math.exp(self.epsilon))
        out = torch.zeros_like(rows)
        out[:, 0] = torch.where(flip, -sign, sign)
        return out.to(x.dtype)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mechanisms.registry, "_REGISTRY", dict(_REGISTRY))
    mechanisms.register(SignResponse)  # the one registry line


def test_a_mechanism_added_in_one_file_runs_end_to_end(registered: None, tmp_path: Path, offline_env: None) -> None:
    keys = {**SMALL_RUN, "sentence-mechanism": "sign_response", "sentence-epsilon": 1.5, "out-dir": str(tmp_path)}
    folder = launch(config_mod.resolve(keys), verbose=False)
    assert isinstance(folder, Path), folder
    summary = json.loads((folder / "summary.json").read_text())
    stated = summary["guarantee"]["sentence"]
    assert (stated["notion"], stated["epsilon"], stated["granularity"]) == ("pure", 1.5, "sentence")
    assert summary["privacy"]["releases"] > 0
    # its declared kind is what the accountant composes: K-ary RR's exact event
    assert "RandomizedResponseDpEvent" in json.dumps(summary["privacy"])
    # and its declarations are what the config checks read: no gradient path, so no public map through it
    with pytest.raises(config_mod.ConfigError, match="'sign_response' has no gradient path"):
        config_mod.resolve({**keys, "map-in": "public", "public-fraction": 0.25})


def test_the_new_mechanism_keeps_its_promise() -> None:
    """Power check of the toy itself: the true sign comes back with probability e^eps / (1 + e^eps)."""
    mech = SignResponse(1.5)
    x = torch.tensor([[0.6, 0.8]]).repeat(20_000, 1)
    out = mech.sanitize(x, generator=torch.Generator().manual_seed(0))
    kept = float((out[:, 0] > 0).double().mean())
    want = math.exp(1.5) / (1 + math.exp(1.5))
    assert abs(kept - want) < 4 * math.sqrt(want * (1 - want) / 20_000)
    weak = SignResponse(0.2).sanitize(x, generator=torch.Generator().manual_seed(1))
    assert abs(float((weak[:, 0] > 0).double().mean()) - want) > 0.1  # another epsilon is told apart
