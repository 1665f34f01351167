"""The source groups of a text collection, kept on disk: :func:`fl.data.sources.containment_groups` of SST-2's
67,000 phrases costs about 1.5 s, paid by every process that loads the data (every run of a sweep, every node
process) until this cache. Keyed by the texts' content, so any change of the texts computes them again.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fl.data import sources
from fl.reporting.results import write_atomic

#: Part of every key: bump it when containment_groups changes what it returns.
VERSION = "containment-groups-v1"

log = logging.getLogger(__name__)


def folder() -> Path:
    """``$SANITAS_CACHE_DIR/groups``, else ``~/.cache/sanitas/groups`` (the embedding cache's default place)."""
    return Path(os.environ.get("SANITAS_CACHE_DIR") or "~/.cache/sanitas").expanduser() / "groups"


def key(texts: Sequence[str]) -> str:
    """SHA-256 of the texts (in order, length-prefixed) and :data:`VERSION`."""
    h = hashlib.sha256(VERSION.encode() + b"\0")
    for t in texts:
        raw = t.encode()
        h.update(b"%d:" % len(raw) + raw)
    return h.hexdigest()


def containment_groups(texts: Sequence[str]) -> np.ndarray:
    """:func:`fl.data.sources.containment_groups` of ``texts``, read from the cache when an entry for exactly
    these texts passes its checksum and shape checks (else computed and stored, atomically).

    The entry's integrity check is written here rather than with :mod:`fl.encoding.cache_files` (which the
    data layer may not import): the groups and the SHA-256 of their bytes; the file is replaced atomically
    (:func:`fl.reporting.results.write_atomic`)."""
    path = folder() / f"{key(texts)}.npz"
    if path.is_file():
        groups = _read(path, len(texts))
        if groups is not None:
            return groups
    groups = np.asarray(sources.containment_groups(texts), dtype=np.int64)
    _write(path, groups)
    return groups


def _digest(groups: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(groups, dtype="<i8").tobytes()).hexdigest()


def _read(path: Path, n: int) -> np.ndarray | None:
    try:
        with np.load(path, allow_pickle=False) as f:
            groups, stored = np.asarray(f["groups"]), str(f["sha256"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
        log.warning("cache entry %s discarded (unreadable: %s); recomputing it", path, type(err).__name__)
        return None
    if groups.shape != (n,) or groups.dtype != np.int64 or stored != _digest(groups) or bool((groups < 0).any()):
        log.warning("cache entry %s discarded (checksum, shape or values); recomputing it", path)
        return None
    return groups


def _write(path: Path, groups: np.ndarray) -> None:
    """The entry, replaced all at once (a reader never sees a partial file), readable by every user of a shared
    cache."""
    buffer = io.BytesIO()
    np.savez(buffer, groups=groups, sha256=np.asarray(_digest(groups)))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buffer.getvalue())
    os.chmod(path, 0o644)
