"""The test session is offline (tests/conftest.py): no test, and no subprocess a test launches, can reach
the Hugging Face hub, whatever the caller's environment says (``HF_HUB_OFFLINE=0`` included)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import OFFLINE_VARIABLES

CHILD = (
    "import huggingface_hub, huggingface_hub.constants as c; print(c.HF_HUB_OFFLINE, huggingface_hub.is_offline_mode())"
)


def test_the_hub_libraries_run_offline_in_this_process() -> None:
    import datasets.config
    import huggingface_hub
    import huggingface_hub.constants

    assert {name: os.environ.get(name) for name in OFFLINE_VARIABLES} == dict.fromkeys(OFFLINE_VARIABLES, "1")
    # The libraries read the variables once, at import: these are the values they act on.
    assert huggingface_hub.constants.HF_HUB_OFFLINE is True and huggingface_hub.is_offline_mode()
    assert datasets.config.HF_HUB_OFFLINE is True
    transformers_hub = pytest.importorskip("transformers.utils.hub")
    assert transformers_hub.is_offline_mode()


def test_subprocesses_of_the_integration_tests_run_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI subprocess of tests/support/simulation.py (Ray runs of the integration tests)
    gets an environment in which huggingface_hub starts offline (local-backend runs stay in this
    offline process)."""
    from tests.support import simulation

    seen: dict = {}

    def capture(*args: object, **kwargs: object) -> subprocess.CompletedProcess:
        seen.update(kwargs)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(simulation.subprocess, "run", capture)
    simulation.run_cli(tmp_path, tmp_path, tmp_path, {"backend": '"ray"'})
    monkeypatch.undo()
    env = seen["env"]
    assert all(env.get(name) == "1" for name in OFFLINE_VARIABLES)
    child = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["True", "True"]
