"""Whether a folder a run or a command will write into can be written, asked of the file system itself.

``os.access`` is not the answer: as root it says yes where a read-only file system, an immutable folder
(``chattr +i``) or a read-only bind mount still refuses the write. The probe creates a temporary file in
the folder (or, when the folder does not exist yet, in its nearest existing ancestor, where it would be
created) and removes it: nothing is left behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def nearest_existing(path: Path) -> Path:
    """``path`` itself when it exists, else its nearest existing ancestor (``.`` for a relative path)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def write_problem(folder: str | Path) -> tuple[Path, str] | None:
    """None when a file can be written into ``folder`` (created where it does not exist yet); else the
    existing folder that refused the write and why (``"Permission denied"``, ``"Read-only file system"``,
    ``"Operation not permitted"``, ...). A ``folder`` under a file is not asked here (the callers say so)."""
    probe_in = nearest_existing(Path(folder).expanduser())
    if not probe_in.is_dir():
        return None
    try:
        fd, name = tempfile.mkstemp(prefix=".sanitas-write-check-", dir=probe_in)
    except OSError as err:
        return probe_in, err.strerror or type(err).__name__
    os.close(fd)
    try:
        os.unlink(name)
    except OSError:  # written but not removable (a sticky folder of another user): still writable
        pass
    return None
