"""The on-disk embedding cache: content-addressed shards whose every row is checked when read.

The key of a text is SHA-256(model id, text) (``fl.encoding.encoder``), so an epsilon sweep, a second run
or another node holding the same texts encodes nothing again. Each encode call that misses writes one new
shard (``<name>.emb.npy`` + ``<name>.keys.npy``, each file replaced atomically, keys last), so concurrent
Ray workers and runs never see a half-written shard and never need a lock. Every row carries a checksum of
(key, vector) and every file its length in its header; both are checked on read, and an entry that fails
is discarded and encoded again (:class:`EmbeddingCache`).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from itertools import repeat
from pathlib import Path

import numpy as np

from fl.encoding.cache_files import atomic_write, discarded

log = logging.getLogger("fl.encoding.encoder")  # the name its messages have always had


def text_keys(model: str, texts: Sequence[str]) -> np.ndarray:
    """The cache key of each text, uint8 [n, 32]: SHA-256(model id, NUL, the text as UTF-8)."""
    prefix = model.encode() + b"\0"
    out = np.empty((len(texts), 32), dtype=np.uint8)
    for i, text in enumerate(texts):
        out[i] = np.frombuffer(hashlib.sha256(prefix + text.encode("utf-8")).digest(), dtype=np.uint8)
    return out


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
            shard_keys = list(map(bytes, digests))
            distinct = set(shard_keys)
            if len(distinct) == len(shard_keys) and index.keys().isdisjoint(distinct):  # all new: in bulk
                index.update(zip(shard_keys, zip(repeat(shard), range(len(shard_keys)))))
                continue
            for row, key in enumerate(shard_keys):
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

    def _checked_block(
        self, shard: str, rows: np.ndarray, keys: list[bytes]
    ) -> tuple[np.ndarray | None, np.ndarray, str]:
        """The vectors at ``rows`` of ``shard`` (stored under ``keys``) as one block (``None`` when the shard
        cannot be read), which of them pass the checks, and the reason of the last failure."""
        try:
            block = np.asarray(self._vectors(shard)[rows])  # one copy out of the map
        except (OSError, ValueError) as err:
            return None, np.zeros(len(rows), dtype=bool), str(err)
        ok = np.isfinite(block).all(axis=1)
        reason = "" if ok.all() else "non-finite vector"
        sums = self._sums[shard]
        if sums is not None:
            expected = sums[rows].tobytes()
            block = np.ascontiguousarray(block)
            raw, width = memoryview(block.data).cast("B"), block.shape[1] * 4  # C-ordered '<f4', no copy
            for j, key in enumerate(keys):
                h = _ROW_HASH.copy()
                h.update(key)
                h.update(raw[j * width : (j + 1) * width])
                if h.digest() != expected[32 * j : 32 * (j + 1)]:
                    ok[j] = False
                    reason = "checksum mismatch"
        return block, ok, reason

    @classmethod
    def shared(cls, root: Path, model: str) -> EmbeddingCache:
        """One instance per (root, model) and process: the key index is read once,
        then only new shards are added (a simulation builds thousands of cohorts)."""
        key = (str(Path(root).resolve()), model)
        if key not in _CACHES:
            _CACHES[key] = cls(root, model)
        return _CACHES[key]

    def missing(self, texts: Sequence[str]) -> list[int]:
        """The positions of ``texts`` whose key the cache does not hold (keys only: no vector is read or
        checked, so a held entry may still fail :meth:`lookup`'s checks and be encoded again there)."""
        self._refresh()
        index = self._index
        return [i for i, key in enumerate(text_keys(self.model, texts)) if key.tobytes() not in index]

    def lookup(self, texts: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """Digests of ``texts`` and the cached vector of each (``None`` on a miss): :meth:`lookup_table`'s
        answer as one vector per text."""
        digests, table, hit = self.lookup_table(texts)
        return digests, [table[i] if table is not None and hit[i] else None for i in range(len(texts))]

    def lookup_table(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """Digests of ``texts``, their cached vectors as one float32 ``[n, d]`` table (``None`` when no text
        hits; a missed text's row is undefined) and which texts hit (bool ``[n]``).

        Every vector marked as hit passed the checks of the class docstring; an entry that fails them is
        logged (one warning per shard and call) and counted as a miss. Each shard's hits are copied into
        the table as one block: no per-text array (68,000 texts in a node's cohort)."""
        digests = text_keys(self.model, texts)
        self._refresh()
        raw = digests.tobytes()
        n = len(texts)
        hit = np.zeros(n, dtype=bool)
        table: np.ndarray | None = None
        failed: dict[str, tuple[int, str]] = {}  # shard -> (entries discarded, why)
        pending: list[int] = list(range(n))
        while pending:  # a second pass tries the spare copies of entries that failed
            by_shard: dict[str, tuple[list[int], list[int]]] = {}
            index = self._index
            for i in pending:
                found = index.get(raw[32 * i : 32 * i + 32])
                if found is not None:
                    where, rows_of_shard = by_shard.setdefault(found[0], ([], []))
                    where.append(i)
                    rows_of_shard.append(found[1])
            pending = []
            for shard, (positions, row_list) in by_shard.items():
                at, rows = np.asarray(positions, dtype=np.int64), np.asarray(row_list, dtype=np.int64)
                keys = [raw[32 * i : 32 * i + 32] for i in positions]
                block, ok, reason = self._checked_block(shard, rows, keys)
                if block is not None and ok.any():
                    if table is None:
                        table = np.empty((n, block.shape[1]), dtype=np.float32)
                    if ok.all():
                        table[at], hit[at] = block, True
                    else:
                        table[at[ok]], hit[at[ok]] = block[ok], True
                bad = np.flatnonzero(~ok)
                for j in bad.tolist():
                    self._drop(keys[j], (shard, int(rows[j])))
                    if keys[j] in self._index:
                        pending.append(positions[j])
                if len(bad):
                    failed[shard] = (failed.get(shard, (0, ""))[0] + len(bad), reason)
        for shard, (count, reason) in failed.items():
            discarded(self.folder / shard, f"{count} entr{'y' if count == 1 else 'ies'}: {reason}")
        return digests, table, hit

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


#: One cache instance (and its index) per (root, model) in this process (:meth:`EmbeddingCache.shared`).
_CACHES: dict[tuple[str, str], EmbeddingCache] = {}
