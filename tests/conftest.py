"""Shared fixtures: the offline data folder and a per-session embedding cache.

The whole test session is offline: no test may reach the Hugging Face hub. The
variables are set here, at import time, before any test module imports
``huggingface_hub``, ``datasets`` or ``transformers`` (they read them once, at
import), and they are forced to "1" (a user's ``HF_HUB_OFFLINE=0`` must not
win). Subprocesses launched by the integration tests inherit ``os.environ``.
tests/fl/test_offline.py checks both.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
for _name in OFFLINE_VARIABLES:
    os.environ[_name] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

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


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, data_dir: Path, cache_dir: Path) -> None:
    """Runs in this test read the offline datasets and the session's cache folder (through the
    environment, as a user's shell would set them)."""
    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    monkeypatch.setenv("SANITAS_CACHE_DIR", str(cache_dir))


@pytest.fixture(autouse=True)
def restore_sanitas_loggers() -> Iterator[None]:
    """``sanitas`` commands run in this process (tests calling ``simulations.cli.main``) configure Sanitas'
    loggers (their own handler, no propagation); every test gets them back as they were, so that
    ``caplog`` sees the records of the tests after it."""
    from simulations.cli.options import SANITAS_LOGGERS

    saved = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).level) for name in SANITAS_LOGGERS}
    propagate = {name: logging.getLogger(name).propagate for name in SANITAS_LOGGERS}
    yield
    for name, (handlers, level) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate[name]
