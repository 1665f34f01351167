"""Source groups before the subsample, ``public-size`` of the training split, and ``user-unit = "source"``.

The hand-made phrases of ``test_sources.PHRASES`` have known containment groups (roots 0, 3, 6, 8);
the SST-2 figures are the quickstart's data (train-size 4000, 25% of the source groups public, seed 42).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from fl import config
from fl.data import datasets, sources
from tests.fl.data.test_sources import PHRASES
from tests.support.run_data import load_run

LABELS = [1, 1, 1, 0, 0, 0, 1, 1, 0, 0]
TEST_ROWS = "text,label\na fine film,1\na bad film,0\nthe film,1\n"


@pytest.fixture
def phrases(tmp_path: Path) -> dict[str, str]:
    """A user's training file of the ten phrases and a separate test file of three."""
    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in zip(PHRASES, LABELS)))
    (tmp_path / "test.csv").write_text(TEST_ROWS)
    return {"dataset": str(tmp_path / "train.csv"), "test-file": str(tmp_path / "test.csv")}


def _load(base: dict[str, str], **kw: object) -> datasets.TextDataset:
    ds = load_run(config.resolve({**base, **kw}))
    assert isinstance(ds, datasets.TextDataset)
    return ds


def test_a_source_user_holds_the_longest_text_of_its_group(phrases: dict[str, str]) -> None:
    """Each group's root replaces its phrases (6 rows folded into 4 users); the test users are untouched."""
    rows = _load(phrases)
    ds = _load(phrases, **{"user-unit": "source"})
    assert ds.train["text"][:] == [PHRASES[0], PHRASES[3], PHRASES[6], PHRASES[8]]
    assert ds.train["label"][:] == [1, 0, 1, 0]
    assert ds.train["row"][:] == [0, 1, 2, 3]
    assert ds.test["text"][:] == rows.test["text"][:] and len(ds.test) == 3
    described = ds.describe()
    assert (described["user_unit"], described["folded_into_root"], described["train_documents"]) == ("source", 6, 4)
    assert (rows.describe()["user_unit"], rows.describe()["folded_into_root"], len(rows.train)) == ("row", 0, 10)


def test_a_source_user_is_folded_after_the_public_split(phrases: dict[str, str]) -> None:
    """public-size = 3 (seed 1) makes groups 8 and 6 public, and "the film" with them (it is inside
    "i saw the film twice"); the private side folds to the roots of groups 0 and 3, the public side
    keeps every row."""
    ds = _load(phrases, **{"public-size": 3, "seed": 1, "user-unit": "source"})
    assert ds.public is not None
    assert ds.public["text"][:] == [PHRASES[2], PHRASES[6], PHRASES[8], PHRASES[9]]
    assert ds.train["text"][:] == [PHRASES[0], PHRASES[3]]
    assert ds.describe()["folded_into_root"] == 4  # 1, 7 into 0; 4, 5 into 3
    info = ds.public_info
    assert (info["documents"], info["moved_to_public"], info["groups"], info["split"]) == (4, 1, 4, "source")
    assert info["public_share"] == pytest.approx(0.4)


def test_a_group_column_user_keeps_the_first_of_equally_long_texts(tmp_path: Path) -> None:
    rows = [("aa bb", "g1", 0), ("cc dd", "g1", 1), ("eee", "g2", 1), ("ffff", "g2", 0), ("ggg", "g3", 1)]
    (tmp_path / "mine.csv").write_text("text,doc,label\n" + "".join(f"{t},{g},{y}\n" for t, g, y in rows))
    (tmp_path / "test.csv").write_text("text,doc,label\nx,t,0\ny,t,1\n")
    base = {"dataset": str(tmp_path / "mine.csv"), "test-file": str(tmp_path / "test.csv"), "group-column": "doc"}
    ds = _load(base, **{"user-unit": "source"})
    assert ds.train["text"][:] == ["aa bb", "ffff", "ggg"] and ds.train["label"][:] == [0, 0, 1]
    assert ds.describe()["folded_into_root"] == 2
    assert ds.train.column_names == ["text", "label", "row"]


def test_the_subsample_draws_whole_groups_where_groups_matter(phrases: dict[str, str]) -> None:
    """train-size = 5 with user-unit = "source": groups 3, 6 and 8 (6 rows), whole; without a reason to
    group (no public split of the training data, user-unit = "row") the subsample stays by row."""
    ds = _load(phrases, **{"train-size": 5, "user-unit": "source"})
    assert ds.train["text"][:] == [PHRASES[3], PHRASES[6], PHRASES[8]]
    assert ds.describe()["folded_into_root"] == 3
    by_row = _load(phrases, **{"train-size": 5})
    assert len(by_row.train) == 5
    assert by_row.train["text"][:] == [PHRASES[i] for i in (0, 3, 5, 6, 7)]  # "a movie" without its root's group


def test_public_size_by_row_draws_exactly_that_many(phrases: dict[str, str]) -> None:
    ds = _load(phrases, **{"public-size": 3, "public-split": "row", "seed": 1})
    assert ds.public is not None and len(ds.public) == 3 and len(ds.train) == 7
    assert ds.public_info["documents"] == 3 and ds.public_info["split"] == "row"
    assert config.has_public(config.resolve({**phrases, "public-size": 3}))
    assert not config.has_public(config.resolve(phrases))


def _full_groups(data_dir: Path) -> tuple[dict[str, int], Counter[int], list[str]]:
    """SST-2's containment groups on the whole training split: normalised text -> group, group sizes,
    and the normalised texts (a group's id is its root's index)."""
    full = [
        sources.normalise(t)
        for t in datasets._read_local(datasets.REGISTRY["sst2"], data_dir / "sst2")[0]["train"]["text"][:]
    ]
    groups = sources.containment_groups(full)
    return dict(zip(full, groups.tolist())), Counter(groups.tolist()), full


def test_the_quickstart_subsample_is_whole_source_groups(data_dir: Path) -> None:
    """The quickstart's data (train-size 4000, public-fraction 0.25 by source, seed 42): every source group
    of the whole training split is wholly in or out of the 4,000 rows, and no private row shares its group
    with a public row of that group's own (a row whose text is in no other group's root). Before, the
    subsample was drawn by row and grouped after: 2,909 private rows, 124 of them in a group with such a
    public row (188 with any public row). The 240 private rows that share a group with any public row now
    are all in the groups of the 20 phrases moved to the public side because a public sentence of another
    source contains them."""
    ds = load_run(config.resolve({"data-dir": str(data_dir), "train-size": 4000, "public-fraction": 0.25, "seed": 42}))
    assert isinstance(ds, datasets.TextDataset) and ds.public is not None
    info = ds.public_info
    assert (len(ds.train), len(ds.public), info["groups"], info["moved_to_public"]) == (2877, 1123, 391, 20)
    group_of, sizes, full = _full_groups(data_dir)
    private = [group_of[sources.normalise(t)] for t in ds.train["text"][:]]
    public_texts = [sources.normalise(t) for t in ds.public["text"][:]]
    drawn = Counter(private + [group_of[t] for t in public_texts])
    assert all(drawn[g] == sizes[g] for g in drawn)  # whole groups of the whole split
    roots = sources._WordIndex()
    for root in sizes:
        roots.add(root, full[root])
    own = {group_of[t] for t in public_texts if set(roots.containers(t)) == {group_of[t]}}
    shared = {group_of[t] for t in public_texts} - own
    assert sum(g in own for g in private) == 0
    assert sum(g in shared for g in private) == 240


def test_public_size_of_the_training_split_on_sst2(data_dir: Path) -> None:
    """public-size = 1000 of the quickstart's 4,000 rows: whole groups until 1,038 texts are public
    (22 moved with them), or exactly 1,000 rows by row."""
    base = {"data-dir": str(data_dir), "train-size": 4000, "public-size": 1000, "seed": 42}
    ds = load_run(config.resolve(base))
    assert isinstance(ds, datasets.TextDataset) and ds.public is not None
    info = ds.public_info
    assert (info["documents"], len(ds.train), info["moved_to_public"], info["split"]) == (1038, 2962, 22, "source")
    assert "public-size = 1000" in info["source"]
    by_row = load_run(config.resolve({**base, "public-split": "row"}))
    assert isinstance(by_row, datasets.TextDataset) and by_row.public is not None
    assert (by_row.public_info["documents"], len(by_row.train)) == (1000, 3000)


def _twenty_rows(path: Path) -> str:
    """A two-class file of 20 rows with labels 0/1 (a single split: 16 training rows after the test split)."""
    path.write_text("text,label\n" + "".join(f"document number {i},{i % 2}\n" for i in range(20)))
    return str(path)


@pytest.mark.parametrize(
    ("toml", "sets", "line"),
    [
        (
            'dataset = "sst2"\ntrain-size = 200\npublic-labels = "0 = negative, 1 = positive"\n',
            ["public-dataset={file}", "public-size=1000"],
            "sanitas: error: public-size = 1000 is more than the 16 documents of public-dataset '{file}' (its "
            "training split): set public-size <= 16 (0 = all)",
        ),
        (
            'dataset = "{file}"\n',
            ["public-size=1000"],
            "sanitas: error: public-size = 1000: the training split has 16 documents and the private users need at "
            "least one: set public-size below 16",
        ),
        (
            'dataset = "{file}"\n',
            ["public-size=5", "public-fraction=0.2"],
            "sanitas: error: public-size = 5 and public-fraction = 0.2 both size the public split of the training "
            "data: set public-fraction = 0 to draw public-size documents",
        ),
        (
            'dataset = "{file}"\npublic-split = "row"\n',
            ["public-size=1"],
            "sanitas: error: public-size = 1 cannot hold a public text of each of the 2 classes: set public-size >= 2 "
            "(docs: public-data)",
        ),
    ],
    ids=["more-than-the-public-dataset", "more-than-the-training-split", "with-public-fraction", "below-the-classes"],
)
def test_a_public_size_that_cannot_be_drawn_is_refused_before_the_run(
    toml: str,
    sets: list[str],
    line: str,
    tmp_path: Path,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """``sanitas run CONFIG --set public-size=...``: exit 2 and one line naming what was typed and the
    number available, no traceback, nothing written (a file of 20 rows used to give 16 silently)."""
    from simulations import cli

    file = _twenty_rows(tmp_path / "twenty.csv")
    (tmp_path / "run.toml").write_text(toml.replace("{file}", file))
    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    monkeypatch.setattr("flwr.simulation.run_simulation", _no_simulation)
    out = tmp_path / "out"
    args = [word for s in sets for word in ("--set", s.replace("{file}", file))]
    capfd.readouterr()
    code = cli.main(["run", str(tmp_path / "run.toml"), "--out", str(out), *args])
    err = capfd.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert [x for x in err.splitlines() if x.strip()] == [line.replace("{file}", file)]
    assert not out.exists() or not any(out.iterdir())


def _no_simulation(*args: object, **kwargs: object) -> None:
    raise AssertionError("reached Flower's run_simulation: the input was not refused before Ray started")


def _rare_class_file(path: Path, rare: int = 1) -> str:
    """60 rows: classes 0 and 1 alternate, and ``rare`` rows of class 2 (a rare class)."""
    rows = [f"document number {i},{i % 2}\n" for i in range(60 - rare)] + [f"rare one {i},2\n" for i in range(rare)]
    path.write_text("text,label\n" + "".join(rows))
    return str(path)


@pytest.mark.parametrize("split", ["row", "source"])
def test_a_public_draw_holds_every_class(split: str, tmp_path: Path) -> None:
    """A rare class the seeded draw misses gets a group (or row) of its own on the public side, recorded
    in added_for_classes; a draw that already holds every class is the plain seeded draw. Without the
    rule most seeds miss the one rare row (4 public texts of 60)."""
    (tmp_path / "test.csv").write_text("text,label\na,0\nb,1\nc,2\n")
    base = {
        "dataset": _rare_class_file(tmp_path / "rare.csv"),
        "test-file": str(tmp_path / "test.csv"),
        "public-split": split,
        "public-size": 4,
    }
    added = 0
    for seed in range(1, 9):
        ds = _load(base, seed=seed)
        assert ds.public is not None and set(ds.public["label"][:]) == {0, 1, 2}, seed
        if "added_for_classes" in ds.public_info:
            assert set(ds.public_info["added_for_classes"]) == {"2"}
            added += 1
        assert len(ds.public) + len(ds.train) == 60  # the rest of the rows stay private
    assert added >= 5  # the rule did the work on most seeds


def test_a_public_dataset_sample_holds_every_class(tmp_path: Path, data_dir: Path, monkeypatch) -> None:
    """public-dataset with public-size: a class the subsample missed gets one row of it."""
    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    other = _rare_class_file(tmp_path / "rare.csv", rare=4)
    own = tmp_path / "own.csv"
    own.write_text("text,label\n" + "".join(f"row {i},{i % 3}\n" for i in range(30)))
    base = {"dataset": str(own), "public-dataset": other, "public-size": 3}
    for seed in range(1, 5):
        ds = _load(base, seed=seed)
        assert ds.public is not None and set(ds.public["label"][:]) == {0, 1, 2}, seed
