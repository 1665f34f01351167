"""Load a user's strategy named in the run config (``"package.module:Class"``).

Two shapes are accepted, as in Flower:

* a subclass of :class:`~strategies.local.release_training.ReleaseTraining`: built
  with the same arguments (``cfg``);
* a wrapper (any ``flwr.serverapp.strategy.Strategy`` whose constructor takes a
  ``strategy`` argument, like Flower's ``DifferentialPrivacy*`` wrappers): built
  around a default ``ReleaseTraining``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from flwr.serverapp.strategy import Strategy

from fl.config import RunConfig
from strategies.local.release_training import ReleaseTraining


def import_object(spec: str) -> Any:
    """Import ``"package.module:Name"``; a clear ``ValueError`` if it cannot be found."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"strategy must look like 'package.module:Class', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"cannot import strategy module {module_name!r}: {err}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"module {module_name!r} has no attribute {attr!r}") from None


def make_strategy(cfg: RunConfig) -> Strategy:
    """The configured strategy (``ReleaseTraining`` when ``strategy`` is empty).

    The ServerApp puts ``LocalDPAccounting`` around whatever this returns, so
    no configured strategy can skip the accounting.
    """
    spec = cfg.server.strategy
    if not spec:
        return ReleaseTraining(cfg)
    cls = import_object(spec)
    if inspect.isclass(cls) and issubclass(cls, ReleaseTraining):
        return cls(cfg)
    if inspect.isclass(cls) and issubclass(cls, Strategy) and "strategy" in inspect.signature(cls).parameters:
        wrapper: Callable[..., Strategy] = cls  # a Strategy subclass whose constructor takes `strategy` (checked)
        return wrapper(strategy=ReleaseTraining(cfg))
    raise ValueError(
        f"strategy {spec!r} must subclass strategies.ReleaseTraining or be a Flower Strategy "
        "wrapper taking a `strategy` argument"
    )
