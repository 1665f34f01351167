"""What the command-line refusal tests share: handlers that fail the test when reached, and a folder that refuses
writes as a read-only mount does."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest


def block_handlers(monkeypatch: pytest.MonkeyPatch, what: str = "the bad input") -> None:
    """Every ``sanitas`` subcommand's handler fails the test: reaching one is doing work."""
    from simulations import cli

    for module in cli.SUBCOMMANDS:
        monkeypatch.setattr(module, "handle", lambda args: pytest.fail(f"{what} reached the handler"))


def refuse_writes_in(monkeypatch: pytest.MonkeyPatch, folder: Path, code: int = errno.EACCES) -> None:
    """Writing a file into ``folder`` fails with ``code`` (``tempfile.mkstemp`` there raises it, as on a read-only
    mount or an immutable folder, which root's ``os.access`` does not see); everywhere else it works."""
    real = tempfile.mkstemp

    def mkstemp(*args: object, dir: object = None, **kwargs: object) -> tuple[int, str]:
        if dir is not None and Path(str(dir)) == folder:
            raise OSError(code, os.strerror(code))  # EACCES: a PermissionError, as the OS raises it
        return real(*args, dir=dir, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
