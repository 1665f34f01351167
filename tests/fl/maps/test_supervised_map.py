"""map-in = "supervised": an affine M1 from the public split only (fl.maps.input_map.supervised_map), its
scale chosen on a public hold-out (fl.maps.public_start.choose_map_scale), carried in homogeneous form
[d + 1, m'] from the server to the clients, with the mechanism's guarantee unchanged."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict
from sklearn.linear_model import LogisticRegression

import mechanisms
from clients.ldp_client import node_map
from fl import config, wire
from fl.levels.channels import make_channels
from fl.levels.spec import LevelSpec
from fl.maps import input_map as maps
from fl.maps.public_start import PublicSpec, choose_map_scale, public_embeddings, supervised_start
from strategies.local.accounting import LocalDPAccounting
from strategies.local.release_training import ReleaseTraining
from strategies.modes.local import guarantee_statement
from tests.support.grids import FakeGrid, task_identity  # noqa: F401  (the fixture, by name)

GOOD = ["wonderful", "moving", "brilliant", "delightful", "superb", "charming", "funny", "gorgeous"]
BAD = ["dull", "tedious", "awful", "boring", "clumsy", "lifeless", "painful", "hollow"]
THINGS = ["film", "story", "cast", "script", "ending", "score", "pacing", "direction"]


def _docs(n: int, offset: int = 0) -> list[dict[str, object]]:
    """Short reviews whose label is the sentiment of their adjective."""
    rows = []
    for i in range(offset, offset + n):
        label = i % 2
        adj = (GOOD if label else BAD)[(i // 2) % 8]
        rows.append({"text": f"the {THINGS[(i // 16) % 8]} was {adj} ({i})", "label": label})
    return rows


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _cfg(train: Path, test: Path, cache_dir: Path, **kw: object) -> config.RunConfig:
    return config.resolve(
        {
            "dataset": str(train),
            "test-file": str(test),
            "public-fraction": 0.5,
            "map-in": "supervised",
            "map-dim": 2,
            "sentence-epsilon": 4.0,
            "server-epochs": 1,
            "hidden-dim": 16,
            "batch-size": 32,
            "cache-dir": str(cache_dir),
            "device": "cpu",
            "seed": 3,
            **kw,
        }
    )


def _blobs(n: int = 300, d: int = 12, k: int = 2, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % k
    centres = 2.0 * torch.randn(k, d, generator=gen)
    return centres[y] + torch.randn(n, d, generator=gen), y


# ------------------------------------------------------------------ the map itself
def test_binary_map_is_the_public_logit_and_a_constant() -> None:
    x, y = _blobs()
    matrix = maps.supervised_map(x, y, num_classes=2, m_prime=2, scale=0.5)
    assert matrix.shape == (13, 2) and matrix.dtype == torch.float64
    assert torch.all(matrix[:-1, 1] == 0) and matrix[-1, 1] == 0.5  # the constant coordinate
    mapped = maps.apply_input_map(x, matrix)
    assert torch.allclose(mapped.norm(dim=1), torch.ones(len(y), dtype=torch.float64))
    clf = LogisticRegression(C=1.0, max_iter=5000).fit(x.double().numpy(), y.numpy())
    assert np.array_equal((mapped[:, 0] > 0).numpy(), clf.predict(x.double().numpy()) == 1)
    logits = x.double() @ matrix[:-1, 0] + matrix[-1, 0]
    assert float(logits.pow(2).mean().sqrt()) == pytest.approx(1.0)  # in units of the public RMS


def test_larger_maps_add_principal_directions_orthogonal_to_the_logit() -> None:
    x, y = _blobs()
    matrix = maps.supervised_map(x, y, num_classes=2, m_prime=4, scale=1.0)
    assert matrix.shape == (13, 4)
    w, extra = matrix[:-1, 0], matrix[:-1, 1:3]
    assert torch.allclose(extra.T @ w, torch.zeros(2, dtype=torch.float64), atol=1e-8)
    coords = x.double() @ extra + matrix[-1, 1:3]
    assert torch.allclose(coords.mean(dim=0), torch.zeros(2, dtype=torch.float64), atol=1e-8)  # centred
    assert torch.allclose(coords.std(dim=0), torch.ones(2, dtype=torch.float64))  # unit public spread


def test_multiclass_map_uses_the_sum_zero_logits() -> None:
    x, y = _blobs(k=3)
    matrix = maps.supervised_map(x, y, num_classes=3, m_prime=3, scale=1.0)
    assert matrix.shape == (13, 3) and matrix[-1, 2] == 1.0
    clf = LogisticRegression(C=1.0, max_iter=5000).fit(x.double().numpy(), y.numpy())
    logits = clf.decision_function(x.double().numpy())
    centred = logits - logits.mean(axis=1, keepdims=True)
    coords = (x.double() @ matrix[:-1, :2] + matrix[-1, :2]).numpy()
    # The two coordinates are an isometric image of the centred logits (up to the common RMS scale).
    gram = coords @ coords.T
    assert np.allclose(gram / gram.max(), (centred @ centred.T) / (centred @ centred.T).max(), atol=1e-6)
    with pytest.raises(ValueError, match="needs map-dim >= 3 for 3 classes"):
        maps.supervised_map(x, y, num_classes=3, m_prime=2, scale=1.0)
    with pytest.raises(ValueError, match="every class"):
        maps.supervised_map(x[y < 2], y[y < 2], num_classes=3, m_prime=3, scale=1.0)
    with pytest.raises(ValueError, match="scale must be > 0"):
        maps.supervised_map(x, y, num_classes=3, m_prime=3, scale=0.0)


def test_affine_maps_are_applied_without_a_gradient_path_and_shape_checked() -> None:
    x, y = _blobs(n=40)
    matrix = maps.supervised_map(x, y, 2, 2, 0.25)
    raw = x.clone().requires_grad_(True)
    out = maps.apply_input_map(raw, matrix.clone().requires_grad_(True))
    assert not out.requires_grad
    expected = torch.nn.functional.normalize(x.double() @ matrix[:-1] + matrix[-1], dim=1)
    assert torch.allclose(out, expected)
    maps.check_map_shape(matrix, 12, 2)
    maps.check_map_shape(matrix[:-1], 12, 2)  # a linear M1 still passes
    with pytest.raises(ValueError, match=r"expected \(12, 3\) \(linear\) or \(13, 3\)"):
        maps.check_map_shape(matrix, 12, 3)
    with pytest.raises(ValueError, match="computed from the public split"):
        maps.input_map("supervised", 12, 2, 0)


# ------------------------------------------------------------------ choosing the scale on public data
def test_scale_is_the_best_candidate_on_a_seeded_public_hold_out() -> None:
    x, y = _blobs(n=120, d=6)
    cfg = config.resolve({"server-epochs": 4, "hidden-dim": 8, "batch-size": 32, "learning-rate": 0.02, "seed": 1})
    mech = mechanisms.create("purkayastha", epsilon=3.0)
    runs = [
        choose_map_scale(
            x.float(),
            y,
            2,
            2,
            mech,
            torch.Generator().manual_seed(5),
            candidates=(0.1, 1.0, 10.0),
            server=cfg.server,
            seed=cfg.users.seed,
        )
        for _ in range(2)
    ]
    (best, info), again = runs
    assert again == (best, info)  # a function of the public data and the public seed only
    table = info["validation_accuracy"]
    assert set(table) == {"0.1", "1", "10"} and info["validation_documents"] == 24
    assert table[f"{best:g}"] == max(table.values())
    # A constant that swamps the logit (scale 10) leaves little signal after the noise.
    assert table["10"] < 0.7 < max(table["0.1"], table["1"])


def test_the_scale_choice_is_cached_exactly_and_keyed_by_everything_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fl.maps.public_start as ps

    x, y = _blobs(n=60, d=6)
    x = x.float()
    cfg = config.resolve({"server-epochs": 1, "hidden-dim": 8, "batch-size": 32, "seed": 1, "cache-dir": str(tmp_path)})
    mech = mechanisms.create("purkayastha", epsilon=3.0)
    fresh = torch.Generator().manual_seed(5)
    expected = choose_map_scale(x, y, 2, 2, mech, fresh, server=cfg.server, seed=cfg.users.seed)
    public = PublicSpec.from_config(cfg)
    first = torch.Generator().manual_seed(5)
    assert ps.cached_map_scale(public, x, y, 2, 2, mech, first) == expected  # computed and stored
    calls = []
    real = ps.choose_map_scale
    monkeypatch.setattr(ps, "choose_map_scale", lambda *a, **k: calls.append(1) or real(*a, **k))
    second = torch.Generator().manual_seed(5)
    assert ps.cached_map_scale(public, x, y, 2, 2, mech, second) == expected and not calls  # read back
    # the generator continues exactly where the computation would have left it
    assert torch.equal(second.get_state(), fresh.get_state()) and torch.equal(first.get_state(), fresh.get_state())
    # power: a changed public label, mechanism, seed or generator state is another entry
    flipped = y.clone()
    flipped[0] = 1 - flipped[0]
    ps.cached_map_scale(public, x, flipped, 2, 2, mech, torch.Generator().manual_seed(5))
    other = mechanisms.create("purkayastha", epsilon=4.0)
    ps.cached_map_scale(public, x, y, 2, 2, other, torch.Generator().manual_seed(5))
    ps.cached_map_scale(PublicSpec.from_config(cfg.replace(seed=2)), x, y, 2, 2, mech, torch.Generator().manual_seed(5))
    ps.cached_map_scale(public, x, y, 2, 2, mech, torch.Generator().manual_seed(6))
    assert len(calls) == 4
    # a damaged entry is discarded and recomputed
    for path in (tmp_path / "public-start").glob("*.pt"):
        path.write_bytes(path.read_bytes()[:-7])
    assert ps.cached_map_scale(public, x, y, 2, 2, mech, torch.Generator().manual_seed(5)) == expected
    assert len(calls) == 5


# ------------------------------------------------------------------ public data only, end to end
def test_the_map_reads_the_public_split_only(tmp_path: Path, cache_dir: Path) -> None:
    """Changing private training documents (text and label) leaves M1 and the chosen scale bit for
    bit unchanged; changing one public document's label changes them."""
    rows = _docs(96)
    test = _write(tmp_path / "test.jsonl", _docs(10, offset=500))
    cfg = _cfg(_write(tmp_path / "a.jsonl", rows), test, cache_dir)
    from fl.data import datasets

    public_texts = set(datasets.load(cfg.data, cfg.users, cfg.release.level).public["text"])
    assert 20 < len(public_texts) < 76
    mech = config.make_mechanism(cfg, "sentence", input_dim=2)

    def build(c: config.RunConfig) -> tuple[torch.Tensor, dict]:
        return supervised_start(
            PublicSpec.from_config(c), mech, 2, 2, torch.device("cpu"), torch.Generator().manual_seed(0)
        )

    matrix, info = build(cfg)
    assert matrix.shape == (385, 2) and info["map_scale"] in maps.SCALE_CANDIDATES
    assert info["public_documents"] == len(public_texts)
    assert set(info["map_scale_chosen_on_public_validation"]["validation_accuracy"]) == {
        f"{c:g}" for c in maps.SCALE_CANDIDATES
    }

    private = [i for i, r in enumerate(rows) if r["text"] not in public_texts]
    changed = [dict(r) for r in rows]
    for i in private:
        changed[i] = {"text": f"an entirely different private sentence {i}", "label": 1 - int(rows[i]["label"])}
    other, other_info = build(_cfg(_write(tmp_path / "b.jsonl", changed), test, cache_dir))
    assert torch.equal(other, matrix) and other_info == info

    first_public = next(i for i, r in enumerate(rows) if r["text"] in public_texts)
    flipped = [dict(r) for r in rows]
    flipped[first_public]["label"] = 1 - int(rows[first_public]["label"])
    third, _ = build(_cfg(_write(tmp_path / "c.jsonl", flipped), test, cache_dir, **{"map-scale": info["map_scale"]}))
    assert not torch.equal(third, matrix)

    fixed, fixed_info = build(_cfg(_write(tmp_path / "d.jsonl", rows), test, cache_dir, **{"map-scale": 0.3}))
    assert fixed[-1, 1] == 0.3 and "map_scale_chosen_on_public_validation" not in fixed_info
    x, _ = public_embeddings(PublicSpec.from_config(cfg), torch.device("cpu"))
    assert len(x) == len(public_texts)


@pytest.mark.usefixtures("task_identity")
def test_server_builds_sends_and_records_the_affine_map(tmp_path: Path, cache_dir: Path) -> None:
    """Discovery builds M1 from the public split; train requests carry it as [d + 1, m']; a client
    accepts it; the round's public record and the guarantee say what was done; the guarantee is
    the mechanism's (metric eps, pure pi * eps)."""
    cfg = _cfg(_write(tmp_path / "train.jsonl", _docs(96)), _write(tmp_path / "test.jsonl", _docs(8, 500)), cache_dir)
    nodes = {7: wire.CohortInfo(0, 48, 48, 48, 0, 8, 8, 2, 384, 2, 2)}
    core = ReleaseTraining(cfg)
    acc = LocalDPAccounting(core, core.cfg)
    messages = list(acc.configure_train(1, ArrayRecord(), ConfigRecord(), FakeGrid(nodes)))
    assert core.map_matrix is not None and core.map_matrix.shape == (385, 2)
    assert core.public_info["map"] == "supervised" and core.public_info["map_dim"] == 2
    assert core.public_info["map_scale"] in maps.SCALE_CANDIDATES
    sent = messages[0].content[wire.MAP_IN]["matrix"].numpy()
    assert np.array_equal(sent, core.map_matrix.numpy())
    received = node_map(messages[0], "supervised", 0, SimpleNamespace(encoder_dim=384, map_dim=2))
    assert received is not None and torch.equal(received, core.map_matrix)
    wrong = Message(
        content=RecordDict({wire.MAP_IN: ArrayRecord({"matrix": Array(np.zeros((386, 2)))})}),
        dst_node_id=7,
        message_type="train",
    )
    with pytest.raises(ValueError, match="input map has shape"):
        node_map(wrong, "supervised", 0, SimpleNamespace(encoder_dim=384, map_dim=2))

    channels = make_channels(LevelSpec.from_config(cfg), 2)
    g = channels.embedding.guarantee
    assert g.epsilon == pytest.approx(4.0) and g.as_ldp()[0] == pytest.approx(math.pi * 4.0)
    statement = guarantee_statement(cfg, acc)
    assert statement["sentence"]["pure_ldp_per_release"] == pytest.approx(math.pi * 4.0)
    assert "computed from the public split only" in statement["sentence"]["text"]
    assert "n(M1 x + b)" in statement["sentence"]["text"] and statement["ldp_guarantee_holds"] is True


def test_config_checks() -> None:
    with pytest.raises(
        config.ConfigError,
        match="builds M1 from the public split: set public-size > 0, public-fraction > 0 or public-dataset",
    ):
        config.resolve({"map-in": "supervised", "map-dim": 2})
    with pytest.raises(config.ConfigError, match="map-scale must be >= 0"):
        config.resolve({"map-in": "supervised", "map-dim": 2, "public-fraction": 0.1, "map-scale": -1.0})
    with pytest.raises(config.ConfigError, match="map-in must be one of"):
        config.resolve(
            {"map-in": "supervised", "map-dim": 2, "public-fraction": 0.1, "mode": "central", "central-unit": "node"}
        )
    cfg = config.resolve({"map-in": "supervised", "map-dim": 2, "public-fraction": 0.1})
    assert cfg["map-scale"] == 0.0 and cfg.release.map_scale == 0.0
