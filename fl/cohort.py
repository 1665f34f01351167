"""What one simulated node holds: its cohort of users and their embedded documents.

Built on the node (client side) from the dataset, the user partition, the
frozen encoder (through the embedding cache). The input map M1 is applied at
release time (``fl.maps.input_map``), because in the ``public`` and ``leaky`` modes it
comes from the server. Cached per process, so a Ray worker that serves a node in several rounds
builds it once.

With ``dataset = "synthetic"`` (scale and speed measurements only) a node
generates its users' vectors itself (``fl.data.synthetic.SyntheticDataset``): no data
file, no partition, no encoder, and memory in O(users of the node).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from fl.config import DataConfig, EncoderConfig, ReleaseConfig, UsersConfig
from fl.data import datasets as data
from fl.data.columns import rows_of
from fl.data.partition import UserPartition, cohort
from fl.data.user_files import read_node_file
from fl.encoding.documents import SentenceDocs, embed_sentences
from fl.encoding.encoder import best_device, embed_texts, encoder_dimension
from fl.maps.input_map import map_dim, release_dim
from mechanisms.tokenize import tokenize


@dataclass
class Cohort:
    """The documents of a node's users, embedded by the frozen encoder (not sanitized)."""

    partition_id: int
    num_partitions: int
    num_train_users: int
    num_test_users: int
    train_users: range
    test_users: range
    train_doc_user: np.ndarray  # per training document: its global user id
    train_doc_rows: np.ndarray  # per training document: its row in the train split (own file: its user's id)
    train_emb: torch.Tensor  # G(doc), float32 [n_docs, d]; never leaves the node
    train_y: torch.Tensor  # true labels (never leave the node unsanitized unless label-mechanism = none)
    test_emb: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    encoder_dim: int  # d
    map_dim: int  # m', the mechanism's input dimension
    release_dim: int  # columns of a release
    train_text: list[str]  # raw documents (word-level rewriting starts from them); never leave the node
    test_text: list[str]
    train_docs: SentenceDocs | None = None  # document level: sentence embeddings per document
    test_docs: SentenceDocs | None = None
    train_words: np.ndarray | None = None  # word level: word tokens per document (the guarantee's units)
    test_words: np.ndarray | None = None
    node_local: bool = False  # the training documents are the node's own file (node config data-path)


@lru_cache(maxsize=4)
def user_partition(documents: DataConfig, users: UsersConfig, level: str) -> UserPartition:
    """The (cached) partition of the training documents that ``documents`` and ``level`` load into
    ``users.num_users`` users (``users.partitioner``, seeded by ``users.seed``)."""
    if documents.synthetic:
        raise ValueError('dataset = "synthetic" has no documents to partition: user u holds synthetic row u')
    ds = data.load(documents, users, level)
    assert isinstance(ds, data.TextDataset)
    return UserPartition(ds.train, users.num_users, users.partitioner, users.dirichlet_alpha, users.seed)


def population_sizes(documents: DataConfig, users: UsersConfig, level: str) -> tuple[int, int]:
    """(training users, test users) of the documents ``documents`` and ``level`` load, partitioned as ``users``
    says: a test user holds one test document."""
    ds = data.load(documents, users, level)
    if isinstance(ds, data.SyntheticDataset):
        return ds.num_train, ds.num_test
    return user_partition(documents, users, level).num_users, len(ds.test)


class CohortInputs(Protocol):
    """What a cohort is built from: the data and users sections (which documents, which users hold them), the
    encoder section (their embeddings), the release section (the level, M1's and a release's dimensions) and
    the configured device the documents are embedded on (``"auto"`` included). A
    :class:`fl.levels.spec.LevelSpec` is one."""

    @property
    def data(self) -> DataConfig: ...

    @property
    def users(self) -> UsersConfig: ...

    @property
    def encoder(self) -> EncoderConfig: ...

    @property
    def release(self) -> ReleaseConfig: ...

    @property
    def device(self) -> str: ...


def _documents_key(inputs: CohortInputs) -> tuple[Any, ...]:
    """What a cohort's documents and embeddings depend on: the data, users and encoder sections, the device
    they are embedded on and the level (documents are embedded sentence by sentence at the document level);
    never the release's mechanisms or budgets, nor the server's settings."""
    return (inputs.data, inputs.users, inputs.encoder, inputs.device, inputs.release.level)


def _shaped(c: Cohort, release: ReleaseConfig) -> Cohort:
    """``c`` with the M1 and release dimensions of ``release`` (the documents and embeddings shared)."""
    m, r = map_dim(release, c.encoder_dim), release_dim(release, c.encoder_dim, c.num_classes)
    return c if (c.map_dim, c.release_dim) == (m, r) else replace(c, map_dim=m, release_dim=r)


def build_cohort(inputs: CohortInputs, partition_id: int, num_partitions: int, progress: bool = True) -> Cohort:
    """Embed the documents of node ``partition_id``'s users (train and test); built once per process for
    all runs whose inputs differ only in their release (mechanisms, budgets, M1)."""
    key = _documents_key(inputs)
    return _shaped(_build_cached(key, inputs, partition_id, num_partitions, progress), inputs.release)


def build_local_cohort(
    inputs: CohortInputs,
    path: str,
    partition_id: int,
    num_partitions: int,
    train_offset: int = 0,
    num_train_users: int = 0,
    progress: bool = True,
) -> Cohort:
    """The cohort of a node whose training documents are its own file (node config ``data-path``,
    ``fl.data.user_files.read_node_file``): file row i is user ``train_offset + i`` of ``num_train_users``
    (ids the server assigns once it knows every node's count; 0 and 0 before). The node's test
    users are its block of the run's test split, as for every node.
    """
    file = Path(path).expanduser()
    info = file.stat() if file.is_file() else None
    stamp = (info.st_size, info.st_mtime_ns) if info is not None else (0, 0)  # a changed file is read again
    node_file = (path, stamp, train_offset, num_train_users)
    key = _documents_key(inputs)
    return _shaped(_build_cached(key, inputs, partition_id, num_partitions, progress, node_file), inputs.release)


def clear_cohorts() -> None:
    """Forget every cohort this process built (a warm worker between two runs)."""
    _cohorts.clear()


# Large enough that a Ray worker serving many nodes (thousands, with small cohorts)
# does not rebuild cohorts every round; a cohort holds n_docs x d float32.
MAX_COHORTS = 4096
_cohorts: OrderedDict[tuple[Any, ...], Cohort] = OrderedDict()


def _build_cached(
    key: tuple[Any, ...],
    inputs: CohortInputs,
    partition_id: int,
    num_partitions: int,
    progress: bool,
    node_file: tuple[str, tuple[int, int], int, int] | None = None,
) -> Cohort:
    """The cohort built by :func:`_build` for ``key`` (the documents key of ``inputs``), once per process."""
    at = (key, partition_id, num_partitions, node_file)
    if at in _cohorts:
        _cohorts.move_to_end(at)
        return _cohorts[at]
    built = _build(inputs, partition_id, num_partitions, progress, node_file)
    _cohorts[at] = built
    if len(_cohorts) > MAX_COHORTS:
        _cohorts.popitem(last=False)  # the least recently used
    return built


def _build(
    inputs: CohortInputs,
    partition_id: int,
    num_partitions: int,
    progress: bool,
    node_file: tuple[str, tuple[int, int], int, int] | None = None,
) -> Cohort:
    if inputs.data.synthetic:
        if node_file is not None:
            raise ValueError('dataset = "synthetic" generates every user: a node cannot also read a data-path')
        return _synthetic_cohort(inputs, partition_id, num_partitions)
    ds = data.load(inputs.data, inputs.users, inputs.release.level)
    assert isinstance(ds, data.TextDataset)
    test_users = cohort(partition_id, num_partitions, len(ds.test))
    if node_file is None:
        parts = user_partition(inputs.data, inputs.users, inputs.release.level)
        total = parts.num_users
        train_users = cohort(partition_id, num_partitions, total)
        train_split = ds.train
        user_rows = parts.rows(list(train_users))
        doc_user = np.repeat(np.asarray(train_users, dtype=np.int64), [len(r) for r in user_rows])
        doc_rows = np.concatenate(user_rows) if user_rows else np.zeros(0, dtype=np.int64)
    else:
        path, _, offset, total = node_file
        train_split = read_node_file(
            inputs.data, path, ds.label_names, num_users=inputs.users.num_users, level=inputs.release.level
        )
        train_users = range(offset, offset + len(train_split))
        doc_rows = np.arange(len(train_split), dtype=np.int64)
        doc_user = np.asarray(train_users, dtype=np.int64)

    device = best_device(inputs.device)
    d = encoder_dimension(inputs.encoder.encoder, device)  # the model itself loads only if a text misses the cache

    document_level = inputs.release.level == "document"
    sentence_docs: list[SentenceDocs] = []

    def embed(split: Any, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
        if len(rows) == 0:
            sentence_docs.append(SentenceDocs(torch.zeros(0, d), np.zeros(1, dtype=np.int64)))
            return torch.zeros(0, d, dtype=torch.float32), torch.zeros(0, dtype=torch.int64), []
        texts, label_rows = rows_of(split, rows)  # the split's columns are read once per process
        labels = torch.as_tensor(label_rows)
        if document_level:  # the clean document embedding is the mean of its sentences' (docs/SPEC.md §8.2)
            docs = embed_sentences(texts, inputs.encoder, inputs.device, progress)
            sentence_docs.append(docs)
            return docs.means(), labels, texts
        emb = embed_texts(texts, inputs.encoder, device, progress)
        return torch.as_tensor(np.asarray(emb), dtype=torch.float32), labels, texts

    train_emb, train_y, train_text = embed(train_split, doc_rows)
    test_emb, test_y, test_text = embed(ds.test, np.arange(test_users.start, test_users.stop))
    if node_file is not None:  # the server knows a node's document by its user's global id, not by its file row
        doc_rows = doc_user.copy()
    docs = sentence_docs if document_level else [None, None]  # (train, test)
    words = (word_counts(train_text), word_counts(test_text)) if inputs.release.level == "word" else (None, None)
    return Cohort(
        partition_id,
        num_partitions,
        total,
        len(ds.test),
        train_users,
        test_users,
        doc_user,
        doc_rows,
        train_emb,
        train_y,
        test_emb,
        test_y,
        ds.num_classes,
        d,
        map_dim(inputs.release, d),
        release_dim(inputs.release, d, ds.num_classes),
        train_text,
        test_text,
        train_docs=docs[0],
        test_docs=docs[1],
        train_words=words[0],
        test_words=words[1],
        node_local=node_file is not None,
    )


def _synthetic_cohort(inputs: CohortInputs, partition_id: int, num_partitions: int) -> Cohort:
    """A node's block of synthetic users, generated from (seed, user id) alone (sentence level only)."""
    ds = data.load(inputs.data, inputs.users, inputs.release.level)
    assert isinstance(ds, data.SyntheticDataset)
    if inputs.release.level != "sentence":  # data.load refuses it too; the cohort has no text to rewrite
        raise ValueError(f'dataset = "synthetic" has no text: the {inputs.release.level} level is not supported')
    train_users = cohort(partition_id, num_partitions, ds.num_train)
    test_users = cohort(partition_id, num_partitions, ds.num_test)
    train_x, train_y = ds.rows("train", train_users)
    test_x, test_y = ds.rows("test", test_users)
    users = np.arange(train_users.start, train_users.stop, dtype=np.int64)
    return Cohort(
        partition_id,
        num_partitions,
        ds.num_train,
        ds.num_test,
        train_users,
        test_users,
        users,  # one document per user ...
        users.copy(),  # ... whose row in the (virtual) train split is the user id
        torch.from_numpy(train_x),
        torch.from_numpy(train_y),
        torch.from_numpy(test_x),
        torch.from_numpy(test_y),
        ds.num_classes,
        ds.dim,
        map_dim(inputs.release, ds.dim),
        release_dim(inputs.release, ds.dim, ds.num_classes),
        [],  # no text
        [],
    )


def word_counts(texts: list[str]) -> np.ndarray:
    """Word tokens per text (int64): a word-level rewrite has one output word per input word."""
    return np.fromiter((len(tokenize(t)[0]) for t in texts), dtype=np.int64, count=len(texts))
