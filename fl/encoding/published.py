"""A published encoder folder and its digest: what names a public-tuned encoder, checked wherever it is read.

A *published* encoder (a folder under ``<cache-dir>/encoders/<digest>`` with a :data:`MANIFEST`,
``fl.encoding.public_tuning``) is named by :func:`folder_digest`, the SHA-256 of every file in it
(weights, tokenizer, pooling and model configuration, ``modules.json``...), and is checked against that
digest (:func:`check_published`) before it is loaded, and before its embedding-cache identity or its
dimension is read (``fl.encoding.encoder``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

#: The manifest of a published (public-tuned) encoder folder, ``fl.encoding.public_tuning``: its digest
#: (:func:`folder_digest`), each file's length and SHA-256, and what was done. The one file the digest leaves out.
MANIFEST = "sanitas-encoder.json"
_FOLDER_TAG = b"sanitas-encoder-folder-v2\0"  # v1 was the SHA-256 of the weights only
_DIGEST = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20
#: What the file system says of each file of a folder (:func:`folder_fingerprint`).
Fingerprint = tuple[tuple[str, int, int, int, int, int], ...]


def is_digest(text: object) -> bool:
    """Whether ``text`` is a digest as Sanitas writes them: 64 lowercase hex digits."""
    return isinstance(text, str) and _DIGEST.fullmatch(text) is not None


def folder_files(folder: Path, follow_links: bool = False) -> list[tuple[str, Path]]:
    """Every file under ``folder`` but a top-level :data:`MANIFEST`, as (relative POSIX path, path),
    in the canonical order of :func:`folder_digest` (by the path's UTF-8 bytes).

    ``ValueError`` on anything but regular files and folders: a published folder is
    self-contained, so a symbolic link (whose target could change without the folder
    changing) is refused, unless ``follow_links`` (a base encoder in a hub cache, whose
    files are links into its blob store)."""
    folder = Path(folder)
    out: list[tuple[str, Path]] = []

    def walk(here: Path, prefix: str) -> None:
        with os.scandir(here) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if rel == MANIFEST:
                    continue
                if entry.is_symlink() and not follow_links:
                    raise ValueError(f"{folder / rel} is a symbolic link; a published encoder holds plain files only")
                mode = os.stat(entry.path).st_mode
                if stat.S_ISDIR(mode):
                    walk(Path(entry.path), rel + "/")
                elif stat.S_ISREG(mode):
                    out.append((rel, Path(entry.path)))
                else:
                    raise ValueError(f"{folder / rel} is not a regular file")

    walk(folder, "")
    return sorted(out, key=lambda item: item[0].encode("utf-8"))


def folder_fingerprint(folder: Path, follow_links: bool = False) -> Fingerprint:
    """What the file system says of every file of ``folder`` (path, size, inode, device, mtime, ctime):
    any write, replacement, addition, removal or renaming changes it, without reading the files."""
    out = []
    for rel, path in folder_files(folder, follow_links):
        st = path.stat()
        out.append((rel, st.st_size, st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


def file_sha256(path: Path) -> tuple[int, str]:
    """The length and the SHA-256 (hex) of the file ``path``, read once."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def folder_digest(folder: Path, follow_links: bool = False) -> tuple[str, dict[str, dict[str, int | str]]]:
    """The digest of an encoder folder and, per file, its length and SHA-256.

    The digest is the SHA-256 of a version tag and, for every file of the folder
    (:func:`folder_files`: all of them, in every subfolder, but the top-level :data:`MANIFEST`),
    in the canonical order (by relative path), the length of its relative POSIX path, the
    path, the file's length and the SHA-256 of its bytes. Two folders have the same digest
    exactly when they hold the same files, under the same names, with the same bytes: a
    changed byte of the tokenizer, a pooling configuration edited, a file added, removed or
    renamed all change it."""
    h = hashlib.sha256(_FOLDER_TAG)
    files: dict[str, dict[str, int | str]] = {}
    for rel, path in folder_files(folder, follow_links):
        size, sha = file_sha256(path)
        raw = rel.encode("utf-8")
        h.update(len(raw).to_bytes(8, "little") + raw + size.to_bytes(8, "little") + bytes.fromhex(sha))
        files[rel] = {"bytes": size, "sha256": sha}
    return h.hexdigest(), files


_CHECKED: dict[str, tuple[str, Fingerprint]] = {}  # folder -> (digest, fingerprint) this process hashed


def _manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a published encoder folder; ``ValueError`` when it is missing or unreadable."""
    try:
        manifest = json.loads((Path(folder) / MANIFEST).read_text())
    except FileNotFoundError:
        raise ValueError(f"the encoder folder {folder} is not a published encoder (no {MANIFEST})") from None
    except (OSError, ValueError) as err:
        raise ValueError(f"the published encoder {folder} has an unreadable {MANIFEST}: {err}") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"the published encoder {folder} has an unreadable {MANIFEST}: not an object")
    return manifest


def _changed_files(folder: Path, files: dict[str, dict[str, int | str]]) -> str:
    """The files of ``folder`` that differ from its manifest's list (a hint for the error message)."""
    try:
        listed = _manifest(folder).get("files")
    except ValueError:
        return ""
    if not isinstance(listed, dict):
        return ""
    changed = sorted(k for k in set(listed) | set(files) if listed.get(k) != files.get(k))
    return f" (files that differ from its manifest's list: {', '.join(changed[:8])})" if changed else ""


def published_digest(path: Path) -> str | None:
    """The digest a published encoder folder must have: its name when that is a digest (a folder
    ``<cache-dir>/encoders/<digest>``), else its manifest's; ``None`` for a folder that is
    neither (an ordinary sentence-transformers folder) and for a name that is not a folder."""
    path = Path(path)
    if not path.is_dir():
        return None
    if is_digest(path.name):
        return path.name
    if not (path / MANIFEST).exists():
        return None
    digest = _manifest(path).get("digest")
    if not is_digest(digest):
        raise ValueError(f"the published encoder {path} names no digest in its {MANIFEST}: {digest!r}")
    return str(digest)


def check_published(folder: Path, digest: str) -> Fingerprint:
    """Check that the files of the published encoder ``folder`` are those of ``digest``; return their
    :func:`folder_fingerprint` as checked.

    The files on disk are hashed (:func:`folder_digest`) unless this process already hashed
    them with the same fingerprint (nothing written, replaced, added or removed since). The
    folder's manifest must name ``digest`` too (the embedding cache is keyed by it).
    ``ValueError`` naming the expected and the found digest (and the files that differ from the
    manifest's list) when they do not match."""
    folder = Path(folder)
    if not is_digest(digest):
        raise ValueError(f"not an encoder digest: {digest!r}")
    named = _manifest(folder).get("digest")
    key = str(folder.resolve())
    before = folder_fingerprint(folder)
    if _CHECKED.get(key) == (digest, before):
        return before
    found, files = folder_digest(folder)
    if found != digest:
        raise ValueError(
            f"the published encoder {folder} does not match its digest: expected {digest}, "
            f"found {found}{_changed_files(folder, files)}"
        )
    if named != digest:
        raise ValueError(f"the published encoder {folder} has the digest {digest}, its {MANIFEST} names {named!r}")
    if folder_fingerprint(folder) != before:
        raise ValueError(f"the published encoder {folder} changed while it was being checked")
    _CHECKED[key] = (digest, before)
    return before
