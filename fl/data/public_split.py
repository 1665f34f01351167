"""The public split of a run's training split, and the labels of public data from another dataset.

* :func:`own_public`: which training rows are public: a seeded ``public-fraction`` of the source groups
  (or of the rows), or whole groups (or rows) until ``public-size`` texts (``fl.data.sources``);
* :func:`public_label_map`: how another dataset's classes map onto the run's (``public-labels``).

Part of :mod:`fl.data.datasets`, which loads the data and calls these.
"""

from __future__ import annotations

from typing import Any

import datasets
import numpy as np

from fl.config import ConfigError, DataConfig
from fl.data import sources


def own_public(
    data: DataConfig, train: datasets.Dataset, seed: int, grouping: str, label_names: list[str] | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Which training rows are public (bool [n]) and how they were drawn: a seeded ``public-fraction``
    of the source groups (``public-split = "source"``, the ``group`` column of :func:`_with_groups`) or
    of the rows, or (``public-size``) whole groups or rows in a seeded order until at least that many
    texts.

    Guarantees the public split holds every class of ``label_names`` (the public models need one
    document of each): a class the seeded draw missed gets the first whole group (or row) holding it
    in a seeded order (``info["added_for_classes"]``). A ``public-size`` that leaves no private row, or
    that is smaller than the number of classes, and a class without any training document are one-line
    ``ConfigError``s naming the key that sizes the split."""
    size, fraction = int(data.public_size), float(data.public_fraction)
    if size >= len(train):
        raise ConfigError(
            f"public-size = {size}: the training split has {len(train)} documents"
            + (f" (train-size = {data.train_size})" if data.train_size else "")
            + f" and the private users need at least one: set public-size below {len(train)}"
        )
    names = label_names or []
    if 0 < size < len(names):
        raise ConfigError(
            f"public-size = {size} cannot hold a public text of each of the {len(names)} classes: "
            f"set public-size >= {len(names)} (docs: public-data)"
        )
    is_public, info = _draw(data, train, seed, grouping, size, fraction)
    if names:
        added = _cover_classes(data, train, is_public, seed, names, size)
        if added:
            info["added_for_classes"] = added
            if info["split"] == "source":
                info["moved_to_public"] += sources.move_contained(train["text"][:], is_public)
    return is_public, info


def _cover_classes(
    data: DataConfig, train: datasets.Dataset, is_public: np.ndarray, seed: int, names: list[str], size: int
) -> dict[str, int]:
    """Add to ``is_public`` (in place), for each class it lacks, the first whole group (or row) holding
    that class in a seeded order; returns the documents added per class name. A class with no training
    document is refused, naming the key that sizes the split."""
    labels = np.asarray(train["label"][:], dtype=np.int64)
    present = np.bincount(labels[is_public], minlength=len(names)) > 0
    if bool(present.all()):
        return {}
    key = f"public-size = {size}" if size else f"public-fraction = {data.public_fraction:g}"
    units = np.asarray(train["group"][:]) if data.public_split == "source" else np.arange(len(labels))
    order = np.random.default_rng([int(seed), 0x5EED]).permutation(len(labels))  # a seeded order of the rows
    added: dict[str, int] = {}
    for k in np.flatnonzero(~present):
        rows = order[labels[order] == k]
        rows = rows[~is_public[rows]]
        if rows.size == 0:
            raise ConfigError(
                f"{key}: the training split has no document of class {names[k]!r}, so the public split cannot "
                "hold one: raise train-size or choose another dataset (docs: public-data)"
            )
        take = (units == units[rows[0]]) & ~is_public
        is_public |= take
        added[names[k]] = int(take.sum())
    return added


def _draw(
    data: DataConfig, train: datasets.Dataset, seed: int, grouping: str, size: int, fraction: float
) -> tuple[np.ndarray, dict[str, Any]]:
    """The seeded draw of :func:`own_public`, before any class is added."""
    until = f"in a seeded order until public-size = {size} texts"
    if data.public_split == "row":
        rng = np.random.default_rng(seed + 2)
        if size:
            is_public = np.zeros(len(train), dtype=bool)
            is_public[rng.permutation(len(train))[:size]] = True
            return is_public, {"source": f"training rows {until} (public-split = row)", "split": "row"}
        is_public = rng.random(len(train)) < fraction
        return is_public, {"source": "a seeded share of the training rows (public-split = row)", "split": "row"}
    texts, groups = train["text"][:], np.asarray(train["group"][:])
    if size:
        split = sources.source_split_size(texts, groups, size, seed + 2)
        how = f"whole source groups of the training split {until} (public-split = source)"
    else:
        split = sources.source_split(texts, groups, fraction, seed + 2)
        how = "a seeded share of the training split's source groups (public-split = source)"
    info = {"source": how, "split": "source", "grouping": grouping, "groups": split.groups}
    return split.is_public, {**info, "moved_to_public": split.moved_to_public}


def public_label_map(public_names: list[str], run_names: list[str], given: str, source: str) -> dict[int, int]:
    """Public class id -> the run's class id: by ``public-labels`` pairs, else by equal names
    (case-insensitive) or an unambiguous prefix ("neg" -> "negative"). Every public class must map
    to a run class, and every run class must receive one; otherwise a ``ConfigError`` says which."""
    from fl.config.run_config import public_label_pairs

    pairs = public_label_pairs(given)
    lower = [n.lower() for n in run_names]
    mapping: dict[int, int] = {}
    for k, name in enumerate(public_names):
        if pairs:
            target = pairs.get(name)
            if target is None:
                raise ConfigError(f"public-labels does not map the public class {name!r} of {source!r}")
            if target not in run_names:
                raise ConfigError(f"public-labels maps {name!r} to {target!r}, not a class of the run ({run_names})")
            mapping[k] = run_names.index(target)
            continue
        hits = [i for i, n in enumerate(lower) if n == name.lower()] or [
            i for i, n in enumerate(lower) if n.startswith(name.lower()) or name.lower().startswith(n)
        ]
        if len(hits) != 1:
            raise ConfigError(
                f"public-dataset {source!r}: its class {name!r} matches {'no' if not hits else 'several'} class of "
                f'the run ({run_names}); map them with public-labels = "{name} = <run class>, ..."'
            )
        mapping[k] = hits[0]
    unused = pairs.keys() - set(public_names)
    if unused:
        raise ConfigError(f"public-labels names {sorted(unused)}, not classes of {source!r} ({public_names})")
    missing = [run_names[i] for i in range(len(run_names)) if i not in mapping.values()]
    if missing:
        raise ConfigError(
            f"public-dataset {source!r} has no documents of the run's class(es) {missing}: "
            f"its classes are {public_names}"
        )
    return mapping
