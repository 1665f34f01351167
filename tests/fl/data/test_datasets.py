"""Dataset registry, local files, user files, splits and the empty-document policy."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fl import config
from fl.data import datasets
from tests.support.run_data import check_run_source, load_run


def _cfg(data_dir: Path, **kw: object) -> dict:
    return config.resolve({"data-dir": str(data_dir), **kw})


def test_sst2_local_counts(data_dir: Path) -> None:
    ds = load_run(_cfg(data_dir))
    assert (len(ds.train), len(ds.test), ds.num_classes) == (67_349, 872, 2)
    assert ds.label_names == ["negative", "positive"]
    assert ds.train.column_names == ["text", "label", "row"]
    assert ds.source.startswith("local")


@pytest.mark.parametrize(("name", "classes"), [("agnews", 4), ("qnli", 2)])
def test_single_split_datasets_get_a_seeded_split(data_dir: Path, name: str, classes: int) -> None:
    a = load_run(_cfg(data_dir, dataset=name, seed=3))
    b = load_run(_cfg(data_dir, dataset=name, seed=3, **{"test-fraction": 0.2000001}))
    assert a.num_classes == classes
    assert len(a.test) == pytest.approx(0.2 * (len(a.train) + len(a.test)), abs=1)
    _assert_partition_of_the_source(a, data_dir / name / f"{datasets.REGISTRY[name].local_splits['pool']}.jsonl.gz")
    assert a.test["text"][:5] == b.test["text"][:5]  # same seed, same split


def _assert_partition_of_the_source(ds: datasets.TextDataset, source: Path) -> None:
    """train and test split the source rows: each source row lands in exactly one of them.

    Rows are compared as (text, label) multisets, train + test == the source file, so a row copied
    into both splits (a leak), a lost row or a relabelled one fails, and a text can sit in both
    splits only as often as the source file itself repeats it. (The staged AG News test file and
    the QNLI dev file repeat no text at all: for them this means the splits' texts are disjoint.)
    """
    with gzip.open(source, "rt", encoding="utf-8") as f:
        rows = Counter((r["text"], r["label"]) for r in map(json.loads, f))
    train, test = Counter(zip(ds.train["text"], ds.train["label"])), Counter(zip(ds.test["text"], ds.test["label"]))
    assert train + test == rows, (sum((train + test - rows).values()), sum((rows - train - test).values()))


def test_qnli_text_is_question_plus_sentence(data_dir: Path) -> None:
    ds = load_run(_cfg(data_dir, dataset="qnli"))
    assert "?" in ds.train["text"][0]


def test_empty_documents_policy(data_dir: Path) -> None:
    """20 Newsgroups has 18 + 16 empty bodies: refused by default, dropped and counted on request."""
    with pytest.raises(ValueError, match=r"18 empty document\(s\) in the train split"):
        load_run(_cfg(data_dir, dataset="20newsgroups"))
    ds = load_run(_cfg(data_dir, dataset="20newsgroups", **{"empty-documents": "drop"}))
    assert ds.dropped_empty == {"train": 18, "test": 16}
    assert len(ds.train) == 11_314 - 18


def test_subsample_and_public_split(data_dir: Path) -> None:
    """A public split by source subsamples whole source groups (of the whole split) until train-size
    rows: 1,018 rows of 96 groups here; by row, or with no public split of the training data, exactly
    train-size rows."""
    ds = load_run(_cfg(data_dir, **{"train-size": 1000, "test-size": 100, "public-fraction": 0.25}))
    assert len(ds.test) == 100
    assert ds.public is not None and (len(ds.train), len(ds.public)) == (798, 220)
    assert (ds.public_info["groups"], ds.public_info["moved_to_public"]) == (96, 1)
    assert list(ds.train["row"]) == list(range(len(ds.train)))
    by_row = load_run(
        _cfg(data_dir, **{"train-size": 1000, "test-size": 100, "public-fraction": 0.25, "public-split": "row"})
    )
    assert by_row.public is not None and (len(by_row.train), len(by_row.public)) == (723, 277)
    assert len(load_run(_cfg(data_dir, **{"train-size": 1000})).train) == 1000


def test_user_csv_with_string_labels_and_one_split(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    rows = ["review,sentiment"] + [f"text number {i},{'good' if i % 3 else 'bad'}" for i in range(50)]
    path.write_text("\n".join(rows) + "\n")
    ds = load_run(config.resolve({"dataset": str(path), "text-column": "review", "label-column": "sentiment"}))
    assert ds.label_names == ["bad", "good"] and ds.num_classes == 2
    assert len(ds.train) + len(ds.test) == 50 and len(ds.test) == 10
    assert set(np.unique(ds.train["label"])) <= {0, 1}


def test_user_jsonl_train_and_test_files(tmp_path: Path) -> None:
    for split, n in (("train", 30), ("test", 7)):
        (tmp_path / f"{split}.jsonl").write_text(
            "".join(f'{{"text": "doc {i}", "label": {i % 2}}}\n' for i in range(n))
        )
    cfg = config.resolve({"dataset": str(tmp_path / "train.jsonl"), "test-file": str(tmp_path / "test.jsonl")})
    ds = datasets.load(cfg.data, cfg.users, cfg.release.level)
    assert (len(ds.train), len(ds.test)) == (30, 7)


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"dataset": "sst3"}, ValueError, "unknown dataset 'sst3'"),
        ({"dataset": "/nope/data.csv"}, FileNotFoundError, "data file '/nope/data.csv' not found"),
    ],
)
def test_bad_sources(data_dir: Path, overrides: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        check_run_source(_cfg(data_dir, **overrides))


def test_missing_local_files_named(tmp_path: Path) -> None:
    (tmp_path / "imdb").mkdir()
    with pytest.raises(FileNotFoundError, match=r"dataset 'imdb': missing train.jsonl.gz, test.jsonl.gz"):
        check_run_source(_cfg(tmp_path, dataset="imdb"))


def test_env_var_data_dir(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    assert check_run_source(config.resolve({})).startswith("local")


def test_20newsgroups_merged_into_nine_categories(data_dir: Path) -> None:
    """Every one of the 20 groups lands in exactly one of 9 categories; counts add up."""
    full = load_run(_cfg(data_dir, dataset="20newsgroups", **{"empty-documents": "drop"}))
    nine = load_run(_cfg(data_dir, dataset="20newsgroups9", **{"empty-documents": "drop"}))
    assert nine.num_classes == 9 and len(nine.label_names) == 9 and len(nine.train) == len(full.train)
    groups = dict(datasets.REGISTRY["20newsgroups9"].label_groups)
    old = np.asarray(full.train["label"])
    new = np.asarray(nine.train["label"])
    for k, name in enumerate(nine.label_names):
        members = groups[name]
        assert np.isin(old[new == k], members).all()
        assert (new == k).sum() == np.isin(old, members).sum()
    assert full.label_names[17] == "talk.politics.mideast" and nine.label_names[new[old == 17][0]] == "politics.mideast"


def test_short_documents_policy_at_the_document_level(tmp_path: Path) -> None:
    rows = [
        "One sentence only.",
        "Two sentences here. And here.",
        "Three. Four five. Six!",
        "",
        "Short",
        "A. B is two.",
        # Long documents enough that the public split (one of each class) leaves private ones.
        *[f"Document {w}. It has two sentences." for w in ("alpha", "beta", "gamma", "delta")],
    ]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(f'{{"text": "{t}", "label": {i % 2}}}\n' for i, t in enumerate(rows)))
    base = {"dataset": str(path), "empty-documents": "drop", "test-fraction": 0.5, "public-fraction": 0.0}
    # Without a document mechanism nothing is filtered by length.
    assert len(load_run(config.resolve(base)).train) + len(load_run(config.resolve(base)).test) == 9
    doc = {
        **base,
        "document-mechanism": "truncation",
        "sentence-mechanism": "none",
        "map-in": "identity",
        "public-fraction": 0.01,
    }
    with pytest.raises(ValueError, match="fewer than 2 sentences.*short-documents"):
        load_run(config.resolve({**doc, "short-documents": "error"}))
    ds = load_run(config.resolve(doc))
    assert sum(ds.dropped_short.values()) == 3  # "A." is an initial: "A. B is two." is one sentence
    assert ds.describe()["dropped_short_documents"] == ds.dropped_short


def _fake_glue_sst2() -> object:
    """An in-memory stand-in for ``load_dataset("nyu-mll/glue", "sst2")`` (same columns and features)."""
    import datasets as hf

    features = hf.Features(
        {
            "sentence": hf.Value("string"),
            "label": hf.ClassLabel(names=["negative", "positive"]),
            "idx": hf.Value("int32"),
        }
    )

    def split(n: int, offset: int) -> hf.Dataset:
        rows = {"sentence": [f"review {offset + i}" for i in range(n)], "label": [i % 2 for i in range(n)]}
        return hf.Dataset.from_dict({**rows, "idx": list(range(n))}, features=features)

    return hf.DatasetDict({"train": split(40, 0), "validation": split(10, 1000), "test": split(10, 2000)})


def test_without_a_local_folder_the_hub_id_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets as hf

    calls: list[tuple] = []

    def fake_load(path: str, name: str | None = None, **kw: object) -> object:
        calls.append((path, name))
        return _fake_glue_sst2()

    monkeypatch.delenv("SANITAS_DATA_DIR", raising=False)
    monkeypatch.setattr(hf, "load_dataset", fake_load)
    ds = load_run(config.resolve({"data-dir": "", "seed": 9091}))
    assert calls == [("nyu-mll/glue", "sst2")]
    assert ds.source.startswith("hub nyu-mll/glue/sst2")
    assert (len(ds.train), len(ds.test), ds.label_names) == (40, 10, ["negative", "positive"])
    assert ds.test["text"][0] == "review 1000"  # GLUE's validation split is the test split


def test_local_folder_wins_over_the_hub(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets as hf

    def refuse(*args: object, **kw: object) -> object:
        if args and args[0] == "json":  # the local files go through the json builder
            return real(*args, **kw)
        raise AssertionError("the hub must not be contacted when a local folder is given")

    real = hf.load_dataset
    monkeypatch.setattr(hf, "load_dataset", refuse)
    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    ds = load_run(config.resolve({"data-dir": "", "seed": 9092, "train-size": 50}))
    assert ds.source.startswith("local")


def test_hub_failure_says_how_to_use_local_files(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets as hf

    def offline(*args: object, **kw: object) -> object:
        raise ConnectionError("Couldn't reach 'nyu-mll/glue' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.delenv("SANITAS_DATA_DIR", raising=False)
    monkeypatch.setattr(hf, "load_dataset", offline)
    with pytest.raises(FileNotFoundError, match="SANITAS_DATA_DIR.*hub failed.*ConnectionError|hub failed"):
        load_run(config.resolve({"data-dir": "", "seed": 9093}))
