"""``label-names``: a user file's class names in class-id order (fl.data.user_files.read_user_files), and
the config checks of the key (fl.config.run_config.validate)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fl import config
from fl.config import ConfigError
from fl.data import datasets
from tests.support.run_data import load_run, read_run_files

#: 10 messages, row i labelled LABELS[i]: 'spam' sorts after 'ham', so an order given as spam,ham differs
#: from the sorted one.
LABELS = ["ham", "spam", "ham", "ham", "spam", "ham", "ham", "ham", "spam", "ham"]


def _csv(path: Path, labels: list[str]) -> Path:
    path.write_text("message,category\n" + "".join(f"message number {i},{y}\n" for i, y in enumerate(labels)))
    return path


def _cfg(path: Path, **kw: object) -> config.RunConfig:
    return config.resolve({"dataset": str(path), "text-column": "message", "label-column": "category", **kw})


def _ids_by_row(ds: Any) -> list[int]:
    """The class id of each file row (rows are kept in the file's order before the seeded split)."""
    texts, labels = ds["text"][:], ds["label"][:]
    by_text = dict(zip(texts, labels, strict=True))
    return [by_text[f"message number {i}"] for i in range(len(texts))]


def test_without_label_names_the_classes_are_the_sorted_labels(tmp_path: Path) -> None:
    splits, names, _ = read_run_files(_cfg(_csv(tmp_path / "sms.csv", LABELS)))
    assert names == ["ham", "spam"]
    assert _ids_by_row(splits["pool"]) == [0, 1, 0, 0, 1, 0, 0, 0, 1, 0]


def test_label_names_order_is_the_class_id_order(tmp_path: Path) -> None:
    """Would catch ids assigned in sorted order: sorted, 'ham' would be 0 and 'spam' 1."""
    splits, names, _ = read_run_files(_cfg(_csv(tmp_path / "sms.csv", LABELS), **{"label-names": "spam, ham"}))
    assert names == ["spam", "ham"]
    assert _ids_by_row(splits["pool"]) == [1, 0, 1, 1, 0, 1, 1, 1, 0, 1]


def test_label_names_may_name_a_class_no_row_has(tmp_path: Path) -> None:
    splits, names, _ = read_run_files(_cfg(_csv(tmp_path / "sms.csv", LABELS), **{"label-names": "promo,spam,ham"}))
    assert names == ["promo", "spam", "ham"]
    assert _ids_by_row(splits["pool"]) == [2, 1, 2, 2, 1, 2, 2, 2, 1, 2]


def test_a_label_not_in_label_names_is_refused_in_one_line(tmp_path: Path) -> None:
    labels = [*LABELS[:7], "Spam", "Spam", "ham"]
    path = _csv(tmp_path / "sms.csv", labels)
    with pytest.raises(ValueError) as err:
        read_run_files(_cfg(path, **{"label-names": "ham,spam"}))
    assert str(err.value) == (
        f"data file {str(path)!r}: label 'Spam' at row 7 (and 1 more row(s)) is not in label-names ('ham', 'spam'); "
        "did you mean 'spam'?"
    )


def test_a_test_file_label_not_in_label_names_names_the_test_file(tmp_path: Path) -> None:
    train = _csv(tmp_path / "train.csv", LABELS)
    test = _csv(tmp_path / "test.csv", ["ham", "eggs"])
    with pytest.raises(ValueError, match=rf"^data file {str(test)!r}: label 'eggs' at row 1 is not in label-names"):
        read_run_files(_cfg(train, **{"label-names": "ham,spam", "test-file": str(test)}))


def _jsonl(path: Path, labels: list[int]) -> Path:
    path.write_text("".join(json.dumps({"text": f"doc {i}", "label": y}) + "\n" for i, y in enumerate(labels)))
    return path


def test_integer_labels_are_ids_and_get_the_names(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "news.jsonl", [2, 0, 1, 2, 0])
    splits, names, _ = read_run_files(config.resolve({"dataset": str(path), "label-names": "neg,neutral,pos"}))
    assert names == ["neg", "neutral", "pos"]
    assert splits["pool"]["label"][:] == [2, 0, 1, 2, 0]
    _, unnamed, _ = read_run_files(config.resolve({"dataset": str(path)}))
    assert unnamed == ["0", "1", "2"]


def test_integer_labels_beyond_the_names_are_refused(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "news.jsonl", [0, 1, 2, 1])
    with pytest.raises(ValueError) as err:
        read_run_files(config.resolve({"dataset": str(path), "label-names": "neg,pos"}))
    assert str(err.value) == (
        f"data file {str(path)!r}: label 2 at row 2 is out of range (label-names names 2 classes, ids 0..1; "
        "1 row(s) out of range)"
    )


def test_label_names_reach_the_loaded_dataset(tmp_path: Path) -> None:
    """Would catch label-names missing from what a dataset is read and cached by (the data section
    fl.data.datasets.load is keyed by): the second load would ignore it and return the sorted classes."""
    path = _csv(tmp_path / "sms.csv", LABELS * 3)
    sorted_names = load_run(_cfg(path, **{"test-fraction": 0.3}))
    given = load_run(_cfg(path, **{"test-fraction": 0.3, "label-names": "spam,ham"}))
    assert isinstance(sorted_names, datasets.TextDataset) and isinstance(given, datasets.TextDataset)
    assert (sorted_names.label_names, given.label_names) == (["ham", "spam"], ["spam", "ham"])
    assert [1 - y for y in sorted_names.train["label"][:]] == given.train["label"][:]


def test_label_names_are_refused_with_a_registry_dataset() -> None:
    with pytest.raises(ConfigError) as err:
        config.resolve({"dataset": "sst2", "label-names": "negative,positive"})
    assert str(err.value) == (
        "label-names = 'negative,positive' names the classes of your own data file; dataset = 'sst2' has fixed "
        "class names (leave label-names empty)"
    )


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("ham,,spam", "label-names = 'ham,,spam' has an empty name: list the class names separated by commas"),
        ("ham, spam, ham", "label-names = 'ham, spam, ham' names 'ham' more than once"),
        ("ham", "label-names = 'ham' names one class: a classifier needs at least 2"),
    ],
)
def test_bad_label_names_are_refused_in_one_line(names: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        config.resolve({"dataset": "my_messages.csv", "label-names": names})
    assert str(err.value) == message


def test_a_bare_file_name_is_a_user_file_for_the_user_data_keys() -> None:
    """A file named without a folder (``my_messages.csv``) takes label-names and group-column."""
    cfg = config.resolve({"dataset": "my_messages.csv", "label-names": "ham,spam", "group-column": "thread"})
    assert (cfg["label-names"], cfg["group-column"]) == ("ham,spam", "thread")
