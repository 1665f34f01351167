"""Dataset registry and loading with Hugging Face ``datasets``.

A registry name loads from local files when a data folder is configured
(``data-dir`` or ``$SANITAS_DATA_DIR``; the layout of ``shared/data``:
``<name>/<split>.jsonl.gz`` + ``labels.json``) and from the Hugging Face hub
otherwise. A path to a CSV, JSON Lines or Parquet file loads a user's own data.
Every source ends up as two ``datasets.Dataset`` objects with columns
``text`` (str), ``label`` (int) and ``row`` (the document's index in its split).

``dataset = "synthetic"`` is the exception: **synthetic data for scale and speed
measurements only, never for accuracy claims**. It has no text, no encoder and
no file: ``num-users`` training users and ``synthetic-test-users`` test users
each hold one document whose "embedding" is a ``synthetic-dim``-dimensional unit
vector, the normalised draw of a two-class Gaussian mixture
``x = (2 y - 1) * SYNTHETIC_SEPARATION * mu + z``, ``z ~ N(0, I_d)``, ``mu`` a unit
direction from the seed and ``y`` a fair coin (Bayes accuracy of a linear
classifier Phi(SYNTHETIC_SEPARATION), about 0.90). User ``u``'s vector and
label depend only on (``seed``, split, ``u``): each is a counter-based hash
(SplitMix64 at position ``u``, Box-Muller for the normals), so any node
generates its own users on the fly, vectorised, whatever the cohort split, and
nothing of size ``num-users`` is ever built (:class:`SyntheticDataset`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fl.config import ConfigError, data_dir, level_of

if TYPE_CHECKING:
    import datasets  # imported where data is read: a node of the synthetic dataset never pays for it

USER_FILE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet", ".jsonl.gz", ".csv.gz")


@dataclass(frozen=True)
class DatasetSpec:
    """Where a registered dataset lives locally and on the hub.

    ``local_splits`` maps the roles ``train``/``test`` to file stems; a single
    entry under ``pool`` means one split that gets a seeded train/test split.
    """

    name: str
    hub_path: str
    hub_name: str | None
    hub_splits: Mapping[str, str]
    hub_text: tuple[str, ...]
    hub_label: str
    local_splits: Mapping[str, str]
    notes: str = ""
    local_folder: str = ""  # "" = the name; variants of one dataset share its files
    label_groups: tuple[tuple[str, tuple[int, ...]], ...] = ()  # merged classes: (name, original ids)


REGISTRY: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in [
        DatasetSpec(
            "sst2",
            "nyu-mll/glue",
            "sst2",
            {"train": "train", "test": "validation"},
            ("sentence",),
            "label",
            {"train": "train", "test": "dev"},
            "GLUE SST-2; the GLUE dev set (872) is the test split",
        ),
        DatasetSpec(
            "imdb",
            "stanfordnlp/imdb",
            None,
            {"train": "train", "test": "test"},
            ("text",),
            "label",
            {"train": "train", "test": "test"},
        ),
        DatasetSpec(
            "20newsgroups",
            "SetFit/20_newsgroups",
            None,
            {"train": "train", "test": "test"},
            ("text",),
            "label",
            {"train": "train", "test": "test"},
            "bydate split, headers removed",
        ),
        # Meehan et al. (2022) merge the 20 groups into 9 categories without listing them; ours:
        # the five comp.* groups, misc.forsale, the two vehicle groups, the two sports groups, the four
        # sci.* groups, the three religion groups, and the three talk.politics.* groups kept apart.
        DatasetSpec(
            "20newsgroups9",
            "SetFit/20_newsgroups",
            None,
            {"train": "train", "test": "test"},
            ("text",),
            "label",
            {"train": "train", "test": "test"},
            "20 Newsgroups merged into 9 categories (see label_groups)",
            local_folder="20newsgroups",
            label_groups=(
                ("computers", (1, 2, 3, 4, 5)),
                ("forsale", (6,)),
                ("vehicles", (7, 8)),
                ("sports", (9, 10)),
                ("science", (11, 12, 13, 14)),
                ("religion", (0, 15, 19)),
                ("politics.guns", (16,)),
                ("politics.mideast", (17,)),
                ("politics.misc", (18,)),
            ),
        ),
        DatasetSpec(
            "agnews",
            "fancyzhx/ag_news",
            None,
            {"train": "train", "test": "test"},
            ("text",),
            "label",
            {"pool": "test"},
            "locally only the 7,600-row test split exists: it is split train/test (seeded)",
        ),
        DatasetSpec(
            "qnli",
            "nyu-mll/glue",
            "qnli",
            {"train": "train", "test": "validation"},
            ("question", "sentence"),
            "label",
            {"pool": "dev"},
            "question + ' ' + sentence; locally only the dev split exists (seeded split)",
        ),
        DatasetSpec(
            "sst5",
            "SetFit/sst5",
            None,
            {"train": "train", "test": "test"},
            ("text",),
            "label",
            {"train": "train", "test": "test"},
        ),
        DatasetSpec(
            "trec",
            "CogComp/trec",
            None,
            {"train": "train", "test": "test"},
            ("text",),
            "coarse_label",
            {"train": "train", "test": "test"},
        ),
        DatasetSpec(
            "mr",
            "cornell-movie-review-data/rotten_tomatoes",
            None,
            {"train": "train", "test": "test"},
            ("text",),
            "label",
            {"pool": "all"},
        ),
        DatasetSpec(
            "cr", "SetFit/SentEval-CR", None, {"train": "train", "test": "test"}, ("text",), "label", {"pool": "all"}
        ),
        DatasetSpec(
            "mpqa", "jxm/mpqa", None, {"train": "train", "test": "test"}, ("sentence",), "label", {"pool": "all"}
        ),
        DatasetSpec(
            "subj", "SetFit/subj", None, {"train": "train", "test": "test"}, ("text",), "label", {"pool": "all"}
        ),
    ]
}


def names() -> list[str]:
    """Registered dataset names."""
    return sorted(REGISTRY)


@dataclass
class TextDataset:
    """A loaded dataset: private training documents, test documents, public documents."""

    name: str
    train: datasets.Dataset
    test: datasets.Dataset
    public: datasets.Dataset | None
    num_classes: int
    label_names: list[str]
    source: str
    dropped_empty: dict[str, int] = field(default_factory=dict)
    dropped_short: dict[str, int] = field(default_factory=dict)  # document level: < 2 sentences

    def describe(self) -> dict[str, Any]:
        return {
            "dataset": self.name,
            "source": self.source,
            "train_documents": len(self.train),
            "test_documents": len(self.test),
            "public_documents": 0 if self.public is None else len(self.public),
            "num_classes": self.num_classes,
            "dropped_empty_documents": self.dropped_empty,
            "dropped_short_documents": self.dropped_short,
        }


# ------------------------------------------------------------------------------------ synthetic
SYNTHETIC = "synthetic"
#: Distance of each class mean from the origin along ``mu``, in units of the per-coordinate noise:
#: the Bayes accuracy of the (linear) best classifier is Phi(1.2816) = 0.90.
SYNTHETIC_SEPARATION = 1.2816
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's increment
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_CHUNK_USERS = 8192  # users per vectorised block: temporaries of at most ~13 MB each (d = 384)


def is_synthetic(cfg: Mapping[str, Any]) -> bool:
    """True for ``dataset = "synthetic"`` (scale and speed measurements only)."""
    return cfg["dataset"] == SYNTHETIC


def _stream_key(seed: int, split: str, stream: str) -> np.uint64:
    """A 64-bit key per (seed, split, stream): streams never share a SplitMix64 sequence in practice."""
    digest = hashlib.sha256(f"sanitas-synthetic|{seed}|{split}|{stream}".encode()).digest()
    return np.uint64(int.from_bytes(digest[:8], "little"))


def _splitmix(key: np.uint64, counters: np.ndarray) -> np.ndarray:
    """SplitMix64 output number ``counters`` of the sequence seeded by ``key`` (uint64, vectorised)."""
    z = counters.astype(np.uint64, copy=True)
    z *= _GOLDEN
    z += key
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


def _normals(key: np.uint64, users: np.ndarray, dim: int) -> np.ndarray:
    """Standard normals float32 [n, dim]: row i depends only on (key, users[i]).

    Each user owns the counters ``[u * ceil(dim / 2), (u + 1) * ceil(dim / 2))``; one 64-bit hash
    gives two 24-bit uniforms and Box-Muller turns them into two normals (tails cut at 5.9 sigma).
    """
    half = (dim + 1) // 2
    counters = users.astype(np.uint64)[:, None] * np.uint64(half) + np.arange(half, dtype=np.uint64)
    h = _splitmix(key, counters)
    u1 = (h >> np.uint64(40)).astype(np.float32)
    u1 += np.float32(0.5)
    u1 *= np.float32(2.0**-24)
    angle = (h & np.uint64(0xFFFFFF)).astype(np.float32)
    angle *= np.float32(2 * math.pi * 2.0**-24)
    radius = np.log(u1)
    radius *= np.float32(-2.0)
    np.sqrt(radius, out=radius)
    out = np.empty((users.size, 2 * half), dtype=np.float32)
    np.multiply(radius, np.cos(angle), out=out[:, 0::2])
    np.multiply(radius, np.sin(angle), out=out[:, 1::2])
    return out[:, :dim]


@dataclass(frozen=True)
class SyntheticDataset:
    """``dataset = "synthetic"``: users generated on demand, never materialised (see the module docstring).

    For scale and speed measurements only, never for accuracy claims. Every user
    (``num_train`` training, ``num_test`` test) holds one document, its row in
    the split is its user id, and :meth:`rows` generates any block of users.
    """

    num_train: int
    num_test: int
    dim: int
    seed: int
    name: str = SYNTHETIC
    num_classes: int = 2
    label_names: tuple[str, ...] = ("0", "1")
    public: None = None  # no public documents
    dropped_empty: Mapping[str, int] = field(default_factory=dict)
    dropped_short: Mapping[str, int] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return (
            f"synthetic Gaussian mixture: {self.num_train} training users, {self.num_test} test users, "
            f"d = {self.dim} (scale and speed measurements only, never accuracy claims)"
        )

    def size(self, split: str) -> int:
        """Users (= documents) of ``split`` (``"train"`` or ``"test"``)."""
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        return self.num_train if split == "train" else self.num_test

    def mean_direction(self) -> np.ndarray:
        """``mu``: the unit direction of the class means (float64 [d], from the seed)."""
        mu = _normals(_stream_key(self.seed, "all", "mean"), np.zeros(1, dtype=np.int64), self.dim)[0]
        mu = mu.astype(np.float64)
        return mu / np.linalg.norm(mu)

    def rows(self, split: str, users: np.ndarray | range) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings float32 [n, d] (unit rows) and labels int64 [n] of ``users`` of ``split``.

        Depends only on (seed, split, user id): the same user gets the same row whichever
        node or block asks. Memory is O(len(users) * d).
        """
        users = np.asarray(users, dtype=np.int64).reshape(-1)
        total = self.size(split)
        if users.size and (users.min() < 0 or users.max() >= total):
            raise ValueError(f"synthetic {split} users lie in [0, {total}), got ids outside it")
        key_x, key_y = _stream_key(self.seed, split, "vector"), _stream_key(self.seed, split, "label")
        shift = (SYNTHETIC_SEPARATION * self.mean_direction()).astype(np.float32)
        x = np.empty((users.size, self.dim), dtype=np.float32)
        y = (_splitmix(key_y, users) >> np.uint64(63)).astype(np.int64)
        for start in range(0, users.size, _CHUNK_USERS):
            block = slice(start, start + _CHUNK_USERS)
            z = _normals(key_x, users[block], self.dim)
            z += np.where(y[block, None] == 1, shift, -shift)
            z /= np.linalg.norm(z, axis=1, keepdims=True)
            x[block] = z
        return x, y

    def describe(self) -> dict[str, Any]:
        return {
            "dataset": self.name,
            "source": self.source,
            "train_documents": self.num_train,
            "test_documents": self.num_test,
            "public_documents": 0,
            "num_classes": self.num_classes,
            "synthetic_dim": self.dim,
            "synthetic_separation": SYNTHETIC_SEPARATION,
            "note": "synthetic data: for scale and speed measurements only, never for accuracy claims",
            "dropped_empty_documents": dict(self.dropped_empty),
            "dropped_short_documents": dict(self.dropped_short),
        }


def _check_synthetic(cfg: Mapping[str, Any]) -> str:
    """The synthetic dataset's own rules (it has users and vectors, no text)."""

    if cfg["num-users"] <= 0:
        raise ConfigError(
            f'dataset = "synthetic" needs num-users > 0 (the number of training users), got {cfg["num-users"]}'
        )
    level = level_of(cfg)
    if level != "sentence":
        raise ConfigError(
            f'dataset = "synthetic" has vectors but no text: the {level} level is not supported '
            "(use a sentence-level mechanism)"
        )
    clashes = [
        f"{key} = {cfg[key]!r}"
        for key, ok in (("train-size", 0), ("test-size", 0), ("public-fraction", 0.0), ("partitioner", "iid"))
        if cfg[key] != ok
    ]
    if clashes:
        raise ConfigError(
            'dataset = "synthetic" is sized by num-users and synthetic-test-users, has no public documents '
            f"and one document per user: it needs train-size = 0, test-size = 0, public-fraction = 0 and "
            f'partitioner = "iid" (got {", ".join(clashes)})'
        )
    return SyntheticDataset(cfg["num-users"], cfg["synthetic-test-users"], cfg["synthetic-dim"], cfg["seed"]).source


def is_user_file(name: str) -> bool:
    """True when ``dataset`` names a file rather than a registry entry."""
    return name.lower().endswith(USER_FILE_SUFFIXES) or "/" in name or "\\" in name


def check_source(cfg: Mapping[str, Any]) -> str:
    """Raise a one-line error unless the configured data source can be found.

    Returns a description of the source. Cheap: checks names, paths and file sizes (an empty
    data file is refused here), and ``map-dim`` against ``synthetic-dim`` for synthetic data.
    """
    name = cfg["dataset"]
    if is_synthetic(cfg):
        if cfg["map-in"] != "identity" and cfg["map-dim"] > cfg["synthetic-dim"]:
            raise ConfigError(
                f"map-dim must be <= synthetic-dim, the embedding dimension d of the synthetic data (M1 maps d to "
                f"map-dim dimensions), got map-dim = {cfg['map-dim']} > {cfg['synthetic-dim']}"
            )
        return _check_synthetic(cfg)
    if is_user_file(name):
        for key, path in (("dataset", name), ("test-file", cfg["test-file"])):
            if not path:
                continue
            if not Path(path).expanduser().is_file():
                raise FileNotFoundError(f"data file {path!r} not found ({key})")
            if Path(path).expanduser().stat().st_size == 0:
                raise ValueError(f"data file {path!r} is empty ({key})")
        return f"file {name}"
    if name not in REGISTRY:
        raise ConfigError(
            f"unknown dataset {name!r}; known datasets: {', '.join(names())} "
            f'(or give a path to a .csv, .jsonl or .parquet file, or "{SYNTHETIC}" for scale measurements)'
        )
    root = data_dir(cfg)
    if root is None:
        spec = REGISTRY[name]
        return f"hub {spec.hub_path}" + (f"/{spec.hub_name}" if spec.hub_name else "")
    folder = root / (REGISTRY[name].local_folder or name)
    missing = [s for s in REGISTRY[name].local_splits.values() if not (folder / f"{s}.jsonl.gz").is_file()]
    if missing:
        raise FileNotFoundError(
            f"dataset {name!r}: missing {', '.join(f'{s}.jsonl.gz' for s in missing)} under {folder} "
            "(data-dir / SANITAS_DATA_DIR must hold <dataset>/<split>.jsonl.gz)"
        )
    return f"local {folder}"


def _read_local(spec: DatasetSpec, folder: Path) -> tuple[dict[str, datasets.Dataset], list[str], dict[str, str]]:
    """The splits of a registered dataset's local folder, its class names and each split's file."""
    files = {role: str(folder / f"{stem}.jsonl.gz") for role, stem in spec.local_splits.items()}
    sources = {role: f"data file {path!r}" for role, path in files.items()}
    splits = {
        role: _standardise(_read_file("json", path), ("text",), "label", sources[role]) for role, path in files.items()
    }
    label_file = folder / "labels.json"
    num_classes = None
    if label_file.is_file():
        try:
            mapping = json.loads(label_file.read_text(encoding="utf-8"))
            label_names = [str(mapping[str(i)]) for i in range(len(mapping))]
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(
                f"{label_file}: must map the class ids '0', '1', ... to class names ({type(err).__name__}: {err})"
            ) from None
        num_classes = len(label_names)
    for role, path in files.items():
        _check_integer_labels(splits[role]["label"][:], path, "label", num_classes, label_file)
    if num_classes is None:
        label_names = [str(i) for i in range(max(int(max(s["label"][:])) for s in splits.values()) + 1)]
    return splits, label_names, sources


def _read_hub(spec: DatasetSpec) -> tuple[dict[str, datasets.Dataset], list[str], dict[str, str]]:
    import datasets

    hub_id = spec.hub_path + (f"/{spec.hub_name}" if spec.hub_name else "")
    try:
        loaded = datasets.load_dataset(spec.hub_path, spec.hub_name)
    except Exception as exc:  # network, authentication or a renamed hub entry: say what to do instead
        raise FileNotFoundError(
            f"dataset {spec.name!r}: no local folder was given (data-dir / SANITAS_DATA_DIR), and loading "
            f"{hub_id!r} from the Hugging Face hub failed ({type(exc).__name__}: {str(exc)[:200]}). "
            "Point data-dir or SANITAS_DATA_DIR at a folder holding "
            f"{spec.local_folder or spec.name}/<split>.jsonl.gz, or connect to the internet."
        ) from exc
    splits = {}
    for role, split in spec.hub_splits.items():
        ds = loaded[split]
        splits[role] = _standardise(ds, spec.hub_text, spec.hub_label, f"{hub_id} split {split!r}")
    feature = loaded[spec.hub_splits["train"]].features.get(spec.hub_label)
    if isinstance(feature, datasets.ClassLabel):
        label_names = list(feature.names)
    else:
        label_names = [str(i) for i in range(int(max(splits["train"]["label"][:])) + 1)]
    return splits, label_names, {role: f"{hub_id} split {split!r}" for role, split in spec.hub_splits.items()}


def _standardise(ds: datasets.Dataset, text_cols: tuple[str, ...], label_col: str, source: str) -> datasets.Dataset:
    """``text`` (the text columns joined by spaces) and ``label`` columns of one source."""
    missing = [c for c in (*text_cols, label_col) if c not in ds.column_names]
    if missing:
        keys = " / ".join(
            k for k, cols in (("text-column", text_cols), ("label-column", (label_col,))) if set(cols) & set(missing)
        )
        raise ConfigError(f"{source}: columns {missing} not found ({keys}); available columns: {ds.column_names}")
    if text_cols == ("text",):
        ds = ds.select_columns(["text", label_col])
    else:
        ds = ds.map(lambda r: {"_t": " ".join(str(r[c]) for c in text_cols)}, remove_columns=None)
        ds = ds.select_columns(["_t", label_col]).rename_column("_t", "text")
    if label_col != "label":
        ds = ds.rename_column(label_col, "label")
    return ds


def _builder(path: str) -> str:
    """The ``datasets`` builder of a user file: ``csv``, ``parquet`` or ``json`` (JSON Lines)."""
    name = Path(path).name.lower()
    return "csv" if ".csv" in name else "parquet" if name.endswith(".parquet") else "json"


_FORMAT_NAMES = {"csv": "CSV", "json": "JSON Lines", "parquet": "Parquet"}


def _not_utf8(err: UnicodeDecodeError) -> str:
    return f"is not UTF-8 text (byte {err.object[err.start]:#04x} cannot be decoded): save it as UTF-8"


def _text_problem(path: str) -> str | None:
    """Why a text data file (CSV, JSON Lines, gzipped or not) cannot be parsed, when a plain scan can
    tell: a byte that is not UTF-8, or (JSON Lines) the first line that is not a JSON object."""
    json_lines = path.lower().endswith((".jsonl", ".jsonl.gz"))
    try:
        with (gzip.open if path.lower().endswith(".gz") else open)(path, "rt", encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not (json_lines and line.strip()):
                    continue
                try:
                    row = json.loads(line)
                except ValueError as err:
                    return f"line {number} is not valid JSON ({err})"
                if not isinstance(row, dict):
                    return f"line {number} is not a JSON object (got {type(row).__name__})"
    except UnicodeDecodeError as err:
        return _not_utf8(err)
    except (OSError, EOFError):
        return None  # e.g. a corrupt gzip stream: the reader's own error says it
    return None


def _read_problem(err: BaseException, builder: str, path: str) -> str:
    """What went wrong reading a file, in a few words on one line: the file's encoding or first bad
    JSON line when a scan finds one, else the innermost cause of ``err``."""
    chain: list[BaseException] = []
    cause: BaseException | None = err
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    for cause in chain:
        if isinstance(cause, UnicodeDecodeError):
            return _not_utf8(cause)
        if "corresponds to no data" in str(cause):
            return "has no data rows"
    found = _text_problem(str(Path(path).expanduser())) if builder != "parquet" else None
    if found:
        return found
    root = chain[-1]
    text = " ".join(str(root).split())
    text = f"{type(root).__name__}: {text[:300]}" if text else type(root).__name__
    return f"could not be read as {_FORMAT_NAMES[builder]} ({text})"


class _NoErrorRecords(logging.Filter):
    """Drops a ``datasets`` builder's ERROR records ("Failed to read file ..."): :func:`_read_file`
    raises the failure again as one line naming the file."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR


def _read_file(builder: str, path: str) -> datasets.Dataset:
    """One data file as a Dataset; a one-line ``ValueError`` naming the file when it cannot be read."""
    import datasets

    builder_log = logging.getLogger(f"datasets.packaged_modules.{builder}.{builder}")
    quiet = _NoErrorRecords()
    builder_log.addFilter(quiet)
    try:
        ds = datasets.load_dataset(builder, data_files={"train": str(Path(path).expanduser())}, split="train")
    except Exception as err:  # parser, encoding and Arrow errors of any kind: name the file, say what
        raise ValueError(f"data file {path!r} {_read_problem(err, builder, path)}") from err
    finally:
        builder_log.removeFilter(quiet)
    try:  # the JSON reader keeps bytes that are not UTF-8 in its strings; reading them would fail later
        ds.data.table.validate(full=True)
    except Exception as err:
        raise ValueError(f"data file {path!r} {_read_problem(err, builder, path)}") from err
    if len(ds) == 0:
        raise ValueError(f"data file {path!r} has no data rows")
    return ds


def _missing_label(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _check_labels(labels: list[Any], path: str, column: str) -> None:
    """Every row has a label: no empty, null or NaN one (a one-line ``ValueError`` naming the file)."""
    missing = [i for i, v in enumerate(labels) if _missing_label(v)]
    if missing:
        raise ValueError(
            f"data file {path!r}: label-column {column!r} is empty, null or NaN in {len(missing)} row(s) "
            f"(first at row {missing[0]})"
        )


def _check_integer_labels(
    labels: list[Any], path: str, column: str, num_classes: int | None = None, names_file: Path | None = None
) -> None:
    """Integer labels are class ids: >= 0 and, when the classes are named, < their number."""
    _check_labels(labels, path, column)
    if not all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in labels):
        if num_classes is not None:
            bad = next(i for i, v in enumerate(labels) if not isinstance(v, int | np.integer) or isinstance(v, bool))
            raise ValueError(f"data file {path!r}: label {labels[bad]!r} at row {bad} is not an integer class id")
        return  # string labels: class names
    values = np.asarray(labels, dtype=np.int64)
    high = np.iinfo(np.int64).max if num_classes is None else num_classes
    bad = np.flatnonzero((values < 0) | (values >= high))
    if bad.size:
        rule = (
            "integer labels are class ids 0, 1, ..."
            if num_classes is None
            else f"{names_file} names {num_classes} classes, ids 0..{num_classes - 1}"
        )
        raise ValueError(
            f"data file {path!r}: label {int(values[bad[0]])} at row {int(bad[0])} is out of range ({rule}; "
            f"{int(bad.size)} row(s) out of range)"
        )


def _read_user_files(cfg: Mapping[str, Any]) -> tuple[dict[str, datasets.Dataset], list[str], dict[str, str]]:
    """The user's data file (and test file): splits, class names and each split's file."""
    files = {"train": cfg["dataset"]}
    if cfg["test-file"]:
        files["test"] = cfg["test-file"]
    text_cols = tuple(c.strip() for c in cfg["text-column"].split(","))
    label_col = cfg["label-column"]
    splits = {}
    for role, path in files.items():
        splits[role] = _standardise(_read_file(_builder(path), path), text_cols, label_col, f"data file {path!r}")
        _check_integer_labels(splits[role]["label"][:], path, label_col)
    sources = {role: f"data file {path!r}" for role, path in files.items()}
    if "test" not in splits:
        splits, sources = {"pool": splits["train"]}, {"pool": sources["train"]}
    # String labels become class ids (sorted, so the mapping is deterministic).
    values = sorted({str(v) for ds in splits.values() for v in ds["label"][:]})
    if len(values) < 2:
        raise ValueError(
            f"data file {cfg['dataset']!r}: every document has label {values[0]!r} (label-column {label_col!r}): "
            "a classifier needs at least 2 classes"
        )
    if all(isinstance(v, int | np.integer) for ds in splits.values() for v in ds["label"][:100]):
        num = int(max(max(ds["label"][:]) for ds in splits.values())) + 1
        return splits, [str(i) for i in range(num)], sources
    index = {v: i for i, v in enumerate(values)}
    splits = {
        r: ds.map(
            lambda b: {"label_id": [index[str(v)] for v in b["label"]]}, batched=True, remove_columns=["label"]
        ).rename_column("label_id", "label")
        for r, ds in splits.items()
    }
    return splits, values, sources


def _merge_labels(
    splits: dict[str, datasets.Dataset], groups: tuple[tuple[str, tuple[int, ...]], ...], num_original: int
) -> tuple[dict[str, datasets.Dataset], list[str]]:
    """Relabel original class ids into merged groups (every original id in exactly one group)."""
    table = np.full(num_original, -1, dtype=np.int64)
    for new, (_, members) in enumerate(groups):
        table[list(members)] = new
    if (table < 0).any() or sum(len(m) for _, m in groups) != num_original:
        raise ValueError("label_groups must cover every original class exactly once")
    merged = {
        role: ds.map(lambda b: {"label": table[np.asarray(b["label"], dtype=np.int64)].tolist()}, batched=True)
        for role, ds in splits.items()
    }
    return merged, [name for name, _ in groups]


def _empty_rows(ds: datasets.Dataset) -> np.ndarray:
    """Whether each document is empty: no text, or whitespace only."""
    return np.array([t is None or not str(t).strip() for t in ds["text"][:]], dtype=bool)


def _refuse_empty(ds: datasets.Dataset, split: str, source: str) -> None:
    """``empty-documents = "error"``: a one-line error naming the split, its file and the first empty row."""
    empty = _empty_rows(ds)
    if empty.any():
        first = int(np.flatnonzero(empty)[0])
        where = f"{source} (" if split == "pool" else f"the {split} split ({source}, "
        raise ValueError(
            f"{int(empty.sum())} empty document(s) in {where}first at row {first}; empty or whitespace-only text); "
            'set empty-documents = "drop" to drop and count them'
        )


def _handle_empty(ds: datasets.Dataset, policy: str, split: str, dropped: dict[str, int]) -> datasets.Dataset:
    """``empty-documents = "drop"``: drop the empty documents of a split and count them ("error": they
    were refused in the files, before the split, by :func:`_refuse_empty`)."""
    if policy == "error":
        dropped[split] = 0
        return ds
    empty = _empty_rows(ds)
    if empty.any():
        ds = ds.select(np.flatnonzero(~empty))
    dropped[split] = int(empty.sum())
    return ds


def _handle_short(ds: datasets.Dataset, policy: str, split: str, dropped: dict[str, int]) -> datasets.Dataset:
    """Document level: SentDP needs >= 2 sentences; shorter documents are dropped (counted) or refused."""
    from fl.data.sentences import split_sentences

    short = np.array([len(split_sentences(t)) < 2 for t in ds["text"][:]], dtype=bool)
    if short.any() and policy == "error":
        first = int(np.flatnonzero(short)[0])
        raise ValueError(
            f"{int(short.sum())} document(s) of the {split} split have fewer than 2 sentences (first at row "
            f'{first}): sentence-level DP cannot protect them; set short-documents = "drop" to drop and count them'
        )
    dropped[split] = int(short.sum())
    return ds.select(np.flatnonzero(~short)) if short.any() else ds


def _subsample(ds: datasets.Dataset, size: int, seed: int) -> datasets.Dataset:
    if size <= 0 or size >= len(ds):
        return ds
    order = np.random.default_rng(seed).permutation(len(ds))[:size]
    return ds.select(np.sort(order))


@contextmanager
def _quiet_datasets() -> Iterator[None]:
    """No ``datasets`` progress bars while a dataset is read and prepared (a refused file leaves one line)."""
    import datasets

    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


@lru_cache(maxsize=8)
def _load_cached(key: tuple[tuple[str, Any], ...]) -> TextDataset:
    with _quiet_datasets():
        return _load(dict(key))


def _load(cfg: dict[str, Any]) -> TextDataset:
    source = check_source(cfg)
    name = cfg["dataset"]
    seed = int(cfg["seed"])
    if is_user_file(name):
        splits, label_names, sources = _read_user_files(cfg)
        name = Path(name).name
    else:
        spec = REGISTRY[name]
        root = data_dir(cfg)
        folder = root / (spec.local_folder or name) if root else None
        splits, label_names, sources = _read_local(spec, folder) if folder else _read_hub(spec)
        if spec.label_groups:
            splits, label_names = _merge_labels(splits, spec.label_groups, len(label_names))
    if len(label_names) < 2:
        raise ValueError(f"dataset {name!r} has {len(label_names)} class(es): a classifier needs at least 2")
    if cfg["empty-documents"] == "error":  # before the seeded split: the row is the file's row
        for role, ds in splits.items():
            _refuse_empty(ds, role, sources[role])
    if "pool" in splits:
        parts = splits["pool"].train_test_split(test_size=cfg["test-fraction"], seed=seed)
        splits = {"train": parts["train"], "test": parts["test"]}
    dropped: dict[str, int] = {}
    train = _handle_empty(splits["train"], cfg["empty-documents"], "train", dropped)
    test = _handle_empty(splits["test"], cfg["empty-documents"], "test", dropped)
    train = _subsample(train, cfg["train-size"], seed)
    test = _subsample(test, cfg["test-size"], seed + 1)
    public = None
    if cfg["public-fraction"] > 0:
        is_public = np.random.default_rng(seed + 2).random(len(train)) < cfg["public-fraction"]
        public = train.select(np.flatnonzero(is_public))
        train = train.select(np.flatnonzero(~is_public))
    # After subsampling and the public split, so that a document-level run and its non-private
    # reference (document-mechanism = "none") draw the same documents, less the short ones.
    short: dict[str, int] = {}
    if level_of(cfg) == "document":  # the document level drops short documents (data cache key)
        train = _handle_short(train, cfg["short-documents"], "train", short)
        test = _handle_short(test, cfg["short-documents"], "test", short)
    train = train.add_column("row", np.arange(len(train), dtype=np.int64))
    test = test.add_column("row", np.arange(len(test), dtype=np.int64))
    if len(train) == 0 or len(test) == 0:
        raise ValueError(f"dataset {name!r} has an empty train or test split after filtering")
    return TextDataset(name, train, test, public, len(label_names), label_names, source, dropped, short)


def read_node_file(cfg: Mapping[str, Any], path: str, label_names: list[str]) -> datasets.Dataset:
    """A node's own training documents (node config ``data-path``): one document per user, read as
    the user-file loader reads ``dataset`` (CSV, JSON Lines or Parquet; ``text-column``,
    ``label-column``, ``empty-documents``, and at the document level ``short-documents``).

    Labels are the run's classes: integer ids ``0..len(label_names)-1`` or the class names of the
    run's dataset. Guarantees ``text``, ``label`` and ``row`` (the file's order after filtering),
    or a one-line ``ValueError``/``FileNotFoundError`` naming the file and the problem.
    """
    file = Path(path).expanduser()
    if not file.name.lower().endswith(USER_FILE_SUFFIXES):
        raise ValueError(f"data-path {path!r}: not a .csv, .jsonl or .parquet file")
    if not file.is_file():
        raise FileNotFoundError(f"data-path {path!r} not found")
    if cfg["num-users"] != 0:
        raise ValueError(f"data-path {path!r}: a node's own file holds one document per user; set num-users = 0")
    text_cols = tuple(c.strip() for c in cfg["text-column"].split(","))
    with _quiet_datasets():
        ds = _standardise(_read_file(_builder(path), path), text_cols, cfg["label-column"], f"data-path {path!r}")
    labels = ds["label"][:]
    _check_labels(labels, path, cfg["label-column"])
    names = {name: i for i, name in enumerate(label_names)}
    if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in labels):
        ids = np.asarray(labels, dtype=np.int64)
        bad = np.flatnonzero((ids < 0) | (ids >= len(label_names)))
        if bad.size:
            raise ValueError(
                f"data-path {path!r}: label {int(ids[bad[0]])} at row {int(bad[0])} is not a class id of the run "
                f"(0..{len(label_names) - 1}: {', '.join(label_names)})"
            )
    else:
        unknown = [i for i, v in enumerate(labels) if str(v) not in names]
        if unknown:
            raise ValueError(
                f"data-path {path!r}: label {labels[unknown[0]]!r} at row {unknown[0]} is not a class of the run "
                f"({', '.join(label_names)})"
            )
        ids = np.asarray([names[str(v)] for v in labels], dtype=np.int64)
    ds = ds.remove_columns(["label"]).add_column("label", ids)
    if cfg["empty-documents"] == "error":
        _refuse_empty(ds, "pool", f"data-path {path!r}")
    dropped: dict[str, int] = {}
    ds = _handle_empty(ds, cfg["empty-documents"], "train", dropped)
    if level_of(cfg) == "document":
        ds = _handle_short(ds, cfg["short-documents"], "train", dropped)
    if len(ds) == 0:
        raise ValueError(f"data-path {path!r}: no documents left after filtering")
    return ds.add_column("row", np.arange(len(ds), dtype=np.int64))


DATA_KEYS = (
    "dataset",
    "data-dir",
    "test-file",
    "text-column",
    "label-column",
    "test-fraction",
    "train-size",
    "test-size",
    "public-fraction",
    "empty-documents",
    "word-mechanism",  # with document-mechanism, the level (fl.config.level_of): the document level
    "document-mechanism",  # drops short documents
    "short-documents",
    "seed",
)


def load(cfg: Mapping[str, Any]) -> TextDataset | SyntheticDataset:
    """Load the configured dataset (cached per process).

    Guarantees: deterministic for a given config; ``train``/``test`` carry
    ``text``, ``label`` and ``row``; public documents are disjoint from ``train``.
    Raises a one-line ``ValueError``/``FileNotFoundError`` naming the problem.
    ``dataset = "synthetic"`` gives a :class:`SyntheticDataset` (sizes and a generator,
    nothing materialised).
    """
    if is_synthetic(cfg):
        _check_synthetic(cfg)
        return SyntheticDataset(cfg["num-users"], cfg["synthetic-test-users"], cfg["synthetic-dim"], cfg["seed"])
    key = tuple((k, cfg[k]) for k in DATA_KEYS)
    # The data dir from the environment is part of the identity of the source.
    return _load_cached(key + (("_resolved-data-dir", str(data_dir(cfg))),))
