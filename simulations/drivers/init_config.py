"""``sanitas init-config FILE``: a starting run config for a user's own data file (CSV, JSON Lines, Parquet).

:func:`summarise` reads the file (every column) and decides its text and label columns: those the user
names, else a guess (the label: a column named like one, else the column with the fewest distinct
values; the text: the string column with the longest mean length). :func:`config_entries` turns that
into the keys of a local-DP run that suits the data's size (the recipe of sst2_class_rr_4000.toml, the former
quickstart), each with the comments a newcomer needs: the file's classes and the majority-class rate a result
must beat, the public-data rule, and the next commands. :func:`init_config` writes it, after checking that it resolves.
Bad input is a one-line :class:`InitConfigError` (a ``ValueError``) naming what the user typed.
"""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fl.config.reference import toml_value
from mechanisms.suggest import did_you_mean

#: Column names taken for the label without looking further (case-insensitive), in this order of preference.
LABEL_COLUMN_NAMES = ("label", "labels", "category", "class", "target", "y")
#: At most this many classes: a label column with more distinct values is not a class label.
MAX_CLASSES = 100
#: Rows read to measure a column's mean text length (the label counts read every row).
LENGTH_SAMPLE = 10_000
TEST_FRACTION = 0.2
PUBLIC_FRACTION = 0.2
SEED = 42
#: The written config spreads the private users over about this many simulated nodes.
NODES = 8
#: From about this many public documents, tuning the encoder on them first is worth its CPU time.
TUNING_MIN_PUBLIC = 1000
#: The whole-record budget of the written recipe (sst2_class_rr_4000.toml, the former quickstart: chosen by
#: `sanitas tune` on SST-2's public sentences): the class through K-ary randomized response, the label through
#: randomized response.
SENTENCE_EPSILON, LABEL_EPSILON = 5.652, 0.628


class InitConfigError(ValueError):
    """Input ``sanitas init-config`` cannot use; the one-line message names what the user typed."""


@dataclass(frozen=True)
class DataSummary:
    """What :func:`summarise` found in a data file: its columns, the text and label columns, and the
    rows of each class, in class-id order (sorted names; integer labels: ids 0..k-1)."""

    path: str
    columns: tuple[str, ...]
    rows: int
    text_column: str  # comma-separated when several columns are joined
    label_column: str
    counts: dict[str, int]
    integer_labels: bool
    empty_texts: int
    mean_length: float  # characters of the (joined) text, over the first LENGTH_SAMPLE rows

    @property
    def names(self) -> list[str]:
        """The class names in class-id order (what ``label-names`` lists)."""
        return list(self.counts)

    @property
    def majority(self) -> tuple[str, float]:
        """The most frequent class and its share of the rows: what a model that always answers it scores."""
        name = max(self.counts, key=lambda n: self.counts[n])
        return name, self.counts[name] / self.rows


def _kind(values: Sequence[Any]) -> str:
    """``"string"``, ``"integer"`` (bools count, as for the run's labels), ``"number"`` or ``"other"``:
    the type of a column's non-null values."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, str) for v in present):
        return "string"
    if present and all(isinstance(v, int) for v in present):
        return "integer"
    if present and all(isinstance(v, int | float) for v in present):
        return "number"
    return "other"


def _mean_length(columns: dict[str, list[Any]], names: Sequence[str]) -> float:
    """Mean characters of the text the run reads: the named columns joined by spaces."""
    rows = min(len(columns[names[0]]), LENGTH_SAMPLE)
    total = sum(len(" ".join("" if columns[c][i] is None else str(columns[c][i]) for c in names)) for i in range(rows))
    return total / max(rows, 1)


def _named(given: str, option: str, columns: Sequence[str], path: str) -> list[str]:
    """The columns of ``--text-column``/``--label-column``, each a column of the file; else one line naming it."""
    names = [c.strip() for c in given.split(",")]
    for name in names:
        if name not in columns:
            raise InitConfigError(
                f"{option} {name!r} is not a column of {path!r}{did_you_mean(name, columns)} "
                f"(columns: {', '.join(columns)})"
            )
    return names


def guess_label_column(columns: dict[str, list[Any]], exclude: Sequence[str] = ()) -> str | None:
    """A column named like a label (:data:`LABEL_COLUMN_NAMES`), else the string or integer column with
    the fewest distinct values, at least 2 and at most :data:`MAX_CLASSES` and fewer than the rows (an id
    column is not a label); ``None`` when no column qualifies."""
    free = [c for c in columns if c not in exclude]
    by_name = {c.lower(): c for c in free}
    for name in LABEL_COLUMN_NAMES:
        if name in by_name:
            return by_name[name]
    best: tuple[int, str] | None = None
    for c in free:
        if _kind(columns[c]) not in ("string", "integer"):
            continue
        distinct = len(set(columns[c]))
        if 2 <= distinct <= MAX_CLASSES and distinct < len(columns[c]) and (best is None or distinct < best[0]):
            best = (distinct, c)
    return None if best is None else best[1]


def guess_text_column(columns: dict[str, list[Any]], exclude: Sequence[str] = ()) -> str | None:
    """The string column with the longest mean length (over the first rows); ``None`` when there is none."""
    strings = [c for c in columns if c not in exclude and _kind(columns[c][:LENGTH_SAMPLE]) == "string"]
    return max(strings, key=lambda c: _mean_length(columns, [c]), default=None)


def class_counts(labels: Sequence[Any], column: str, path: str) -> tuple[dict[str, int], bool]:
    """Rows per class in class-id order, and whether the labels are integer ids: names sorted (the run's
    order without ``label-names``), or ids 0..max (a class without rows counts 0). Refuses in one line
    what the run would refuse (an empty label, a negative id, a single class) and more than
    :data:`MAX_CLASSES` classes."""
    from fl.data.user_files import is_missing_label

    missing = [i for i, v in enumerate(labels) if is_missing_label(v)]
    if missing:
        raise InitConfigError(
            f"label column {column!r} of {path!r} is empty, null or NaN in {len(missing)} row(s) (first at row "
            f"{missing[0]}): the run refuses them; fill in or remove those rows"
        )
    integer = _kind(labels) == "integer"
    if integer:
        ids = Counter(int(v) for v in labels)
        if min(ids) < 0:
            raise InitConfigError(
                f"label column {column!r} of {path!r} has the integer label {min(ids)}: integer labels are class "
                "ids 0, 1, ..."
            )
        num = max(ids) + 1
        counts = {str(i): ids.get(i, 0) for i in range(num)} if num <= MAX_CLASSES else {}
    else:
        named = Counter(str(v) for v in labels)
        num, counts = len(named), {n: named[n] for n in sorted(named)}
    if num > MAX_CLASSES:
        raise InitConfigError(
            f"label column {column!r} of {path!r} has {num} classes (at most {MAX_CLASSES}): is it a label? "
            "name the label with --label-column"
        )
    present = [n for n, k in counts.items() if k]
    if len(present) < 2:
        raise InitConfigError(
            f"every row of {path!r} has label {present[0]!r} (label column {column!r}): a classifier needs at least "
            "2 classes"
        )
    return counts, integer


def summarise(path: str, text_column: str | None = None, label_column: str | None = None) -> DataSummary:
    """Read ``path`` and decide its text and label columns (``text_column``/``label_column`` when given,
    else guessed). Guarantees a label column with 2 to :data:`MAX_CLASSES` classes and no empty label
    (what the run refuses), or a one-line :class:`InitConfigError` naming the file or the option."""
    from fl.data.user_files import read_data_file

    try:
        ds = read_data_file(path)
    except (ValueError, OSError) as err:
        raise InitConfigError(str(err)) from None
    names = tuple(ds.column_names)
    columns = {c: ds[c][:] for c in names}
    texts = _named(text_column, "--text-column", names, path) if text_column else []
    label = _named(label_column, "--label-column", names, path)[0] if label_column else None
    if label is None:
        label = guess_label_column(columns, exclude=texts)
        if label is None:
            raise InitConfigError(
                f"no column of {path!r} looks like a label (a column named label, category, class, ... or one with "
                f"few distinct values): name it with --label-column (columns: {', '.join(names)})"
            )
    if not texts:
        guessed = guess_text_column(columns, exclude=[label])
        if guessed is None:
            raise InitConfigError(
                f"no text column in {path!r} besides label-column {label!r}: name it with --text-column "
                f"(columns: {', '.join(names)})"
            )
        texts = [guessed]
    if label in texts:
        raise InitConfigError(f"{label!r} of {path!r} cannot be both the text and the label column")
    counts, integer = class_counts(columns[label], label, path)
    joined = [" ".join("" if columns[c][i] is None else str(columns[c][i]) for c in texts) for i in range(len(ds))]
    return DataSummary(
        path=path,
        columns=names,
        rows=len(ds),
        text_column=",".join(texts),
        label_column=label,
        counts=counts,
        integer_labels=integer,
        empty_texts=sum(not t.strip() for t in joined),
        mean_length=_mean_length(columns, texts),
    )


@dataclass(frozen=True)
class Entry:
    """One key of the written config: its value, the comment lines above it and an inline comment."""

    key: str
    value: Any
    above: tuple[str, ...] = ()
    inline: str = ""


def _share(part: float) -> str:
    return f"{100 * part:.1f}%"


def _label_names(summary: DataSummary) -> tuple[str, str]:
    """``label-names`` as written and its comment: the names, or ``""`` when a name cannot be listed
    (a comma, or spaces around it, which the list would lose)."""
    if summary.integer_labels:
        return ",".join(summary.names), "integer labels are class ids: these name ids 0, 1, ... (rename them)"
    if all(n and "," not in n and n == n.strip() for n in summary.names):
        return ",".join(summary.names), "class ids 0, 1, ... in this order: reorder to change them"
    return "", "a class name holds a comma or outer spaces, so the classes stay the sorted labels"


def recipe(summary: DataSummary) -> dict[str, Any]:
    """The sizes the written config derives from the data: private users, users per node, public documents."""
    private = summary.rows * (1 - TEST_FRACTION) * (1 - PUBLIC_FRACTION)
    public = summary.rows * (1 - TEST_FRACTION) * PUBLIC_FRACTION
    return {
        "private_users": private,
        "public_documents": public,
        "users_per_node": max(1, min(1000, math.ceil(private / NODES))),
        "encoder_tuning": "public" if public >= TUNING_MIN_PUBLIC else "none",
    }


#: The ``--central-set`` overrides of the suggested comparison: the central model trains on the raw
#: embeddings (the supervised map belongs to the local recipe) for 30 rounds (DP-FedAvg takes one clipped
#: step per sampled user and round). The central runs keep the public part, so both sides train on the
#: same private users, and compare can check the central settings on those public documents first.
CENTRAL_SETS = ('map-in="identity"', "num-server-rounds=30")


def next_commands(config: str) -> list[str]:
    """The commands the header suggests, one line each (a long one continued with ``\\``): a run, a
    local-vs-central comparison (its central runs set by :data:`CENTRAL_SETS`), and the tuning of the
    recipe on the public documents."""
    central = " ".join(f"--central-set '{s}'" if '"' in s else f"--central-set {s}" for s in CENTRAL_SETS)
    return [
        f"sanitas run {config}",
        f"sanitas compare {config} --epsilons 2,6 --central-epsilons 1,4 --out results \\",
        f"    {central}",
        f"sanitas tune {config} --epsilons 3.14,6.28 --out results/tune",
    ]


def _comment(*paragraphs: str) -> tuple[str, ...]:
    """Comment lines: a blank ``#`` line, then each paragraph wrapped at 100 characters."""
    lines = ["#"]
    for text in paragraphs:
        lines += [f"# {line}" for line in textwrap.wrap(text, 98, break_long_words=False, break_on_hyphens=False)]
    return tuple(lines)


def config_entries(summary: DataSummary) -> list[Entry]:
    """The keys of the starting config, in the order written, with their comments."""
    sizes = recipe(summary)
    names, names_note = _label_names(summary)
    rarest = min((n for n in summary.names if summary.counts[n]), key=lambda n: summary.counts[n])
    rare_public = summary.counts[rarest] * (1 - TEST_FRACTION) * PUBLIC_FRACTION
    k = len(summary.names)
    return [
        Entry("dataset", summary.path, ("# --- The data file and its columns",), "relative to where you run sanitas"),
        Entry("text-column", summary.text_column, (), "comma-separated columns are joined by spaces"),
        Entry("label-column", summary.label_column),
        Entry("label-names", names, (), names_note),
        Entry(
            "test-fraction",
            TEST_FRACTION,
            _comment(
                "Test users: a seeded 20% of the rows (seed). To keep a fixed test set apart instead, put it in a "
                'file of its own with the same columns and set test-file = "my_test.csv".'
            ),
        ),
        Entry("seed", SEED),
        Entry(
            "empty-documents",
            "drop" if summary.empty_texts else "error",
            (),
            f"{summary.empty_texts} row(s) have empty text: dropped and counted"
            if summary.empty_texts
            else '"error" refuses documents with empty text; "drop" drops and counts them',
        ),
        Entry(
            "public-fraction",
            PUBLIC_FRACTION,
            _comment(
                "Public documents: a seeded 20% of the training rows is public. The server reads them in the clear "
                "and builds the map, the classifier's start (and a tuned encoder) from them at no privacy cost, so "
                'they must be independent of the users: no user\'s text in them. public-split = "source" keeps rows '
                'that share text on one side (group-column = "thread" keeps a column\'s groups together); '
                "summary.json reports the overlap. If no row of this file may be public, set public-fraction = 0 "
                'and take public documents from elsewhere: public-dataset = "other.csv" (public-labels maps its '
                "class names onto these).",
                f"About {sizes['public_documents']:,.0f} public documents; the rarest class ({rarest!r}) gets about "
                f"{rare_public:,.0f} of them. The supervised map needs public documents of every class: raise "
                "public-fraction if the run says one is missing.",
            ),
        ),
        Entry("public-split", "source"),
        Entry(
            "users-per-node",
            sizes["users_per_node"],
            _comment(
                f"Users: one document each, about {sizes['private_users']:,.0f} private users on about {NODES} "
                "simulated nodes; half the nodes train in each of 3 rounds."
            ),
        ),
        Entry("num-server-rounds", 3),
        Entry("fraction-train", 0.5),
        Entry(
            "encoder-tuning",
            sizes["encoder_tuning"],
            _comment(
                "What a user releases, once, under local DP: the public classifier's class of its document through "
                f"{k}-ary randomized response (class_rr, pure {SENTENCE_EPSILON}) and its label through randomized "
                f"response (pure {LABEL_EPSILON}): pure {SENTENCE_EPSILON + LABEL_EPSILON:g} per user for the whole "
                "record (the recipe of simulations/experiments/sst2_class_rr_4000.toml). M1 is the public logistic "
                'regression\'s logits and a constant (map-in = "supervised", map-dim = the number of classes). '
                "`sanitas tune` chooses the split of a budget on the public documents only (docs/public-data.md).",
            ),
            f'"public": tune the encoder on the public documents first (from ~{TUNING_MIN_PUBLIC:,}; one-off CPU cost)',
        ),
        Entry("map-in", "supervised"),
        Entry("map-dim", max(2, k)),
        Entry("map-scale", 1.0),
        Entry("sentence-mechanism", "class_rr"),
        Entry("sentence-epsilon", SENTENCE_EPSILON),
        Entry("label-mechanism", "rr"),
        Entry("label-epsilon", LABEL_EPSILON),
        Entry("server-epochs", 20),
        Entry("out-dir", "results"),
    ]


def render(summary: DataSummary, entries: Sequence[Entry], config: str) -> str:
    """The config file's text: a header (the file, its classes, the majority-class rate, the next
    commands), then each entry with its comments."""
    name, rate = summary.majority
    width = max(len(n) for n in summary.names)
    kind = "integer class ids" if summary.integer_labels else "class names"
    lines = [
        f"# A starting config for {summary.path}, written by `sanitas init-config`: edit it (every key:",
        "# docs/configuration.md; from a file to a comparison: docs/own-data.md).",
        *_comment(
            f"{summary.rows:,} rows; text-column {summary.text_column!r} (mean {summary.mean_length:,.0f} "
            f"characters), label-column {summary.label_column!r} ({kind}). The classes, in class-id order:"
        ),
        *(
            f"#   {n:<{width}}  {summary.counts[n]:>9,} rows ({_share(summary.counts[n] / summary.rows)})"
            for n in summary.names
        ),
        f"# A model that always answers {name!r} scores {rate:.3f}: a result must beat that (sanitas compare's",
        "# table flags the points that do not).",
        "#",
        "# Next: a run; local vs central DP (the central runs on raw embeddings for 30 rounds, the same",
        "# private users: docs/own-data.md); the recipe's budget split chosen on the public documents.",
        *(f"#   {command}" for command in next_commands(config)),
        "#",
    ]
    for entry in entries:
        lines += entry.above
        text = f"{entry.key} = {toml_value(entry.value)}"
        lines.append(f"{text}  # {entry.inline}" if entry.inline else text)
    return "\n".join(lines) + "\n"


def init_config(
    path: str,
    out: str | None = None,
    text_column: str | None = None,
    label_column: str | None = None,
    force: bool = False,
) -> tuple[Path, DataSummary]:
    """Write the starting config for ``path`` to ``out`` (default: ``<file stem>.toml`` here); returns
    the file written and the summary. Guarantees the written config resolves (:func:`fl.config.resolve`);
    refuses, in one line, an ``out`` that exists (unless ``force``) or is a folder, and bad input."""
    from fl import config as config_mod
    from fl.config.run_config import USER_FILE_SUFFIXES

    name = Path(path).name
    ending = next((e for e in sorted(USER_FILE_SUFFIXES, key=len, reverse=True) if name.lower().endswith(e)), "")
    stem = name[: len(name) - len(ending)] or "data"
    target = Path(out if out else f"{stem}.toml")
    if target.is_dir():
        raise InitConfigError(f"--out {str(target)!r} is a folder: give a file name, like {stem}.toml")
    if target.exists() and not force:
        raise InitConfigError(f"--out {str(target)!r} exists: give another name, or --force to overwrite it")
    if not target.parent.is_dir():
        raise InitConfigError(f"--out {str(target)!r}: the folder {str(target.parent)!r} does not exist")
    summary = summarise(path, text_column, label_column)
    entries = config_entries(summary)
    config_mod.resolve({e.key: e.value for e in entries})  # a config that does not resolve is a bug here
    target.write_text(render(summary, entries, str(target)))
    return target, summary
