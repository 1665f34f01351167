"""A user's mechanisms, as a user writes them in a file of their own (the tests write :data:`SOURCE` into
``tmp_path`` and name its classes as ``"path/to/file.py:Class"`` or ``"module:Class"``).

``MyPlanar`` is planar Laplace (``mechanisms/planar_laplace.py``) under another name; ``Loose`` declares the
same guarantee and samples at 3x its epsilon (the quick audit's power check); ``MyRR`` and ``LooseRR`` are the
same pair for labels. Every ``sanitize`` appends one line, ``<pid> <node>``, to the marker file when one is
given (``node``: called from the ClientApp's code, ``clients/``): what shows that the nodes used the class.
The other classes are the broken declarations the registry refuses.
"""

from __future__ import annotations

from pathlib import Path

SOURCE = '''
import os
import traceback

import torch

from mechanisms.base import (
    LabelMechanism,
    SentenceMechanism,
    add_unit_rows_,
    check_embeddings,
    check_epsilon,
    normalize_rows_,
    sample_device,
)
from mechanisms.guarantee import Guarantee
from mechanisms.noise import gamma_radius_noise
from mechanisms.randomized_response import RandomizedResponse

MARKER = {marker!r}


def _mark():
    if MARKER:
        node = any("/clients/" in frame.filename for frame in traceback.extract_stack())
        with open(MARKER, "a") as fh:
            fh.write(f"{{os.getpid()}} {{int(node)}}\\n")


class MyPlanar(SentenceMechanism):
    """Planar Laplace: epsilon * d_2-LDP on the unit sphere."""

    name = "my_planar"

    def __init__(self, epsilon: float, normalize_output: bool = True) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.normalize_output = bool(normalize_output)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(notion="metric", epsilon=self.epsilon, metric="euclidean", diameter=2.0)

    def sampled_epsilon(self) -> float:
        return self.epsilon

    @torch.no_grad()
    def sanitize(self, x, generator=None):
        _mark()
        x = check_embeddings(x)
        n, m = x.shape
        device = sample_device(x.device, generator)
        y = gamma_radius_noise(n, m, 1.0 / self.sampled_epsilon(), generator, device)
        add_unit_rows_(y, x)
        out = normalize_rows_(y) if self.normalize_output else y
        return out.to(x.dtype).to(x.device)


class Loose(MyPlanar):
    """Declares MyPlanar's guarantee, samples at 3x its epsilon."""

    name = "loose_planar"

    def sampled_epsilon(self) -> float:
        return 3 * self.epsilon


class Clash(MyPlanar):
    """A user's class whose name is a built-in's."""

    name = "planar_laplace"


class MyRR(RandomizedResponse):
    name = "my_rr"


class LooseRR(RandomizedResponse):
    """Declares epsilon, keeps the label with the probability of 3x epsilon."""

    name = "loose_rr"

    def sanitize(self, y, num_classes, generator=None):
        return RandomizedResponse(3 * self.epsilon).sanitize(y, num_classes, generator)


class Failing(MyPlanar):
    name = "failing"

    def sanitize(self, x, generator=None):
        if x.shape[0] > 1:
            raise RuntimeError("boom")
        return super().sanitize(x, generator)


class Slow(MyPlanar):
    """MyPlanar at 20 microseconds a row more."""

    name = "slow"

    def sanitize(self, x, generator=None):
        import time

        time.sleep(2e-5 * x.shape[0])
        return super().sanitize(x, generator)


class Open(MyPlanar):
    """Declares no privacy."""

    name = "open"

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(notion="pure", epsilon=float("inf"))


class NoName(MyPlanar):
    name = ""


class NoLevel(LabelMechanism):
    name = "no_level"
    level = "paragraph"


class Abstract(SentenceMechanism):
    name = "abstract"

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(notion="pure", epsilon=1.0)


class NotAMechanism:
    name = "plain"


def not_a_class():
    return None
'''


def write_mechanisms(folder: Path, name: str = "user_noise.py", marker: Path | None = None) -> Path:
    """:data:`SOURCE` written as ``folder / name`` (``marker``: the file each ``sanitize`` appends to)."""
    path = folder / name
    path.write_text(SOURCE.format(marker=str(marker) if marker else ""))
    return path
