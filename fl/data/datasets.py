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

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fl.config import ConfigError, DataConfig, UsersConfig
from fl.data import groups_cache, sources
from fl.data.columns import columns
from fl.data.public_split import own_public, public_label_map  # noqa: F401 - public_label_map: importable here too
from fl.data.synthetic import SYNTHETIC, SyntheticDataset
from fl.data.user_files import (
    _check_integer_labels,
    _merge_labels,
    _read_file,
    handle_empty,
    handle_short,
    is_user_file,
    quiet_datasets,
    read_user_files,
    refuse_empty,
    standardise,
)

if TYPE_CHECKING:
    import datasets  # imported where data is read: a node of the synthetic dataset never pays for it


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
    public_info: dict[str, Any] = field(default_factory=dict)  # how the public documents were obtained, overlap
    user_unit: str = "row"  # user-unit: a private user is a training row, or a whole source group
    folded_into_root: int = 0  # user-unit = "source": private rows dropped for their group's longest text

    def describe(self) -> dict[str, Any]:
        """What the run's summary reports of its data (``summary.json``'s ``data`` block)."""
        return {
            "public": self.public_info,
            "dataset": self.name,
            "source": self.source,
            "user_unit": self.user_unit,
            "folded_into_root": self.folded_into_root,
            "train_documents": len(self.train),
            "test_documents": len(self.test),
            "public_documents": 0 if self.public is None else len(self.public),
            "num_classes": self.num_classes,
            # The test split's labels per class: its majority-class rate is what a model that learned
            # nothing scores (fl.reporting.outcome).
            "test_class_counts": np.bincount(
                np.asarray(self.test["label"][:], dtype=np.int64), minlength=self.num_classes
            ).tolist(),
            "dropped_empty_documents": self.dropped_empty,
            "dropped_short_documents": self.dropped_short,
        }


def check_source(data: DataConfig, users: UsersConfig) -> str:
    """Raise a one-line error unless the configured data source (and ``public-dataset``) can be found.

    Returns a description of the source. Cheap: checks names, paths and file sizes (an empty
    data file is refused here). The synthetic dataset's rules are config rules
    (:mod:`fl.config.rules`), checked when the config is resolved; it is described by ``users``.
    """
    if data.synthetic:
        return SyntheticDataset(users.num_users, data.synthetic_test_users, data.synthetic_dim, users.seed).source
    return _text_source(data)


def _text_source(data: DataConfig) -> str:
    """:func:`check_source` for a source of text (and its ``public-dataset``)."""
    if data.public_dataset:
        try:
            _check_one_source(replace(data, dataset=data.public_dataset, test_file=""))
        except (ConfigError, FileNotFoundError, ValueError) as err:
            raise type(err)(f"public-dataset: {err}") from None
    return _check_one_source(data)


def _check_one_source(data: DataConfig) -> str:
    name = data.dataset
    if is_user_file(name):
        for key, path in (("dataset", name), ("test-file", data.test_file)):
            if not path:
                continue
            if not Path(path).expanduser().is_file():
                raise FileNotFoundError(f"data file {path!r} not found ({key})")
            if Path(path).expanduser().stat().st_size == 0:
                raise ValueError(f"data file {path!r} is empty ({key})")
        return f"file {name}"
    if name not in REGISTRY:
        raise ConfigError(
            f'unknown dataset {name!r}: use {", ".join(names())}, a .csv/.jsonl/.parquet path or "{SYNTHETIC}"'
        )
    root = data.folder
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
        role: standardise(_read_file("json", path), ("text",), "label", sources[role]) for role, path in files.items()
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
        splits[role] = standardise(ds, spec.hub_text, spec.hub_label, f"{hub_id} split {split!r}")
    feature = loaded[spec.hub_splits["train"]].features.get(spec.hub_label)
    if isinstance(feature, datasets.ClassLabel):
        label_names = list(feature.names)
    else:
        label_names = [str(i) for i in range(int(max(splits["train"]["label"][:])) + 1)]
    return splits, label_names, {role: f"{hub_id} split {split!r}" for role, split in spec.hub_splits.items()}


def _subsample(ds: datasets.Dataset, size: int, seed: int, by_group: bool = False) -> datasets.Dataset:
    """A seeded subsample of ``size`` rows in their order (all rows when ``size`` is 0 or too large);
    ``by_group``: whole groups of the ``group`` column (:func:`_with_groups`) until at least ``size``
    rows (:func:`fl.data.sources.whole_groups`)."""
    if size <= 0 or size >= len(ds):
        return ds
    if by_group:
        return ds.select(sources.whole_groups(np.asarray(ds["group"][:]), size, seed))
    order = np.random.default_rng(seed).permutation(len(ds))[:size]
    return ds.select(np.sort(order))


#: How ``group`` ids are found where the data has no ``group-column``.
CONTAINMENT = "containment (each text joins the longest text containing it)"


def _needs_groups(data: DataConfig) -> bool:
    """Whether the training split is grouped by source (on the whole split, before ``train-size``):
    its own public split is drawn by source group, or a private user is a whole group."""
    own_public = not data.public_dataset and (data.public_fraction > 0 or data.public_size > 0)
    return data.user_unit == "source" or (own_public and data.public_split == "source")


def _with_groups(data: DataConfig, train: datasets.Dataset) -> tuple[datasets.Dataset, str]:
    """``train`` with an int64 ``group`` column, the source group of every row computed on the whole
    split (the ``group-column`` of a user's file, else :func:`fl.data.sources.containment_groups`),
    and how the groups were found."""
    if "group" in train.column_names:
        _, ids = np.unique(np.asarray(train["group"][:], dtype=str), return_inverse=True)
        train, how = train.remove_columns("group"), f"group-column {data.group_column!r}"
    else:
        ids, how = groups_cache.containment_groups(train["text"][:]), CONTAINMENT
    # add_column concatenates with the table under an index mapping (handle_empty's select): flatten first.
    return train.flatten_indices().add_column("group", np.asarray(ids, dtype=np.int64)), how


def _fold_to_roots(train: datasets.Dataset) -> tuple[datasets.Dataset, int]:
    """``user-unit = "source"``: the private rows reduced to one per source group, its longest text
    (ties: the first row; :func:`fl.data.sources.group_roots`), and how many rows were folded."""
    keep = sources.group_roots(train["text"][:], np.asarray(train["group"][:]))
    return train.select(keep), len(train) - len(keep)


@lru_cache(maxsize=8)
def _load_cached(data: DataConfig, seed: int, level: str, folder: str) -> TextDataset:
    # ``folder``: the data folder resolved from the environment too, part of the source's identity.
    with quiet_datasets():
        return _load(data, seed, level)


def _load(data: DataConfig, seed: int, level: str) -> TextDataset:
    source = _text_source(data)
    name = data.dataset
    if is_user_file(name):
        splits, label_names, sources = read_user_files(data)
        name = Path(name).name
    else:
        spec = REGISTRY[name]
        root = data.folder
        folder = root / (spec.local_folder or name) if root else None
        splits, label_names, sources = _read_local(spec, folder) if folder else _read_hub(spec)
        if spec.label_groups:
            splits, label_names = _merge_labels(splits, spec.label_groups, len(label_names))
    if len(label_names) < 2:
        raise ValueError(f"dataset {name!r} has {len(label_names)} class(es): a classifier needs at least 2")
    if data.empty_documents == "error":  # before the seeded split: the row is the file's row
        for role, ds in splits.items():
            refuse_empty(ds, role, sources[role])
    if "pool" in splits:
        parts = splits["pool"].train_test_split(test_size=data.test_fraction, seed=seed)
        splits = {"train": parts["train"], "test": parts["test"]}
    dropped: dict[str, int] = {}
    train = handle_empty(splits["train"], data.empty_documents, "train", dropped)
    test = handle_empty(splits["test"], data.empty_documents, "test", dropped)
    if "group" in test.column_names:  # a pool's test part: groups matter where the public split is drawn
        test = test.remove_columns("group")
    grouping = ""
    if _needs_groups(data):  # before the subsample: no source group straddles its boundary
        train, grouping = _with_groups(data, train)
    train = _subsample(train, data.train_size, seed, by_group=bool(grouping))
    test = _subsample(test, data.test_size, seed + 1)
    train, public, public_info = _public_part(data, train, test, label_names, seed, grouping)
    folded = 0
    if data.user_unit == "source":  # after the public split: the public side keeps every row
        train, folded = _fold_to_roots(train)
    # After subsampling and the public split, so that a document-level run and its non-private
    # reference (document-mechanism = "none") draw the same documents, less the short ones.
    short: dict[str, int] = {}
    # the document level drops short documents (data cache key); "drop-every-level" at every level (compare)
    if level == "document" or data.short_documents == "drop-every-level":
        train = handle_short(train, data.short_documents, "train", short)
        test = handle_short(test, data.short_documents, "test", short)
    if len(train) == 0 and public is not None:
        raise ConfigError(
            f"the public split took every training text ({len(public)} public, none private; "
            f"{public_info.get('groups', '?')} source groups): raise train-size or lower public-fraction / public-size"
        )
    # add_column concatenates with the table under an index mapping (a non-contiguous select): flatten first.
    train = train.flatten_indices().add_column("row", np.arange(len(train), dtype=np.int64))
    test = test.flatten_indices().add_column("row", np.arange(len(test), dtype=np.int64))
    if len(train) == 0 or len(test) == 0:
        raise ValueError(f"dataset {name!r} has an empty train or test split after filtering")
    if "group" in train.column_names:
        train = train.remove_columns("group")
    return TextDataset(
        name, train, test, public, len(label_names), label_names, source, dropped, short, public_info,
        data.user_unit, folded,
    )  # fmt: skip


def _public_part(
    data: DataConfig,
    train: datasets.Dataset,
    test: datasets.Dataset,
    label_names: list[str],
    seed: int,
    grouping: str,
) -> tuple[datasets.Dataset, datasets.Dataset | None, dict[str, Any]]:
    """The private training documents, the public documents and how they were obtained, with their
    measured overlap (:func:`fl.data.sources.measure_overlap`): public documents come from another
    dataset (``public-dataset``) or from the run's training split (:func:`fl.data.public_split.own_public`)."""
    if data.public_dataset:
        public, info = _other_public(data, label_names, seed)
        private_texts = train["text"][:]
    elif data.public_fraction > 0 or data.public_size > 0:
        is_public, info = own_public(data, train, seed, grouping, label_names)
        # The private texts from the whole split's column: a selected split's column is read row by row.
        private_texts = columns(train)[0][~is_public].tolist()
        public = train.select(np.flatnonzero(is_public))
        train = train.select(np.flatnonzero(~is_public))
        info["public_share"] = float(is_public.mean())
    else:
        return train, None, {}
    info["documents"] = len(public)
    public_texts = public["text"][:]
    info["overlap_private"] = sources.measure_overlap(public_texts, private_texts, seed + 5)
    info["overlap_test"] = sources.measure_overlap(public_texts, test["text"][:], seed + 6)
    info["negligible"] = sources.negligible(info["overlap_private"]) and sources.negligible(info["overlap_test"])
    if "group" in public.column_names:
        public = public.remove_columns("group")
    return train, public, info


def _other_public(data: DataConfig, label_names: list[str], seed: int) -> tuple[datasets.Dataset, dict[str, Any]]:
    """``public-dataset``: the training split of another registry dataset or file (seeded
    ``public-size`` subsample, optionally split into sentences), its labels mapped onto the run's."""
    from fl.data.sentences import split_sentences

    other = replace(
        data,
        dataset=data.public_dataset,
        public_dataset="",
        public_fraction=0.0,
        public_size=0,
        user_unit="row",
        train_size=0,
        test_size=0,
        test_file="",
        group_column="",
        label_names="",  # its own names: public-labels maps them to the run's
    )
    try:
        loaded = _load(other, seed, "sentence")  # every document, short or not
    except (ConfigError, FileNotFoundError, ValueError) as err:
        raise type(err)(f"public-dataset: {err}") from None
    mapping = public_label_map(loaded.label_names, label_names, data.public_labels, data.public_dataset)
    if data.public_size > len(loaded.train):
        raise ConfigError(
            f"public-size = {data.public_size} is more than the {len(loaded.train)} documents of public-dataset "
            f"{data.public_dataset!r} (its training split): set public-size <= {len(loaded.train)} (0 = all)"
        )
    import datasets as hf

    public = _subsample(loaded.train, data.public_size, seed + 7)
    labels = np.asarray([mapping[int(v)] for v in public["label"][:]], dtype=np.int64)
    added = _rows_for_missing_classes(loaded.train, mapping, labels, label_names, seed)
    if added:  # every run class needs a public text (the public models): one row of each class missed
        extra = loaded.train.select(list(added.values()))
        public = hf.concatenate_datasets(
            [public.select_columns(["text", "label"]), extra.select_columns(["text", "label"])]
        )
        labels = np.asarray([mapping[int(v)] for v in public["label"][:]], dtype=np.int64)
    texts = public["text"][:]
    if data.public_sentences:
        pieces = [
            (sentence, int(y)) for text, y in zip(texts, labels, strict=True) for sentence in split_sentences(text)
        ]
        texts, labels = [p[0] for p in pieces], np.asarray([p[1] for p in pieces], dtype=np.int64)
    public = hf.Dataset.from_dict({"text": list(texts), "label": labels})
    info = {
        "source": f"public-dataset {data.public_dataset!r} ({loaded.source}), its training split"
        + (", split into sentences" if data.public_sentences else ""),
        "split": "other dataset",
        "labels": {loaded.label_names[k]: label_names[v] for k, v in mapping.items()},
    }
    if added:
        info["added_for_classes"] = {name: 1 for name in added}
    return public, info


def _rows_for_missing_classes(
    train: datasets.Dataset, mapping: dict[int, int], labels: np.ndarray, label_names: list[str], seed: int
) -> dict[str, int]:
    """For each run class that no public row maps to, the first row of ``train`` (in a seeded order)
    that does: {class name: row index}."""
    missing = sorted(set(range(len(label_names))) - set(labels.tolist()))
    if not missing:
        return {}
    mapped = np.asarray([mapping[int(v)] for v in train["label"][:]], dtype=np.int64)
    order = np.random.default_rng([int(seed), 0x5EED, 7]).permutation(len(mapped))
    absent = [label_names[k] for k in missing if not bool((mapped == k).any())]
    if absent:
        raise ConfigError(
            f"public-dataset: its training split has no document of class {absent[0]!r}, so the public split cannot "
            "hold one: choose another public-dataset (docs: public-data)"
        )
    return {label_names[k]: int(order[mapped[order] == k][0]) for k in missing}


def public_groups(data: DataConfig, users: UsersConfig, level: str) -> np.ndarray:
    """The source group of every public document of the run, in the order of ``load(...).public`` (and of
    :func:`fl.maps.public_start.public_embeddings`): the containment groups of the public texts
    (:func:`fl.data.sources.containment_groups`), for splits of the public documents that keep a
    group on one side (``sanitas tune``'s hold-out). ``ValueError`` when the run has none."""
    loaded = load(data, users, level)
    public = getattr(loaded, "public", None)
    if public is None or len(public) == 0:
        raise ValueError("the run has no public documents: set public-fraction, public-size or public-dataset")
    return sources.containment_groups(public["text"][:])


def load(data: DataConfig, users: UsersConfig, level: str) -> TextDataset | SyntheticDataset:
    """Load the dataset that ``data`` describes, split and subsampled with ``users.seed`` (cached per process).

    ``level`` is the run's level (``RunConfig.release.level``): the document level drops documents of
    fewer than two sentences. Guarantees: deterministic for given arguments (and data folder);
    ``train``/``test`` carry ``text``, ``label`` and ``row``; public documents are disjoint from
    ``train``. Raises a one-line ``ValueError``/``FileNotFoundError`` naming the problem.
    ``dataset = "synthetic"`` gives a :class:`SyntheticDataset` of ``users.num_users`` training users
    (sizes and a generator, nothing materialised).
    """
    if data.synthetic:
        return SyntheticDataset(users.num_users, data.synthetic_test_users, data.synthetic_dim, users.seed)
    return _load_cached(data, int(users.seed), level, str(data.folder))
