"""Sources of documents: which items share text, a public split by source, and the measured overlap.

Public data is only public if it is independent of the private users (ARCHITECTURE.md, "Public data
and fair comparisons"). Some datasets are made of overlapping pieces of the same sources: GLUE
SST-2's training set holds every phrase of the parse trees of ~8.5k review sentences, so a split
by row puts private users' sentences, word for word, into the public split. This module

* groups items by source from the data alone (:func:`containment_groups`): every text belongs to
  the *longest* text of the collection that contains it verbatim (word-aligned), its *root*;
* draws whole groups (:func:`whole_groups`), so that a subsample of the training split (``train-size``)
  never cuts a group in two: a group is grouped on the whole split, before any subsample;
* splits groups, not rows, into public and private (:func:`source_split` by a share of the groups,
  :func:`source_split_size` until a number of texts); an item whose text is contained in a public
  root is public text, so it goes to the public side too, whatever its group (a private user never
  holds a text that occurs verbatim in a public document);
* splits groups class by class (:func:`stratified_groups`), so that both sides of a tuning split of the
  public documents hold every class that two groups or more hold;
* keeps one item per group (:func:`group_roots`: its longest text) where a user is a whole group;
* measures what is left (:func:`measure_overlap`): exact duplicates and verbatim containment of
  private texts in public texts, on a seeded sample, for every run's summary.

Written by hand: no maintained library groups a corpus by verbatim containment. Texts are
compared after :func:`normalise` (lower case, whitespace collapsed, padded with one space) so
that containment is word-aligned ("art" is not inside "party"). Candidate containers of a text
are found through its rarest word (an inverted index from word to the texts holding it), then
checked with Python's substring search, so the work is near-linear on natural text.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Minimum number of words of a text counted in the containment figure (shorter texts, like "the",
#: are inside almost every document of any corpus and say nothing about independence).
MIN_CONTAINED_WORDS = 3
#: Private texts sampled (seeded) for the containment measurement.
CONTAINMENT_SAMPLE = 2000


def normalise(text: str) -> str:
    """``" " + lower-cased words joined by single spaces + " "``: word-aligned substring tests."""
    return " " + " ".join(str(text).lower().split()) + " "


class _WordIndex:
    """Inverted index word -> ids of the indexed texts that hold it, for finding containers."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.ids: list[int] = []
        self.postings: dict[str, list[int]] = defaultdict(list)

    def add(self, item: int, text: str) -> None:
        slot = len(self.texts)
        self.texts.append(text)
        self.ids.append(item)
        for word in set(text.split()):
            self.postings[word].append(slot)

    def containers(self, text: str) -> list[int]:
        """Indexed item ids whose text contains ``text`` word-aligned, in the order they were indexed."""
        words = set(text.split())
        if not words:
            return []
        lists = [self.postings.get(w) for w in words]
        if any(lst is None for lst in lists):
            return []
        rarest = min(lists, key=len)  # type: ignore[arg-type]
        return [self.ids[slot] for slot in rarest if text in self.texts[slot]]  # type: ignore[union-attr]


def containment_groups(texts: Sequence[str]) -> np.ndarray:
    """The source group of every text: the index of the longest text that contains it (its root).

    Guarantees: texts equal after :func:`normalise` share a group; a text contained verbatim
    (word-aligned) in a longer text of the collection gets that text's group, the longest such
    container, ties broken by the lower index; a text contained in no other is its own root.
    Deterministic. Returns int64 [n] of root indices.
    """
    norm = [normalise(t) for t in texts]
    order = sorted(range(len(norm)), key=lambda i: (-len(norm[i]), i))
    roots = _WordIndex()
    group = np.empty(len(norm), dtype=np.int64)
    for i in order:
        found = roots.containers(norm[i])
        if found:
            group[i] = found[0]  # roots are indexed longest first: the first is the longest
        else:
            group[i] = i
            roots.add(i, norm[i])
    return group


@dataclass(frozen=True)
class SourceSplit:
    """Which items are public, and how the split was made."""

    is_public: np.ndarray  # bool [n]
    groups: int  # number of source groups
    moved_to_public: int  # private-group items whose text occurs in a public text


def whole_groups(groups: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Sorted indices of whole groups drawn in a seeded order until they hold at least ``size`` items.

    Guarantees: every group is either wholly in or wholly out; the count is ``size`` plus less than
    the last group's size (all items when ``size`` reaches the total). Deterministic for ``seed``.
    """
    labels = np.asarray(groups)
    if size >= len(labels):
        return np.arange(len(labels))
    chosen = _first_groups_holding(labels, size, np.random.default_rng(seed))
    return np.flatnonzero(chosen)


def _first_groups_holding(labels: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """bool [n]: the items of the first groups of a random order of ``labels``' groups that hold at
    least ``size`` items together (none when ``size`` <= 0)."""
    return first_groups(labels, size, rng.permutation(len(np.unique(labels))))


def first_groups(labels: np.ndarray, size: int, order: np.ndarray) -> np.ndarray:
    """bool [n]: the items of the first groups, in ``order`` (a permutation of the indices of ``labels``'
    sorted distinct groups), that hold at least ``size`` items together (none when ``size`` <= 0).
    Every group is wholly in or wholly out."""
    unique, inverse, counts = np.unique(np.asarray(labels), return_inverse=True, return_counts=True)
    taken = int(np.searchsorted(np.cumsum(counts[order]), size)) + 1 if size > 0 else 0
    chosen_group = np.zeros(len(unique), dtype=bool)
    chosen_group[order[:taken]] = True
    return chosen_group[inverse]


def stratified_groups(
    groups: np.ndarray, labels: np.ndarray, fraction: float, order: np.ndarray, undrawn_holds_all: bool = False
) -> np.ndarray:
    """bool [n]: the items of whole groups drawn class by class, so that the drawn side holds about ``fraction``
    of each class and each side holds every class that two groups or more hold (the tuning splits of the public
    documents: ``fl.maps.recipes``' hold-out and the halves of its fitting part).

    ``groups`` [n]: each item's group (containment roots, a group column); ``labels`` [n]: its class (int >= 0);
    ``order``: a permutation of the indices of ``groups``' sorted distinct values, the order groups are drawn in.

    1. each group is filed under the rarest class it holds (fewest items in the collection, ties to the lower
       class): a group of mixed classes counts for the class that is hardest to place;
    2. within each class's file, whole groups in ``order`` are drawn until they hold at least
       ``max(1, round(fraction * the file's items))`` items, never the file's last group (a class that one
       group holds stays undrawn);
    3. a class that two groups or more hold and that one side lacks gets a group holding it moved across: the
       first in ``order`` whose move leaves the other side every class it held; with ``undrawn_holds_all`` the
       undrawn side is given every class of the collection, whatever the drawn side loses (the side a model is
       fitted on, which needs every class). Where no move qualifies the side lacks the class; the caller reads
       which from the result.

    Every group is wholly drawn or wholly not. With one class it is :func:`first_groups` at
    ``max(1, round(fraction * n))`` items that never draws the last group. Deterministic for ``order``."""
    labels = np.asarray(labels, dtype=np.int64)
    unique, inverse = np.unique(np.asarray(groups), return_inverse=True)
    if len(labels) == 0:
        return np.zeros(0, dtype=bool)
    k = int(labels.max()) + 1
    holds = np.zeros((len(unique), k), dtype=np.int64)  # items of each class in each group
    np.add.at(holds, (inverse, labels), 1)
    rarest_first = np.argsort(holds.sum(axis=0), kind="stable")
    rank = np.empty(k, dtype=np.int64)
    rank[rarest_first] = np.arange(k)
    filed = rarest_first[np.where(holds > 0, rank[None, :], k).argmin(axis=1)]
    position = np.empty(len(unique), dtype=np.int64)
    position[np.asarray(order)] = np.arange(len(unique))
    sizes = holds.sum(axis=1)
    drawn = np.zeros(len(unique), dtype=bool)
    for c in rarest_first:
        members = np.flatnonzero(filed == c)
        if len(members) < 2:
            continue
        members = members[np.argsort(position[members])]
        quota = max(1, round(fraction * int(sizes[members].sum())))
        take = min(int(np.searchsorted(np.cumsum(sizes[members]), quota)) + 1, len(members) - 1)
        drawn[members[:take]] = True
    for c in rarest_first:
        holders = np.flatnonzero(holds[:, c] > 0)
        holders = holders[np.argsort(position[holders])]
        for side in (True, False):
            forced = undrawn_holds_all and not side
            if (drawn[holders] == side).any() or (len(holders) < 2 and not forced):
                continue
            counts = holds[drawn != side].sum(axis=0)  # the other side's classes, which a move must keep
            for g in holders:
                if forced or not ((counts > 0) & (counts - holds[g] == 0)).any():
                    drawn[g] = side
                    break
    return drawn[inverse]


def source_split(texts: Sequence[str], groups: np.ndarray, fraction: float, seed: int) -> SourceSplit:
    """Public/private split by source group (any labels: containment roots or a group column): a seeded
    ``fraction`` of the groups is public.

    Guarantees: no group has items on both sides, except that an item of a private group whose
    text is contained verbatim in a public text moves to the public side (its text is public);
    hence no private text equals or is contained in a public text. Deterministic for ``seed``.
    """
    unique, inverse = np.unique(np.asarray(groups), return_inverse=True)
    public_group = np.random.default_rng(seed).random(len(unique)) < fraction
    is_public = public_group[inverse]
    return SourceSplit(is_public, len(unique), move_contained(texts, is_public))


def source_split_size(texts: Sequence[str], groups: np.ndarray, size: int, seed: int) -> SourceSplit:
    """Public/private split by source group: whole groups, in a seeded order, until at least ``size``
    texts are public (``public-size`` of the training split).

    Guarantees those of :func:`source_split`; at least ``size`` items are public (all when ``size``
    reaches the total): ``size`` plus less than the last group drawn, plus the moved items.
    Deterministic for ``seed``.
    """
    labels = np.asarray(groups)
    is_public = _first_groups_holding(labels, size, np.random.default_rng(seed))
    return SourceSplit(is_public, len(np.unique(labels)), move_contained(texts, is_public))


def move_contained(texts: Sequence[str], is_public: np.ndarray) -> int:
    """Mark public (in place) every private item whose text is contained verbatim in a public text;
    returns how many moved."""
    index = _WordIndex()
    for i in np.flatnonzero(is_public):
        index.add(int(i), normalise(texts[int(i)]))
    moved = 0
    for i in np.flatnonzero(~is_public):
        if index.containers(normalise(texts[int(i)])):
            is_public[i] = True
            moved += 1
    return moved


def group_roots(texts: Sequence[str], groups: np.ndarray) -> np.ndarray:
    """Sorted indices of one item per group: its longest text (after :func:`normalise`), ties to the
    first item. For containment groups that is the group's root, which contains the group's other
    texts verbatim. Deterministic."""
    labels = np.asarray(groups)
    if len(labels) == 0:
        return np.zeros(0, dtype=np.int64)
    lengths = np.array([len(normalise(t)) for t in texts], dtype=np.int64)
    order = np.lexsort((np.arange(len(labels)), -lengths, labels))  # by group, longest first, first row
    first = np.ones(len(order), dtype=bool)
    first[1:] = labels[order][1:] != labels[order][:-1]
    return np.sort(order[first])


def measure_overlap(
    public_texts: Sequence[str],
    private_texts: Sequence[str],
    seed: int,
    sample: int = CONTAINMENT_SAMPLE,
    min_words: int = MIN_CONTAINED_WORDS,
) -> dict[str, Any]:
    """Overlap between public and private texts, as a run's summary reports it.

    * ``exact_duplicates``: private texts equal (after :func:`normalise`) to some public text,
      counted over all private texts;
    * ``contained_fraction``: among a seeded sample of ``sample`` private texts of at least
      ``min_words`` words, the share contained verbatim (word-aligned) in some public text, with
      the sample size and a 95% Wilson interval; ``contained_fraction_8_words`` the same among
      the sampled texts of 8 words or more.
    """
    public_norm = [normalise(t) for t in public_texts]
    private_norm = [normalise(t) for t in private_texts]
    public_set = set(public_norm)
    duplicates = sum(1 for t in private_norm if t in public_set)
    eligible = np.array([i for i, t in enumerate(private_norm) if len(t.split()) >= min_words], dtype=np.int64)
    rng = np.random.default_rng(seed)
    chosen = eligible if len(eligible) <= sample else np.sort(rng.choice(eligible, size=sample, replace=False))
    index = _WordIndex()
    for j, t in enumerate(public_norm):
        index.add(j, t)
    contained = np.array([bool(index.containers(private_norm[int(i)])) for i in chosen], dtype=bool)
    long = np.array([len(private_norm[int(i)].split()) >= 8 for i in chosen], dtype=bool)
    return {
        "public_texts": len(public_norm),
        "private_texts": len(private_norm),
        "exact_duplicates": int(duplicates),
        "min_words": int(min_words),
        "sampled": int(len(chosen)),
        "contained": int(contained.sum()),
        "contained_fraction": _share(contained),
        "contained_interval": _wilson(int(contained.sum()), len(chosen)),
        "sampled_8_words": int(long.sum()),
        "contained_fraction_8_words": _share(contained[long]),
    }


def negligible(overlap: dict[str, Any], threshold: float = 0.01, duplicates: float = 0.001) -> bool:
    """At most a ``duplicates`` share of the private texts duplicated (generic short sentences of
    another corpus, like "i loved it", do occur) and at most ``threshold`` of the sampled private
    texts contained in a public text."""
    share = overlap.get("contained_fraction")
    dup = overlap.get("exact_duplicates", 0) / max(1, overlap.get("private_texts", 1))
    return dup <= duplicates and (share is None or share <= threshold)


def _share(flags: np.ndarray) -> float | None:
    return float(flags.mean()) if len(flags) else None


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> list[float] | None:
    """95% Wilson score interval of a binomial proportion k / n."""
    if n == 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [float(max(0.0, centre - half)), float(min(1.0, centre + half))]
