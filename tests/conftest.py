"""Shared fixtures: the offline data folder and a per-session embedding cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("SANITAS_DATA_DIR", REPO.parent / "shared" / "data")).resolve()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA_DIR / "sst2" / "train.jsonl.gz").is_file():
        pytest.fail(f"offline datasets not found under {DATA_DIR}; set SANITAS_DATA_DIR")
    return DATA_DIR


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sanitas-cache")
