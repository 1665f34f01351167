"""The data layer called with a whole resolved run config, as the edges (``sanitas run``, the apps) call it:
the library takes the data section, the users section and the level (``fl.data.datasets``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fl.config import RunConfig
from fl.data import datasets
from fl.data.user_files import read_user_files


def load_run(cfg: RunConfig) -> Any:
    """The dataset a run with ``cfg`` loads."""
    return datasets.load(cfg.data, cfg.users, cfg.release.level)


def check_run_source(cfg: RunConfig) -> str:
    """The data source check a run with ``cfg`` makes."""
    return datasets.check_source(cfg.data, cfg.users)


def run_public_groups(cfg: RunConfig) -> np.ndarray:
    """The source groups of the public documents of a run with ``cfg``."""
    return datasets.public_groups(cfg.data, cfg.users, cfg.release.level)


def read_run_files(cfg: RunConfig) -> Any:
    """The user files of a run with ``cfg``, as read before the split."""
    return read_user_files(cfg.data)
