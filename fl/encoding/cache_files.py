"""Checked, atomic cache files: an entry on disk is either complete and verified, or not used.

Sanitas caches work that is slow to redo (embeddings, word-level rewrites, the
document level's public setup) under ``<cache-dir>``. Several processes (two
runs, the Ray workers of one run) read and write these folders at once, and a
file may be cut short (a killed writer, a full disk) or altered afterwards. Two
helpers make the cache files trustworthy:

* :func:`atomic_write` writes a file under a temporary name in the same folder,
  fsyncs it and renames it into place (``os.replace``), so a reader sees the old
  file, the new file or no file, never a partial one, and concurrent writers of
  one path cannot interleave (the last complete file wins).
* :func:`seal` adds to an entry (a mapping of arrays, tensors, state dicts and
  strings) the SHA-256 of its canonical content; :func:`unseal` recomputes it
  on read. A caller discards an entry whose checksum does not match, logs a
  warning (:func:`discarded`) and recomputes it.

The checksum detects truncation and accidental or naive changes; it is not a
signature (whoever can write the cache can also recompute a checksum).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

log = logging.getLogger(__name__)

CHECKSUM_KEY = "sha256"  # name of the checksum inside a sealed entry


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Create or replace ``path`` atomically with what ``write`` writes to a binary file object.

    Guarantees: a reader never sees a partial file at ``path``; concurrent writers each
    write their own temporary file and the last complete one wins; a writer killed midway
    leaves only a hidden ``.<name>.*.tmp`` file, which no reader looks at; the data are on
    disk (fsync) before the rename. On an error the temporary file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Same folder as the target: os.replace is atomic only within one file system.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())  # else a crash after the rename can leave an empty file
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the entry from other users of a shared cache
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def content_digest(entry: Mapping[str, Any]) -> str:
    """Hex SHA-256 of ``entry``: names (sorted), types, dtypes, shapes and bytes of every value.

    Values may be NumPy arrays, tensors (on any device), nested mappings (state dicts),
    strings, bytes, numbers, booleans or ``None``. Equal content gives an equal digest
    whatever the key order, and a save/load round trip (``np.savez``, ``torch.save``)
    keeps it.
    """
    h = hashlib.sha256(b"sanitas-cache-entry-v1\0")
    _feed(h, entry)
    return h.hexdigest()


def _feed(h: Any, value: Any) -> None:
    if isinstance(value, Mapping):
        h.update(b"M%d\0" % len(value))
        for name in sorted(value, key=str):
            raw = str(name).encode()
            h.update(b"%d:" % len(raw) + raw)
            _feed(h, value[name])
    elif isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}\0".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())  # any dtype, bfloat16 included
    elif isinstance(value, np.ndarray | np.generic):
        a = np.ascontiguousarray(value)
        h.update(f"A{a.dtype.str}{a.shape}\0".encode())
        h.update(a.tobytes())
    elif value is None or isinstance(value, str | bytes | int | float | bool):
        h.update(f"S{type(value).__name__}:{value!r}\0".encode())
    else:
        raise TypeError(f"cannot checksum a {type(value).__name__} in a cache entry")


def seal(entry: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` plus its checksum under :data:`CHECKSUM_KEY` (a hex string), ready to save."""
    if CHECKSUM_KEY in entry:
        raise ValueError(f"{CHECKSUM_KEY!r} is reserved for the checksum")
    return {**entry, CHECKSUM_KEY: content_digest(entry)}


def unseal(saved: Mapping[str, Any], where: Path | str) -> tuple[dict[str, Any], bool] | None:
    """The entry of a loaded file without its checksum, and whether a checksum vouched for it.

    ``(entry, True)``: the stored checksum matches the content. ``(entry, False)``: the file
    predates checksums (the caller must check its structure itself). ``None``: the checksum
    does not match; a warning has been logged and the entry must not be used.
    """
    entry = {k: v for k, v in saved.items() if k != CHECKSUM_KEY}
    if CHECKSUM_KEY not in saved:
        return entry, False
    stored = saved[CHECKSUM_KEY]
    if isinstance(stored, np.ndarray):  # np.savez stores the string as a 0-d array
        stored = stored.item() if stored.shape == () else None
    if not isinstance(stored, str) or stored != content_digest(entry):
        discarded(where, "checksum mismatch")
        return None
    return entry, True


def discarded(where: Path | str, reason: str) -> None:
    """Log that the cache entry ``where`` is not used (``reason``) and will be recomputed."""
    log.warning("cache entry %s discarded (%s); recomputing it", where, reason)


__all__ = ["CHECKSUM_KEY", "atomic_write", "content_digest", "discarded", "seal", "unseal"]
