"""``dataset = "synthetic"`` (scale and speed measurements only): users generated from (seed, user id)
alone, on the node, with no data file, no encoder and no text; and one small run end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fl import cohort as cohort_mod
from fl import config
from fl.config import ConfigError
from fl.data import datasets, synthetic
from fl.levels.spec import LevelSpec
from tests.conftest import REPO
from tests.support.run_data import load_run


def _cfg(**kw: object) -> config.RunConfig:
    return config.resolve({"dataset": "synthetic", "num-users": 60, "synthetic-test-users": 25, **kw})


def _no_files_no_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to read a dataset file or load an encoder fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the synthetic dataset read a data file or loaded an encoder")

    monkeypatch.setattr(datasets, "_load_cached", refuse)
    monkeypatch.setattr(cohort_mod, "encoder_dimension", refuse)
    monkeypatch.setattr(cohort_mod, "embed_texts", refuse)


def test_shapes_dtypes_and_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_files_no_encoder(monkeypatch)
    cfg = _cfg(**{"synthetic-dim": 48})
    ds = datasets.load(cfg.data, cfg.users, cfg.release.level)
    assert isinstance(ds, datasets.SyntheticDataset)
    assert (ds.num_train, ds.num_test, ds.dim, ds.num_classes, ds.public) == (60, 25, 48, 2, None)
    x, y = ds.rows("train", range(10, 20))
    assert x.dtype == np.float32 and x.shape == (10, 48) and y.dtype == np.int64 and y.shape == (10,)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-5)  # unit rows, like the encoder's
    assert set(np.unique(y)) <= {0, 1}
    assert cohort_mod.population_sizes(cfg.data, cfg.users, cfg.release.level) == (60, 25)
    assert "synthetic" in datasets.check_source(cfg.data, cfg.users)
    described = ds.describe()
    assert (described["train_documents"], described["test_documents"], described["synthetic_dim"]) == (60, 25, 48)
    assert "never for accuracy claims" in described["note"]
    json.dumps(described)  # goes into summary.json as it is


def test_a_cohort_needs_no_file_and_no_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_files_no_encoder(monkeypatch)
    cfg = _cfg(**{"synthetic-dim": 32, "users-per-node": 20})
    c = cohort_mod.build_cohort(LevelSpec.from_config(cfg), 1, 3)
    assert (c.train_users, c.test_users) == (range(20, 40), range(8, 17))
    assert c.train_emb.shape == (20, 32) and c.test_emb.shape == (9, 32)
    assert c.train_y.shape == (20,) and c.test_y.shape == (9,)
    np.testing.assert_array_equal(c.train_doc_user, np.arange(20, 40))  # one document per user
    np.testing.assert_array_equal(c.train_doc_rows, np.arange(20, 40))
    assert (c.num_train_users, c.num_test_users, c.num_classes, c.encoder_dim) == (60, 25, 2, 32)
    assert (c.map_dim, c.release_dim) == (16, 16)  # map-in = random, m' = 16, Purkayastha keeps m'
    assert c.train_text == [] and c.test_text == []
    ds = datasets.load(cfg.data, cfg.users, cfg.release.level)
    x, y = ds.rows("train", range(20, 40))
    np.testing.assert_array_equal(c.train_emb.numpy(), x)
    np.testing.assert_array_equal(c.train_y.numpy(), y)


def test_deterministic_per_seed_and_split() -> None:
    """Same (seed, split, user): same row; another seed or the other split: another row."""
    users = np.arange(0, 200)
    a = load_run(_cfg(**{"num-users": 500})).rows("train", users)
    b = load_run(_cfg(**{"num-users": 500})).rows("train", users)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    other_seed = load_run(_cfg(**{"num-users": 500, "seed": 7})).rows("train", users)
    assert not np.allclose(a[0], other_seed[0])
    test_split = load_run(_cfg(**{"num-users": 500, "synthetic-test-users": 500})).rows("test", users)
    assert not np.allclose(a[0], test_split[0])  # test users are other people


def test_a_users_row_does_not_depend_on_the_cohort_split() -> None:
    """User u's vector and label depend on (seed, u) only: not on users-per-node, the node,
    the block order, nor the total number of users."""
    rows: list[dict[int, tuple[np.ndarray, int]]] = []
    for users_per_node in (7, 10, 60):
        cfg = _cfg(**{"users-per-node": users_per_node, "synthetic-dim": 24})
        nodes = -(-60 // users_per_node)
        seen = {}
        for pid in range(nodes):
            c = cohort_mod.build_cohort(LevelSpec.from_config(cfg), pid, nodes)
            for i, u in enumerate(c.train_users):
                seen[u] = (c.train_emb[i].numpy(), int(c.train_y[i]))
        rows.append(seen)
    for seen in rows[1:]:
        assert seen.keys() == rows[0].keys() == set(range(60))
        for u, (x, y) in seen.items():
            np.testing.assert_array_equal(x, rows[0][u][0])
            assert y == rows[0][u][1]
    bigger = load_run(_cfg(**{"num-users": 10_000, "synthetic-dim": 24}))
    x, y = bigger.rows("train", [59, 3, 17])  # any order, any block, any population size
    for i, u in enumerate([59, 3, 17]):
        np.testing.assert_array_equal(x[i], rows[0][u][0])
        assert y[i] == rows[0][u][1]


def test_classes_are_balanced() -> None:
    """Each label is a fair coin: 20,480 users hold within 4 standard errors of half of each class
    (a biased or a constant label stream fails)."""
    n = 20_480
    ds = load_run(_cfg(**{"num-users": n, "synthetic-test-users": n, "synthetic-dim": 8, "map-dim": 8}))
    for split in ("train", "test"):
        _, y = ds.rows(split, np.arange(n))
        assert abs(y.mean() - 0.5) < 4 * 0.5 / np.sqrt(n), (split, y.mean())
        # and not periodic: both classes in every block of 64 users
        assert (y.reshape(-1, 64).min(axis=1) == 0).all() and (y.reshape(-1, 64).max(axis=1) == 1).all()


def test_normals_are_standard() -> None:
    """The Box-Muller stream behind the vectors: mean 0, variance 1, no correlation between
    neighbouring coordinates (a broken hash or a wrong radius fails)."""
    z = synthetic._normals(np.uint64(12345), np.arange(4000), 64).astype(np.float64)
    assert abs(z.mean()) < 4 / np.sqrt(z.size)
    assert abs(z.var() - 1.0) < 0.01
    assert abs(np.corrcoef(z[:, 0], z[:, 1])[0, 1]) < 4 / np.sqrt(4000)
    assert abs(np.corrcoef(z[:-1, 5], z[1:, 5])[0, 1]) < 4 / np.sqrt(4000)


def test_a_linear_probe_is_clearly_above_chance_but_not_perfect() -> None:
    """A least-squares linear classifier fit on 4,000 training users scores 4,000 test users
    clearly above chance and below 100% (the mixture's Bayes accuracy is Phi(1.2816) = 0.90);
    the Bayes direction itself scores about 0.90."""
    ds = load_run(_cfg(**{"num-users": 4000, "synthetic-test-users": 4000}))
    x, y = ds.rows("train", np.arange(4000))
    xt, yt = ds.rows("test", np.arange(4000))
    design = np.hstack([x, np.ones((len(x), 1), dtype=np.float32)]).astype(np.float64)
    w, *_ = np.linalg.lstsq(design, 2.0 * y - 1.0, rcond=None)
    probe = ((np.hstack([xt, np.ones((len(xt), 1))]) @ w > 0) == (yt == 1)).mean()
    assert 0.7 < probe < 0.97, probe
    bayes = ((xt @ ds.mean_direction() > 0) == (yt == 1)).mean()
    assert abs(bayes - 0.90) < 0.025, bayes


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num-users": 0}, "num-users > 0"),
        ({"word-mechanism": "cmp", "sentence-mechanism": "none"}, "word level is not supported"),
        (
            {
                "document-mechanism": "truncation",
                "sentence-mechanism": "none",
                "map-in": "identity",
                "public-fraction": 0.1,
            },
            "document level is not supported",
        ),
        ({"public-fraction": 0.1}, "public-fraction = 0.1"),
        ({"train-size": 10}, "train-size = 10"),
        ({"test-size": 5}, "test-size = 5"),
        ({"partitioner": "dirichlet"}, "partitioner = 'dirichlet'"),
    ],
)
def test_what_synthetic_data_cannot_do_is_refused(overrides: dict, message: str) -> None:
    # A config rule (fl.config.rules): refused when the config is resolved, before any data is touched.
    with pytest.raises(ConfigError, match=message):
        _cfg(**overrides)


def test_bad_requests_are_refused() -> None:
    cfg = _cfg()
    ds = datasets.load(cfg.data, cfg.users, cfg.release.level)
    with pytest.raises(ValueError, match=r"train users lie in \[0, 60\)"):
        ds.rows("train", [60])
    with pytest.raises(ValueError, match=r"test users lie in \[0, 25\)"):
        ds.rows("test", [-1])
    with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
        ds.rows("public", [0])
    with pytest.raises(ValueError, match="no documents to partition"):
        cohort_mod.user_partition(cfg.data, cfg.users, cfg.release.level)
    with pytest.raises(ConfigError, match="synthetic-dim must be >= 2"):
        _cfg(**{"synthetic-dim": 1})


SCRIPT = textwrap.dedent(
    """
    import json, sys
    import simulations

    result = simulations.run({"dataset": "synthetic", "num-users": 300, "synthetic-test-users": 60,
                              "synthetic-dim": 32, "users-per-node": 100, "num-server-rounds": 1,
                              "server-epochs": 1, "noise-seed": 0}, out=sys.argv[1], run_name="synthetic")
    print("RESULT " + json.dumps({"rounds": result.rounds, "summary": result.summary}))
    """
)


@pytest.mark.slow  # a Ray run (~30 s); the synthetic cohorts are checked in process above
def test_a_small_synthetic_run_end_to_end(tmp_path: Path) -> None:
    """``simulations.run`` on synthetic users (no data folder, no encoder) writes a complete round."""
    env = {k: v for k, v in os.environ.items() if k not in ("SANITAS_DATA_DIR",)}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "out")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sanitas: 300 training users, 60 test users on 3 simulated nodes" in proc.stdout
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    (record,) = result["rounds"]
    assert record["train_releases_total"] == 300 and record["test_users"] == 60
    assert 0.0 <= record["accuracy"] <= 1.0
    assert record["privacy"]["users_released"] >= 300
    summary = result["summary"]
    assert summary["users"] == {"train": 300, "test": 60, "nodes": 3, "nodes_hold_own_files": False}
    assert summary["data"]["dataset"] == "synthetic" and "never for accuracy claims" in summary["data"]["note"]
