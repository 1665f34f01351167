"""Users' own data files (CSV, JSON Lines, Parquet): reading them with the run's columns, checking their
labels and documents (one clear error naming the file), and a SuperNode's own file (``data-path``)."""

from __future__ import annotations

import gzip
import json
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fl.config import ConfigError, DataConfig
from fl.config.run_config import USER_FILE_SUFFIXES, label_name_list
from fl.config.run_config import is_user_file as is_user_file  # decided with the config checks; re-exported
from mechanisms.suggest import did_you_mean

if TYPE_CHECKING:
    import datasets


def standardise(
    ds: datasets.Dataset, text_cols: tuple[str, ...], label_col: str, source: str, group_col: str = ""
) -> datasets.Dataset:
    """``text`` (the text columns joined by spaces) and ``label`` columns of one source, and its source
    ``group`` column (as strings) when ``group_col`` names one (``group-column``)."""
    named = (("text-column", text_cols), ("label-column", (label_col,)), ("group-column", (group_col,)))
    missing = [c for c in (*text_cols, label_col, *([group_col] if group_col else [])) if c not in ds.column_names]
    if missing:
        keys = " / ".join(k for k, cols in named if set(cols) & set(missing))
        raise ConfigError(f"{source}: columns {missing} not found ({keys}); available columns: {ds.column_names}")
    extra = [group_col] if group_col else []
    if text_cols == ("text",):
        ds = ds.select_columns(["text", label_col, *extra])
    else:
        ds = ds.map(lambda r: {"_t": " ".join(str(r[c]) for c in text_cols)}, remove_columns=None)
        ds = ds.select_columns(["_t", label_col, *extra]).rename_column("_t", "text")
    if label_col != "label":
        ds = ds.rename_column(label_col, "label")
    if group_col:
        ds = ds.map(lambda b: {"_g": [str(v) for v in b[group_col]]}, batched=True, remove_columns=[group_col])
        ds = ds.rename_column("_g", "group")
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


def read_data_file(path: str) -> datasets.Dataset:
    """A user's data file as it is, every column (what ``sanitas init-config`` inspects): guarantees at
    least one row, or a one-line ``ValueError``/``FileNotFoundError`` naming the file and the problem."""
    file = Path(path).expanduser()
    if not file.name.lower().endswith(USER_FILE_SUFFIXES):
        raise ValueError(f"data file {path!r}: not a .csv, .jsonl, .json or .parquet file (gzipped .csv.gz, .jsonl.gz)")
    if not file.is_file():
        raise FileNotFoundError(f"data file {path!r} not found")
    if file.stat().st_size == 0:
        raise ValueError(f"data file {path!r} is empty")
    with quiet_datasets():
        return _read_file(_builder(path), path)


def is_missing_label(v: Any) -> bool:
    """A label the run refuses: None, NaN, or empty or whitespace-only text."""
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _check_labels(labels: list[Any], path: str, column: str) -> None:
    """Every row has a label: no empty, null or NaN one (a one-line ``ValueError`` naming the file)."""
    missing = [i for i, v in enumerate(labels) if is_missing_label(v)]
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
            row = next(i for i, v in enumerate(labels) if not isinstance(v, int | np.integer) or isinstance(v, bool))
            raise ValueError(f"data file {path!r}: label {labels[row]!r} at row {row} is not an integer class id")
        return  # string labels: class names
    values = np.asarray(labels, dtype=np.int64)
    high = np.iinfo(np.int64).max if num_classes is None else num_classes
    bad = np.flatnonzero((values < 0) | (values >= high))
    if bad.size:
        rule = (
            "integer labels are class ids 0, 1, ..."
            if num_classes is None
            else f"{names_file or 'label-names'} names {num_classes} classes, ids 0..{num_classes - 1}"
        )
        raise ValueError(
            f"data file {path!r}: label {int(values[bad[0]])} at row {int(bad[0])} is out of range ({rule}; "
            f"{int(bad.size)} row(s) out of range)"
        )


def read_user_files(data: DataConfig) -> tuple[dict[str, datasets.Dataset], list[str], dict[str, str]]:
    """The user's data file (and test file): splits, class names and each split's file.

    Class ids follow ``label-names`` when it is set (string labels must each be one of its names;
    integer labels are ids below its count), else the distinct string labels in sorted order
    (integer labels are the ids themselves). Guarantees a ``label`` column of class ids and at least
    2 classes among the labels, or a one-line ``ValueError`` naming the file.
    """
    files = {"train": data.dataset}
    if data.test_file:
        files["test"] = data.test_file
    text_cols = tuple(c.strip() for c in data.text_column.split(","))
    label_col = data.label_column
    splits = {}
    for role, path in files.items():
        group_col = data.group_column if role == "train" else ""  # groups matter where the public split is drawn
        splits[role] = standardise(
            _read_file(_builder(path), path), text_cols, label_col, f"data file {path!r}", group_col
        )
        _check_integer_labels(splits[role]["label"][:], path, label_col)
    sources = {role: f"data file {path!r}" for role, path in files.items()}
    if "test" not in splits:
        splits, sources, files = {"pool": splits["train"]}, {"pool": sources["train"]}, {"pool": files["train"]}
    values = sorted({str(v) for ds in splits.values() for v in ds["label"][:]})
    if len(values) < 2:
        raise ValueError(
            f"data file {data.dataset!r}: every document has label {values[0]!r} (label-column {label_col!r}): "
            "a classifier needs at least 2 classes"
        )
    given = label_name_list(data.label_names)
    if all(isinstance(v, int | np.integer) for ds in splits.values() for v in ds["label"][:100]):
        if given:  # the ids must have names: ids 0..len(given)-1
            for role, ds in splits.items():
                _check_integer_labels(ds["label"][:], files[role], label_col, len(given))
        num = int(max(max(ds["label"][:]) for ds in splits.values())) + 1
        return splits, given or [str(i) for i in range(num)], sources
    if given:
        for role, ds in splits.items():
            _check_named(ds["label"][:], files[role], given)
    names = given or values  # without label-names: sorted, so the mapping is deterministic
    index = {v: i for i, v in enumerate(names)}
    splits = {
        r: ds.map(
            lambda b: {"label_id": [index[str(v)] for v in b["label"]]}, batched=True, remove_columns=["label"]
        ).rename_column("label_id", "label")
        for r, ds in splits.items()
    }
    return splits, names, sources


def _check_named(labels: list[Any], path: str, names: list[str]) -> None:
    """Every string label is one of ``label-names``; else a one-line ``ValueError`` naming the file, the
    first unknown label, its row and the names (with the closest name, when one is close)."""
    known = set(names)
    unknown = [i for i, v in enumerate(labels) if str(v) not in known]
    if unknown:
        label, more = str(labels[unknown[0]]), len(unknown) - 1
        raise ValueError(
            f"data file {path!r}: label {label!r} at row {unknown[0]}{f' (and {more} more row(s))' if more else ''} "
            f"is not in label-names ({', '.join(map(repr, names))}){did_you_mean(label, names)}"
        )


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


def refuse_empty(ds: datasets.Dataset, split: str, source: str) -> None:
    """``empty-documents = "error"``: a one-line error naming the split, its file and the first empty row."""
    empty = _empty_rows(ds)
    if empty.any():
        first = int(np.flatnonzero(empty)[0])
        where = f"{source} (" if split == "pool" else f"the {split} split ({source}, "
        raise ValueError(
            f"{int(empty.sum())} empty document(s) in {where}first at row {first}; empty or whitespace-only text); "
            'set empty-documents = "drop" to drop and count them'
        )


def handle_empty(ds: datasets.Dataset, policy: str, split: str, dropped: dict[str, int]) -> datasets.Dataset:
    """``empty-documents = "drop"``: drop the empty documents of a split and count them ("error": they
    were refused in the files, before the split, by :func:`refuse_empty`)."""
    if policy == "error":
        dropped[split] = 0
        return ds
    empty = _empty_rows(ds)
    if empty.any():
        ds = ds.select(np.flatnonzero(~empty))
    dropped[split] = int(empty.sum())
    return ds


def handle_short(ds: datasets.Dataset, policy: str, split: str, dropped: dict[str, int]) -> datasets.Dataset:
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


def read_node_file(
    data: DataConfig, path: str, label_names: list[str], *, num_users: int, level: str
) -> datasets.Dataset:
    """A node's own training documents (node config ``data-path``): one document per user, read as
    the user-file loader reads ``dataset`` (CSV, JSON Lines or Parquet; ``text-column``,
    ``label-column``, ``empty-documents``, and at the document ``level`` ``short-documents``);
    ``num_users`` is the run's and must be 0.

    Labels are the run's classes: integer ids ``0..len(label_names)-1`` or the class names of the
    run's dataset. Guarantees ``text``, ``label`` and ``row`` (the file's order after filtering),
    or a one-line ``ValueError``/``FileNotFoundError`` naming the file and the problem.
    """
    file = Path(path).expanduser()
    if not file.name.lower().endswith(USER_FILE_SUFFIXES):
        raise ValueError(f"data-path {path!r}: not a .csv, .jsonl or .parquet file")
    if not file.is_file():
        raise FileNotFoundError(f"data-path {path!r} not found")
    if num_users != 0:
        raise ValueError(f"data-path {path!r}: a node's own file holds one document per user; set num-users = 0")
    text_cols = tuple(c.strip() for c in data.text_column.split(","))
    with quiet_datasets():
        ds = standardise(_read_file(_builder(path), path), text_cols, data.label_column, f"data-path {path!r}")
    labels = ds["label"][:]
    _check_labels(labels, path, data.label_column)
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
    if data.empty_documents == "error":
        refuse_empty(ds, "pool", f"data-path {path!r}")
    dropped: dict[str, int] = {}
    ds = handle_empty(ds, data.empty_documents, "train", dropped)
    if level == "document":
        ds = handle_short(ds, data.short_documents, "train", dropped)
    if len(ds) == 0:
        raise ValueError(f"data-path {path!r}: no documents left after filtering")
    return ds.add_column("row", np.arange(len(ds), dtype=np.int64))


@contextmanager
def quiet_datasets() -> Iterator[None]:
    """No ``datasets`` progress bars while a dataset is read and prepared (a refused file leaves one line)."""
    import datasets

    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()
