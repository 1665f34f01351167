"""Files that cannot lie: cache entries are checked on read, bad ones are recomputed, and
concurrent writers never corrupt a cache; a results folder is never overwritten.

The embedding cache is exercised through :func:`fl.encoding.encoder.encode` with a tiny deterministic
fake encoder (the vector of a text is a function of the text), so "recomputed" can be checked
exactly: every returned vector must equal the fake's, never the tampered one.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing as mp
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fl import config
from fl.encoding import cache_files, embedding_cache, encoder
from fl.encoding.documents import SentenceDocs
from fl.levels.document import setup as document_level
from fl.levels.document.recoder import Recoder, RecoderTraining
from fl.levels.spec import LevelSpec
from fl.levels.word import rewrite
from fl.reporting.results import RunWriter

DIM = 8
FAKE = "fake-encoder"  # not a folder: model_id(FAKE) == FAKE
TEXTS = [f"sentence number {i} ." for i in range(6)]


def fake_vector(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


class FakeModel:
    """Stands in for the sentence encoder; records which texts it was asked to encode."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def encode(self, texts: list[str], **_: object) -> np.ndarray:
        self.calls.extend(texts)
        return np.stack([fake_vector(t) for t in texts])


def _install_fake() -> FakeModel:
    model = FakeModel()
    encoder.load_encoder = lambda *args, **kwargs: model  # type: ignore[assignment]
    return model


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeModel:
    model = FakeModel()
    monkeypatch.setattr(encoder, "load_encoder", lambda *args, **kwargs: model)
    monkeypatch.setattr(embedding_cache, "_CACHES", {})  # no instance (and index) shared between tests
    return model


def _encode(texts: list[str], root: Path) -> np.ndarray:
    return encoder.encode(texts, FAKE, root, progress=False)


def _fresh(texts: list[str]) -> np.ndarray:
    return np.stack([fake_vector(t) for t in texts])


def _new_process() -> None:
    """Forget every in-process cache instance, as a new run would start."""
    embedding_cache._CACHES.clear()


def _shard_files(root: Path) -> tuple[Path, Path]:
    (keys,) = root.rglob("*.keys.npy")
    return keys, keys.with_name(keys.name.replace(".keys.npy", ".emb.npy"))


def _discards(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "discarded" in r.getMessage()]


# ----------------------------------------------------------------- embedding cache


def test_checked_shards_round_trip_without_encoding_again(tmp_path: Path, fake: FakeModel) -> None:
    first = _encode(TEXTS, tmp_path)
    assert np.array_equal(first, _fresh(TEXTS)) and sorted(fake.calls) == sorted(TEXTS)
    keys, _ = _shard_files(tmp_path)
    assert np.load(keys).dtype == encoder.KEYS_DTYPE  # key and checksum per row
    fake.calls.clear()
    _new_process()
    assert np.array_equal(_encode(TEXTS[::-1], tmp_path), first[::-1]) and fake.calls == []
    assert not list(tmp_path.rglob("*.tmp"))


def _truncate(path: Path, keep: int = -7) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:keep])


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


def _resave(path: Path, change: Callable[[np.ndarray], None]) -> None:
    """Rewrite a shard file as a well-formed .npy holding changed content."""
    array = np.load(path)
    change(array)
    np.save(path, array)


def _scale_first_vector(a: np.ndarray) -> None:
    a[0] *= 1.001


def _swap_first_vectors(a: np.ndarray) -> None:
    a[[0, 1]] = a[[1, 0]]


def _flip_first_checksum(a: np.ndarray) -> None:
    a["sha256"][0, 0] ^= 0xFF


TAMPERING: dict[str, tuple[str, Callable[[Path], None]]] = {
    "vectors truncated": ("emb", _truncate),
    "vectors extended": ("emb", lambda p: p.write_bytes(p.read_bytes() + b"\0" * 32)),
    "vectors emptied": ("emb", lambda p: p.write_bytes(b"")),
    "vectors file missing": ("emb", os.unlink),
    "keys truncated": ("keys", _truncate),
    "keys garbled": ("keys", lambda p: p.write_bytes(b"not an npy file")),
    "byte flipped in a vector": ("emb", _flip_last_byte),
    "vector changed and re-saved": ("emb", lambda p: _resave(p, _scale_first_vector)),
    "vectors swapped and re-saved": ("emb", lambda p: _resave(p, _swap_first_vectors)),
    "checksum changed and re-saved": ("keys", lambda p: _resave(p, _flip_first_checksum)),
    "vector set to NaN and re-saved": ("emb", lambda p: _resave(p, lambda a: a.__setitem__((0, 0), np.nan))),
}


@pytest.mark.parametrize("how", list(TAMPERING))
def test_a_damaged_shard_is_discarded_and_recomputed(
    tmp_path: Path, fake: FakeModel, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    _encode(TEXTS, tmp_path)
    which, damage = TAMPERING[how]
    keys, emb = _shard_files(tmp_path)
    damage(emb if which == "emb" else keys)
    fake.calls.clear()
    _new_process()
    with caplog.at_level(logging.WARNING):
        out = _encode(TEXTS, tmp_path)
    assert np.array_equal(out, _fresh(TEXTS))  # equal to a fresh computation: nothing damaged was used
    assert fake.calls, "the damaged entries must be encoded again"
    assert _discards(caplog), "a damaged entry is reported"
    # The recomputed entries were stored again: a later run encodes nothing.
    fake.calls.clear()
    _new_process()
    assert np.array_equal(_encode(TEXTS, tmp_path), _fresh(TEXTS)) and fake.calls == []


def test_only_the_damaged_entry_is_recomputed(tmp_path: Path, fake: FakeModel) -> None:
    _encode(TEXTS, tmp_path)
    _, emb = _shard_files(tmp_path)
    vectors = np.load(emb)
    row = 3
    vectors[row, 0] += 1.0
    np.save(emb, vectors)
    fake.calls.clear()
    _new_process()
    out = _encode(TEXTS, tmp_path)
    assert np.array_equal(out, _fresh(TEXTS))
    assert fake.calls == [sorted(TEXTS)[row]]  # a shard's rows follow the sorted unique texts


def test_damage_after_the_index_was_read_is_caught_in_the_same_process(tmp_path: Path, fake: FakeModel) -> None:
    _encode(TEXTS, tmp_path)  # this process has indexed the shard
    _, emb = _shard_files(tmp_path)
    _resave(emb, _scale_first_vector)
    fake.calls.clear()
    assert np.array_equal(_encode(TEXTS, tmp_path), _fresh(TEXTS)) and len(fake.calls) == 1


def _legacy_shard(root: Path, texts: list[str], vectors: np.ndarray, name: str = "legacy") -> Path:
    """A shard in the format written before checksums: uint8 [n, 32] keys, float32 [n, d] vectors."""
    cache = encoder.EmbeddingCache(root, encoder.model_id(FAKE))
    np.save(cache.folder / f"{name}.emb.npy", vectors.astype(np.float32))
    np.save(cache.folder / f"{name}.keys.npy", embedding_cache.text_keys(cache.model, texts))
    return cache.folder


def test_old_shards_are_read_after_their_shape_checks(tmp_path: Path, fake: FakeModel) -> None:
    _legacy_shard(tmp_path, TEXTS, _fresh(TEXTS))
    assert np.array_equal(_encode(TEXTS, tmp_path), _fresh(TEXTS)) and fake.calls == []


@pytest.mark.parametrize(
    "damage",
    ["truncated", "fewer vectors than keys", "NaN vector", "wrong dimension"],
)
def test_damaged_old_shards_are_recomputed(
    tmp_path: Path, fake: FakeModel, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    good = _legacy_shard(tmp_path, TEXTS[:2], _fresh(TEXTS[:2]), "good")  # sets the cache's dimension
    vectors = _fresh(TEXTS)
    if damage == "NaN vector":
        vectors[2, 1] = np.nan
    elif damage == "fewer vectors than keys":
        vectors = vectors[:-1]
    elif damage == "wrong dimension":
        vectors = np.hstack([vectors, vectors])
    folder = _legacy_shard(tmp_path, TEXTS, vectors, "zz-damaged")  # indexed after "good"
    assert folder == good
    if damage == "truncated":
        _truncate(folder / "zz-damaged.emb.npy")
    with caplog.at_level(logging.WARNING):
        out = _encode(TEXTS, tmp_path)
    assert np.array_equal(out, _fresh(TEXTS)) and fake.calls and _discards(caplog)


def test_a_checked_copy_wins_over_an_old_one(tmp_path: Path, fake: FakeModel) -> None:
    wrong = _fresh(TEXTS) + 1.0  # finite, well-shaped, wrong: an old shard cannot prove otherwise
    _legacy_shard(tmp_path, TEXTS, wrong)
    cache = encoder.EmbeddingCache(tmp_path, encoder.model_id(FAKE))
    cache.store(embedding_cache.text_keys(cache.model, TEXTS), _fresh(TEXTS))
    assert np.array_equal(_encode(TEXTS, tmp_path), _fresh(TEXTS)) and fake.calls == []


def test_a_spare_copy_is_used_when_the_first_fails(
    tmp_path: Path, fake: FakeModel, caplog: pytest.LogCaptureFixture
) -> None:
    cache = encoder.EmbeddingCache(tmp_path, encoder.model_id(FAKE))
    digests = embedding_cache.text_keys(cache.model, TEXTS)
    cache.store(digests, _fresh(TEXTS))
    cache.store(digests[:3], _fresh(TEXTS[:3]))  # a second checked copy of three entries
    shards = sorted(cache.folder.glob("*.emb.npy"))
    assert len(shards) == 2
    _resave(shards[0], lambda a: a.__setitem__((0, 0), 7.0))  # TEXTS[0] is bad in one shard
    _resave(shards[1], lambda a: a.__setitem__((1, 0), 7.0))  # TEXTS[1] in the other
    with caplog.at_level(logging.WARNING):
        out = _encode(TEXTS, tmp_path)
    assert np.array_equal(out, _fresh(TEXTS)) and fake.calls == []  # each found through its good copy
    assert len(_discards(caplog)) == 1  # the first copy tried of one of them failed


# ------------------------------------------------------------------ parallel writers

SHARED = [f"shared text {i}" for i in range(40)]  # every writer encodes these, in the same calls


def _writer(root: str, worker: int, barrier: mp.synchronize.Barrier, queue: mp.Queue, done: Any) -> None:
    """Encode overlapping and distinct texts in many small shards, checking each read back."""
    try:
        _install_fake()
        embedding_cache._CACHES.clear()
        encoder.STORE_EVERY = 3  # many shards, many renames racing on the same names
        own = [f"worker {worker} text {i}" for i in range(30)]
        overlap = [f"pair {worker // 2} text {i}" for i in range(30)]  # written by two workers
        barrier.wait()
        for start in range(0, 40, 8):
            for texts in (SHARED[start : start + 8], own[start : start + 8], overlap[start : start + 8]):
                if texts:
                    out = encoder.encode(texts, FAKE, Path(root), progress=False)
                    assert np.array_equal(out, _fresh(texts)), "a read-back vector differs"
        queue.put((worker, ""))
    except BaseException as err:  # report to the parent, which asserts
        queue.put((worker, repr(err)))
    finally:
        with done.get_lock():
            done.value += 1


def _reader(root: str, barrier: mp.synchronize.Barrier, queue: mp.Queue, done: Any, writers: int) -> None:
    """Look up every text again and again while the writers write: never a wrong vector, never a damaged file.

    It reads until every writer has finished (at least 60 times), then once more: on a slow
    machine 60 lookups can all end before the first shard is renamed into place (CI saw
    "ok 0"), so a fixed count could not promise that the reader ever saw a written entry.
    """
    try:
        discards: list[str] = []

        class Count(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if record.levelno >= logging.WARNING:
                    discards.append(record.getMessage())

        logging.getLogger("fl").addHandler(Count())
        texts = SHARED + [f"worker {w} text {i}" for w in range(4) for i in range(30)]
        barrier.wait()
        hits = 0
        rounds = 0
        while True:
            finished = done.value >= writers  # read before the lookup: the last pass starts after all writes
            rounds += 1
            embedding_cache._CACHES.clear()  # also index from scratch, as a new run would
            cache = encoder.EmbeddingCache.shared(Path(root), FAKE)
            _, found = cache.lookup(texts)
            for text, vector in zip(texts, found, strict=True):
                if vector is not None:
                    hits += 1
                    assert np.array_equal(vector, fake_vector(text)), f"wrong vector for {text!r}"
            if finished and rounds >= 60:
                break
        assert not discards, discards
        queue.put(("reader", f"ok {hits}"))
    except BaseException as err:
        queue.put(("reader", repr(err)))


def _context() -> mp.context.BaseContext:
    # fork starts in milliseconds and keeps this test fast; the workers use NumPy only.
    return mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")


def test_parallel_writers_never_corrupt_the_cache(tmp_path: Path, fake: FakeModel) -> None:
    ctx = _context()
    writers = 4
    barrier = ctx.Barrier(writers + 1)
    queue = ctx.Queue()
    done = ctx.Value("i", 0)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, barrier, queue, done)) for w in range(writers)]
    procs.append(ctx.Process(target=_reader, args=(str(tmp_path), barrier, queue, done, writers)))
    for p in procs:
        p.start()
    reports = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert all(reports[w] == "" for w in range(writers)), reports
    assert reports["reader"].startswith("ok") and int(reports["reader"][3:]) > 0, reports["reader"]  # it read
    # Every entry reads back correct in a new process, and nothing is left half-written.
    everything = (
        SHARED
        + [f"worker {w} text {i}" for w in range(writers) for i in range(30)]
        + [f"pair {w // 2} text {i}" for w in range(writers) for i in range(30)]
    )
    _new_process()
    _, found = encoder.EmbeddingCache.shared(tmp_path, FAKE).lookup(everything)
    assert all(v is not None and np.array_equal(v, fake_vector(t)) for t, v in zip(everything, found, strict=True))
    assert not list(tmp_path.rglob("*.tmp"))


def _sealed_writer(path: str, worker: int, barrier: mp.synchronize.Barrier, queue: mp.Queue) -> None:
    try:
        barrier.wait()
        for i in range(30):
            out = rewrite.RewrittenSplit(torch.from_numpy(_fresh(TEXTS)), np.arange(len(TEXTS), dtype=np.int64) + i)
            rewrite._save(Path(path), out)
            back = rewrite._load(Path(path), len(TEXTS))
            assert back is not None and np.array_equal(back.emb.numpy(), _fresh(TEXTS))
        queue.put((worker, ""))
    except BaseException as err:
        queue.put((worker, repr(err)))


def test_parallel_writers_of_one_rewrite_file(tmp_path: Path) -> None:
    """Several nodes racing on one key: every read finds a complete, checked file."""
    ctx = _context()
    barrier, queue = ctx.Barrier(3), ctx.Queue()
    path = tmp_path / "rewrites" / "key.npz"
    procs = [ctx.Process(target=_sealed_writer, args=(str(path), w, barrier, queue)) for w in range(3)]
    for p in procs:
        p.start()
    reports = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert all(r == "" for r in reports.values()), reports
    assert rewrite._load(path, len(TEXTS)) is not None and not list(path.parent.glob("*.tmp"))


# ------------------------------------------------------------------- rewrite cache


def _split() -> rewrite.RewrittenSplit:
    return rewrite.RewrittenSplit(torch.from_numpy(_fresh(TEXTS[:4])), np.array([6, 4, 4, 6], dtype=np.int64))


def _resave_npz(path: Path, **changes: np.ndarray) -> None:
    with np.load(path) as z:
        members = {name: z[name] for name in z.files}
    members.update(changes)
    np.savez(path, **members)


REWRITE_DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": _truncate,
    "emptied": lambda p: p.write_bytes(b""),
    "byte flipped": lambda p: p.write_bytes(p.read_bytes().replace(_fresh(TEXTS[:1]).tobytes()[:4], b"\0\0\0\0", 1)),
    "vector changed, checksum kept": lambda p: _resave_npz(p, emb=_fresh(TEXTS[:4]) * 2),
    "word counts changed, checksum kept": lambda p: _resave_npz(p, num_words=np.array([6, 4, 4, 7])),
    "checksum changed": lambda p: _resave_npz(p, sha256=np.array("0" * 64)),
    "wrong number of documents": lambda p: _resave_npz(p, n=np.array(5)),
}


@pytest.mark.parametrize("how", list(REWRITE_DAMAGE))
def test_a_damaged_rewrite_file_is_discarded(tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str) -> None:
    path = tmp_path / "rewrites" / "k.npz"
    rewrite._save(path, _split())
    loaded = rewrite._load(path, 4)
    assert loaded is not None and torch.equal(loaded.emb, _split().emb)
    REWRITE_DAMAGE[how](path)
    with caplog.at_level(logging.WARNING):
        assert rewrite._load(path, 4) is None
    assert _discards(caplog)


def test_old_rewrite_files_are_read_after_their_shape_checks(tmp_path: Path) -> None:
    path = tmp_path / "old.npz"
    split = _split()
    np.savez(path, emb=split.emb.numpy(), num_words=split.num_words, n=np.array(4))  # no checksum
    loaded = rewrite._load(path, 4)
    assert loaded is not None and torch.equal(loaded.emb, split.emb)
    np.savez(path, emb=split.emb.numpy()[:3], num_words=split.num_words, n=np.array(4))
    assert rewrite._load(path, 4) is None


def test_rewritten_split_recomputes_a_damaged_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config.resolve(
        {
            "word-mechanism": "cmp",
            "word-epsilon": 30.0,
            "sentence-mechanism": "none",
            "cache-dir": str(tmp_path),
            "noise-seed": 0,
        }
    )
    calls: list[int] = []

    def fake_rewrite(spec: object, texts: list[str], seed: int, purpose: str) -> rewrite.RewrittenSplit:
        calls.append(seed)
        return _split()

    monkeypatch.setattr(rewrite, "_rewrite_and_embed", fake_rewrite)
    monkeypatch.setattr(rewrite, "_MEMORY", {})
    first = rewrite.rewritten_split(LevelSpec.from_config(cfg), TEXTS[:4], "train", (0, 1), 0, 7)
    (path,) = (tmp_path / "rewrites").glob("*.npz")
    rewrite._MEMORY.clear()
    assert torch.equal(
        rewrite.rewritten_split(LevelSpec.from_config(cfg), TEXTS[:4], "train", (0, 1), 0, 7).emb, first.emb
    )
    assert calls == [7]  # read back, not recomputed
    _resave_npz(path, emb=_fresh(TEXTS[:4]) * 2)
    rewrite._MEMORY.clear()
    again = rewrite.rewritten_split(LevelSpec.from_config(cfg), TEXTS[:4], "train", (0, 1), 0, 7)
    assert torch.equal(again.emb, first.emb) and calls == [7, 7]


# ------------------------------------------------------------- document-level setup


def test_document_setup_cache_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    gen = torch.Generator().manual_seed(0)
    k = torch.randint(2, 8, (60,), generator=gen)
    labels = torch.randint(0, 2, (60,), generator=gen)
    emb = 3.0 * torch.randn(2, 8, generator=gen)[labels.repeat_interleave(k)] + torch.randn(
        int(k.sum()), 8, generator=gen
    )
    public = SentenceDocs(emb.float(), np.concatenate([[0], np.cumsum(k.numpy())]).astype(np.int64))
    cfg = config.resolve({"cache-dir": str(tmp_path), "candidate-min-sentences": 2})
    trained: list[int] = []

    def fake_train(public: SentenceDocs, labels: torch.Tensor, num_classes: int, **kwargs: object) -> RecoderTraining:
        """Deterministic untrained models (training itself is tested in test_document_level)."""
        trained.append(1)
        torch.manual_seed(int(kwargs["seed"]))  # type: ignore[call-overload]
        d = public.dim
        classifier = torch.nn.Sequential(torch.nn.Linear(d, 256), torch.nn.ReLU(), torch.nn.Linear(256, num_classes))
        return RecoderTraining(Recoder(d), classifier, {"validation_rows": [0, 1, 2], "best_epoch": 1})

    monkeypatch.setattr(document_level, "train_recoder", fake_train)
    first = document_level._public_recoder(cfg, public, labels, 2, "cpu", False)
    (path,) = (tmp_path / "document-setup").glob("*.pt")
    second = document_level._public_recoder(cfg, public, labels, 2, "cpu", False)
    assert len(trained) == 1 and torch.equal(second[4], first[4]) and np.array_equal(second[3], first[3])
    # Candidates altered with the checksum kept: refused, rebuilt, and equal to the first build.
    saved = torch.load(path, weights_only=True)
    saved["candidates"] = saved["candidates"] + 1.0
    torch.save(saved, path)
    with caplog.at_level(logging.WARNING):
        third = document_level._public_recoder(cfg, public, labels, 2, "cpu", False)
    assert len(trained) == 2 and torch.equal(third[4], first[4]) and _discards(caplog)
    _truncate(path, 100)
    document_level._public_recoder(cfg, public, labels, 2, "cpu", False)
    assert len(trained) == 3
    # A file from before checksums is read if it fits the models.
    legacy = {k: v for k, v in torch.load(path, weights_only=True).items() if k != cache_files.CHECKSUM_KEY}
    torch.save(legacy, path)
    document_level._public_recoder(cfg, public, labels, 2, "cpu", False)
    assert len(trained) == 3


# ------------------------------------------------------------------ word-list cache


def test_word_list_cache_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mechanisms.words import vocab

    words = ["the", "a", "film", "café", "good"]
    index = tmp_path / "index.parquet"
    pq.write_table(pa.table({"index": words}), index)
    monkeypatch.setenv("SANITAS_CACHE_DIR", str(tmp_path / "cache"))
    parsed: list[int] = []
    real_read = pq.read_table

    def counting_read(*args: object, **kwargs: object) -> object:
        parsed.append(1)
        return real_read(*args, **kwargs)

    monkeypatch.setattr(pq, "read_table", counting_read)
    assert vocab._glove_words(index, "t", len(words)) == words and len(parsed) == 1
    (cached,) = (tmp_path / "cache" / "words").glob("*.vocab.txt")
    assert vocab._glove_words(index, "t", len(words)) == words and len(parsed) == 1  # from the cache
    for damage in (
        lambda p: p.write_bytes(p.read_bytes().replace(b"film", b"flim")),  # same length, one word altered
        lambda p: _truncate(p, -3),
        lambda p: p.write_bytes(b"\n".join(w.encode() for w in words)),  # no header (old format)
    ):
        damage(cached)
        before = len(parsed)
        assert vocab._glove_words(index, "t", len(words)) == words and len(parsed) == before + 1
        assert vocab._glove_words(index, "t", len(words)) == words and len(parsed) == before + 1  # rewritten


# ------------------------------------------------------------- atomic write helper


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "entry.bin"
    cache_files.atomic_write(path, lambda fh: fh.write(b"complete"))

    def crash(fh: object) -> None:
        fh.write(b"half")  # type: ignore[attr-defined]
        raise RuntimeError("killed midway")

    with pytest.raises(RuntimeError):
        cache_files.atomic_write(path, crash)
    assert path.read_bytes() == b"complete" and [p.name for p in tmp_path.iterdir()] == ["entry.bin"]


def test_content_digest_sees_every_change() -> None:
    base = {"a": np.arange(4, dtype=np.float32), "b": {"w": torch.ones(2, 2)}, "s": "x"}
    digest = cache_files.content_digest(base)
    assert cache_files.content_digest(dict(reversed(base.items()))) == digest  # order of names is irrelevant
    for changed in (
        {**base, "a": np.arange(4, dtype=np.float64)},  # same values, other dtype
        {**base, "a": np.arange(4, dtype=np.float32).reshape(2, 2)},  # other shape
        {**base, "b": {"w": torch.ones(2, 2).index_fill_(0, torch.tensor([1]), 2.0)}},
        {**base, "s": "y"},
    ):
        assert cache_files.content_digest(changed) != digest
    sealed = cache_files.seal(base)
    assert cache_files.unseal(sealed, "x") == (base, True)
    assert cache_files.unseal({**sealed, "s": "y"}, "x") is None


# ------------------------------------------------------------------ results folders


def test_a_results_folder_is_never_overwritten(tmp_path: Path) -> None:
    folder = tmp_path / "out" / "r"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text('{"accuracy": 0.9}')
    with pytest.raises(FileExistsError, match="already exists"):
        RunWriter(folder)
    from simulations.runtime.api import launch

    cfg = config.resolve({"dataset": "synthetic", "num-users": 20, "out-dir": str(tmp_path / "out"), "run-name": "r"})
    with pytest.raises(FileExistsError, match="already exists"):
        launch(cfg)
    assert [p.name for p in folder.iterdir()] == ["summary.json"]
    assert (folder / "summary.json").read_text() == '{"accuracy": 0.9}'
    RunWriter(tmp_path / "out" / "empty")  # an empty or new folder is fine
