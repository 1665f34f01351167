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


#: Sanitas' loggers (``simulations.runtime.logs.SANITAS_LOGGERS``, and the mechanisms'), and how they were when
#: this conftest was imported, before any test module or fixture ran: every test starts and ends from this.
_LOGGERS = ("fl", "clients", "strategies", "simulations", "sanitas", "mechanisms")
_LOGGER_BASELINE = {
    name: (logging.getLogger(name).handlers[:], logging.getLogger(name).level, logging.getLogger(name).propagate)
    for name in _LOGGERS
}


@pytest.fixture(autouse=True)
def restore_sanitas_loggers() -> Iterator[None]:
    """``sanitas`` commands run in this process (tests calling ``simulations.cli.main``, some in module-scoped
    fixtures that run before a test's own fixtures) configure Sanitas' loggers (their own handler, no
    propagation); every test starts and ends with them as the session found them, so that ``caplog`` sees the
    records whatever ran before (the suite passes in any order, ``--reverse`` included)."""
    from simulations.runtime.logs import SANITAS_LOGGERS

    assert set(SANITAS_LOGGERS) <= set(_LOGGERS), "tests/conftest.py: _LOGGERS must list every Sanitas logger"
    _restore_loggers(_LOGGERS)
    yield
    _restore_loggers(_LOGGERS)


def _restore_loggers(names: tuple[str, ...]) -> None:
    for name, (handlers, level, propagate) in _LOGGER_BASELINE.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
    # A library that configures logging with ``logging.config`` (Flower's state migrations do) disables every
    # logger that exists then: a module logger of ours would stay mute for the tests after it.
    for name, logger in logging.root.manager.loggerDict.items():
        if isinstance(logger, logging.Logger) and name.split(".")[0] in names:
            logger.disabled = False
