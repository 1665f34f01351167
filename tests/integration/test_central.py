"""Central-DP mode end to end: real encoder, SST-2 subset, Flower simulation on Ray.

Runs the ``sanitas`` CLI in a subprocess (as test_simulation.py does) with
``mode = "central"`` and checks the results folder and that every round's
epsilon is the one ``fl.accounting.central`` (node level) or
``fl.accounting.user_level`` (user level) gives for the same parameters. A
node's user-level reply is checked in process against a per-user loop over the
users its Poisson coins pick.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fl import config as config_mod
from fl import wire
from fl.accounting.central import central_epsilon
from fl.accounting.user_level import user_level_epsilon
from tests.support.simulation import run_cli

CENTRAL = {  # on top of test_simulation's BASE (same users, nodes and rounds)
    "mode": '"central"',
    "central-unit": '"node"',
    "central-noise-multiplier": "1.0",
    "central-clip": "1.0",
    "central-delta": "1e-5",
    "local-epochs": "2",
    "batch-size": "4",
    "learning-rate": "0.01",
}
NODES, SAMPLED = 10, 5  # ceil(60 / 6) nodes; ceil(0.5 * 10) sampled per round


def _run(tmp_path: Path, data_dir: Path, cache_dir: Path, extra: dict[str, str]) -> subprocess.CompletedProcess:
    return run_cli(tmp_path, data_dir, cache_dir, {**CENTRAL, **extra})


def _check_run(folder: Path, clipping: str) -> list[dict]:
    for name in ("config.json", "rounds.jsonl", "rounds.csv", "summary.json", "accuracy_vs_round.png"):
        assert (folder / name).is_file(), name
    rounds = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1, 2]
    for r in rounds:
        assert 0.0 <= r["accuracy"] <= 1.0 and 0.0 <= r["macro_f1"] <= 1.0
        assert r["test_users"] == 40 and r["mode"] == "central" and r["ldp_guarantee_holds"] is False
        p = r["privacy"]
        expected = central_epsilon(1.0, SAMPLED, NODES, r["round"], 1e-5)
        assert p["epsilon"] == pytest.approx(expected["epsilon"], rel=1e-9)
        assert p["accountant"] == expected["accountant"] and p["delta"] == 1e-5
        assert p["mode"] == "central" and p["sampled_nodes"] == SAMPLED and p["nodes"] == NODES
        assert p["noise_multiplier"] == 1.0 and p["clipping_norm"] == 1.0 and p["clipping"] == clipping
        assert p["unit"] == "user (each user in one node; node-level too)"
        assert p["evaluation_covered"] is False and p["guarantee_covers"].startswith("the noised global models")
    assert 0 < rounds[0]["privacy"]["epsilon"] < rounds[1]["privacy"]["epsilon"]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["mode"] == "central" and summary["rounds"] == 2
    assert summary["users"] == {"train": 60, "test": 40, "nodes": NODES, "nodes_hold_own_files": False}
    assert summary["privacy"] == rounds[-1]["privacy"]
    central = summary["guarantee"]["central"]
    assert central["epsilon"] == pytest.approx(rounds[-1]["privacy"]["epsilon"])
    assert "one user's data" in central["text"] and "whole node" in central["text"]
    assert summary["ldp_guarantee_holds"] is False and summary["evaluation_covered"] is False
    assert json.loads((folder / "config.json").read_text())["config"]["mode"] == "central"
    assert "privacy.epsilon" in (folder / "rounds.csv").read_text().splitlines()[0]
    return rounds


@pytest.mark.slow  # a Ray run (~45 s); node-level central messages are checked in process by the message audit
def test_central_server_side_clipping_end_to_end(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    proc = _run(tmp_path, data_dir, cache_dir, {"central-clipping": '"server"'})
    assert proc.returncode == 0, proc.stderr[-3000:]
    rounds = _check_run(tmp_path / "out" / "r", "server")
    summary = json.loads((tmp_path / "out" / "r" / "summary.json").read_text())
    assert summary["strategy"] == "DifferentialPrivacyServerSideFixedClipping(CentralFedAvg)"
    assert any("unclipped" in note for note in summary["guarantee"]["notes"])
    assert rounds[-1]["clean_accuracy"] == rounds[-1]["accuracy"]  # test inputs are noise-free in central mode


@pytest.mark.slow
def test_central_client_side_clipping_end_to_end(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """Client-side clipping: fixedclipping_mod on the ClientApp, the norm sent by the wrapper."""
    proc = _run(tmp_path, data_dir, cache_dir, {"central-clipping": '"client"', "map-in": '"identity"'})
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_run(tmp_path / "out" / "r", "client")
    # Flower's own log line; the quiet console keeps it in the run's log.
    assert "fixedclipping_mod: parameters are clipped" in (tmp_path / "out" / "r" / "run.log").read_text()


def test_central_refuses_a_trained_map_before_writing(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """map-in = public is a local-mode option: refused with one error line before Ray starts or anything is
    written (custom strategies are refused the same way, see tests/fl/accounting/test_central.py)."""
    proc = _run(tmp_path, data_dir, cache_dir, {"map-in": '"public"', "public-fraction": "0.3"})
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("sanitas: error:") and "map-in must be one of" in last
    assert "Ray" not in proc.stderr and not (tmp_path / "out").exists()


USER = {  # user-level DP-FedAvg on top of test_simulation's BASE: 60 users, 10 nodes, 2 rounds
    "mode": '"central"',
    "central-unit": '"user"',
    "central-cohort-size": "20.0",
    "central-noise-multiplier": "1.0",
    "central-clip": "1.0",
    "local-epochs": "2",
    "server-optimizer": '"sgd"',
    "server-learning-rate": "1.0",
}


def test_user_level_central_end_to_end(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """Every round's per-user epsilon is the accountant's for q = 20 / 60; the summary says so in words."""
    proc = run_cli(tmp_path, data_dir, cache_dir, USER)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "out" / "r"
    rounds = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1, 2]
    for r in rounds:
        p = r["privacy"]
        expected = user_level_epsilon(1.0, 20 / 60, r["round"], 1e-5)
        assert p["epsilon"] == expected["epsilon"] and p["accountant"] == expected["accountant"]
        assert p["unit"] == "user" and p["central_unit"] == "user" and p["sampling_rate"] == pytest.approx(1 / 3)
        assert r["test_users"] == 40 and r["central_unit"] == "user" and r["ldp_guarantee_holds"] is False
        assert set(r["timing"]) == {"train_round_trip", "server_step", "evaluate_round_trip", "accounting"}
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["central_unit"] == "user" and summary["strategy"] == "UserLevelDPFedAvg"
    assert summary["users"] == {"train": 60, "test": 40, "nodes": 10, "nodes_hold_own_files": False}
    assert summary["start"].startswith("seeded random initialisation")
    text = summary["guarantee"]["central"]["text"]
    assert "per user" in text and "q = 0.3333" in text and summary["privacy"] == rounds[-1]["privacy"]


@pytest.mark.slow
def test_user_level_central_from_a_public_start(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """map-in = "public" in central mode: the server trains M1 (and the model) on the public split
    first and sends M1 with every request; the summary names the start."""
    proc = run_cli(
        tmp_path, data_dir, cache_dir, {**USER, "map-in": '"public"', "public-fraction": "0.3", "public-epochs": "2"}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "r" / "summary.json").read_text())
    assert "public documents" in summary["start"] and summary["start"] in " ".join(summary["guarantee"]["notes"])


def _node(data_dir: Path, cache_dir: Path, keys: dict) -> tuple:
    """One real central-mode node (partition 3 of 10) of a 60-document SST-2 run with ``keys`` set:
    its config, cohort and Flower context."""
    from flwr.app import Context, RecordDict
    from flwr.supercore.task_identity import TaskIdentity

    from fl.cohort import build_cohort
    from fl.levels.spec import LevelSpec

    cfg = config_mod.resolve(
        {
            "dataset": "sst2",
            "train-size": 60,
            "test-size": 40,
            "users-per-node": 6,
            "mode": "central",
            **keys,
            "data-dir": str(data_dir),
            "cache-dir": str(cache_dir),
            "device": "cpu",
        }
    )
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0
    c = build_cohort(LevelSpec.from_config(cfg), 3, 10, progress=False)
    return cfg, c, Context(1, 5, {"partition-id": 3, "num-partitions": 10}, RecordDict(), {})


def test_a_node_replies_the_clipped_sum_of_its_sampled_users_only(data_dir: Path, cache_dir: Path) -> None:
    """handle_user_train on one real node: the reply is exactly one array per parameter, equal to the sum
    over the users its Poisson coins pick of their clipped updates computed one user at a time."""
    import torch
    from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict

    from clients.central_client import central_features, handle_user_train
    from fl.maps.pipeline import build_model
    from fl.training.user_updates import poisson_sample
    from tests.support.user_updates import loop_reference

    cfg, c, context = _node(
        data_dir, cache_dir, {"central-clip": 0.05, "local-epochs": 2, "client-learning-rate": 0.5, "noise-seed": 11}
    )
    model = build_model(c.map_dim, c.encoder_dim, c.num_classes, hidden_dim=cfg.server.hidden_dim, seed=cfg.users.seed)
    request = ConfigRecord({"server-round": 4, "sampling-rate": 0.5})
    msg = Message(
        content=RecordDict({wire.MODEL: ArrayRecord(model.state_dict()), wire.CONFIG: request}),
        dst_node_id=5,
        message_type=MessageType.TRAIN,
    )
    reply = handle_user_train(msg, context, cfg)
    assert list(reply.content.keys()) == [wire.UPDATE_SUM]
    got = reply.content[wire.UPDATE_SUM]
    assert sorted(got.keys()) == sorted(k for k, _ in model.named_parameters())

    users = torch.arange(c.train_users.start, c.train_users.stop)
    chosen = users[poisson_sample(11, 4, users, c.num_train_users, 0.5)]
    assert 0 < chosen.numel() < users.numel()  # this seed picks some users and leaves some out
    doc_user = torch.from_numpy(c.train_doc_user)
    keep = torch.isin(doc_user, chosen)
    x = central_features(cfg, c, c.train_emb[keep])
    owner = torch.searchsorted(chosen, doc_user[keep])
    ref, _ = loop_reference(model, x, c.train_y[keep], owner, int(chosen.numel()), 2, 0.5, 0.05)
    for k, v in ref.items():
        torch.testing.assert_close(torch.from_numpy(got[k].numpy()), v, rtol=1e-4, atol=1e-6)


def test_a_node_trains_the_model_it_kept_from_the_evaluate_request(
    tmp_path: Path, data_dir: Path, cache_dir: Path
) -> None:
    """A train request that names the model of the node's last evaluate request (``model-ref``) gets the
    same reply as one that carries the arrays; a name the node does not hold is refused, and the kept
    model stays out of the node's resume snapshot."""
    import pytest
    from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict

    from clients.central_client import handle_central_evaluate, handle_user_train
    from fl.maps.pipeline import build_model

    cfg, c, context = _node(data_dir, cache_dir, {"noise-seed": 11})
    model = build_model(c.map_dim, c.encoder_dim, c.num_classes, hidden_dim=cfg.server.hidden_dim, seed=cfg.users.seed)
    arrays = ArrayRecord(model.state_dict())
    request = ConfigRecord({"server-round": 2, "sampling-rate": 0.5})

    def train(content: dict) -> dict:
        msg = Message(content=RecordDict(content), dst_node_id=5, message_type=MessageType.TRAIN)
        reply = handle_user_train(msg, context, cfg).content[wire.UPDATE_SUM]
        return {k: v.numpy() for k, v in reply.items()}

    by_ref = RecordDict({wire.CONFIG: ConfigRecord({**request, wire.MODEL_REF: arrays.object_id})})
    with pytest.raises(ValueError, match="does not hold"):
        train(dict(by_ref))
    evaluate = Message(
        content=RecordDict({wire.MODEL: arrays, wire.CONFIG: ConfigRecord({"server-round": 1})}),
        dst_node_id=5,
        message_type=MessageType.EVALUATE,
    )
    handle_central_evaluate(evaluate, context, cfg)
    want = train({wire.MODEL: arrays, wire.CONFIG: request})
    got = train(dict(by_ref))
    assert want.keys() == got.keys() and all((want[k] == got[k]).all() for k in want)
    assert any(v.any() for v in want.values())  # power: the sampled users moved the model
    stale = RecordDict({wire.CONFIG: ConfigRecord({**request, wire.MODEL_REF: "0" * 64})})
    with pytest.raises(ValueError, match="does not hold"):
        train(dict(stale))

    import pickle

    from clients import node_state

    node_state.save(evaluate, context, cfg.replace(**{"run-name": "r", "out-dir": str(tmp_path)}), 3, "evaluate")
    (snapshot,) = (tmp_path / "r" / "nodes" / "node-3").glob("*.pkl")
    assert wire.HELD_MODEL in context.state and wire.HELD_MODEL not in pickle.loads(snapshot.read_bytes())


def test_a_worker_reuses_its_encoder_model_and_evaluates_each_request_own_weights(
    data_dir: Path, cache_dir: Path
) -> None:
    """central-train = "encoder": a worker builds the encoder model once and caches the test users'
    lower layers, yet each request is scored with its own weights (A, B, then A again: the counts of
    a freshly built model each time; A and B disagree, so a stale model would be seen)."""
    import torch
    from flwr.app import ArrayRecord, Message, MessageType, RecordDict

    from clients import central_client
    from fl.maps.pipeline import ServerModel, confusion_matrix
    from fl.training.encoder import build_encoder_classifier, lower_states, trainable_state

    encoder = {"central-unit": "user", "central-train": "encoder", "map-in": "identity", "tuning-layers": 1}
    cfg, c, context = _node(data_dir, cache_dir, {**encoder, "tuning-lora-rank": 2, "hidden-dim": 8})
    assert len(c.test_text) >= 3

    def weights(seed: int) -> tuple[dict, list]:
        torch.manual_seed(seed)
        model = build_encoder_classifier(
            cfg.encoder,
            ServerModel(c.map_dim, c.encoder_dim, 8, c.num_classes),
            None,
            tuning_part=cfg.central.central_tuning_part,
            seed=cfg.users.seed,
        )
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in model.parameters():
                if p.requires_grad:
                    p.add_(torch.randn(p.shape, generator=gen))
            pred = model(*lower_states(cfg.encoder, c.test_text)).argmax(1).numpy()
        truth = c.test_y.numpy()
        return trainable_state(model), confusion_matrix(truth, pred, c.num_classes).reshape(-1).tolist()

    def evaluate(state: dict) -> list:
        msg = Message(
            content=RecordDict({"arrays": ArrayRecord(state)}), dst_node_id=5, message_type=MessageType.EVALUATE
        )
        return list(central_client.handle_central_evaluate(msg, context, cfg).content["metrics"]["confusion"])

    (a, want_a), (b, want_b) = weights(1), weights(2)
    assert want_a != want_b  # power: the two weights score differently
    assert [evaluate(a), evaluate(b), evaluate(a)] == [want_a, want_b, want_a]
    assert len(central_client._encoder_models) == 1


def test_user_level_central_runs_on_synthetic_users(tmp_path: Path) -> None:
    """dataset = "synthetic" has no documents: the run finishes without an attack state (a run of
    benchmarks/bench_simulation.py's central mode)."""
    import simulations
    from tests.support.runs import SYNTHETIC_USER_CENTRAL

    cfg = {**SYNTHETIC_USER_CENTRAL, "num-server-rounds": 1}
    result = simulations.run(cfg, out=tmp_path, run_name="synthetic")
    assert result.summary["rounds"] == 1 and result.summary["privacy"]["epsilon"] > 0
    assert not (result.folder / "attack").exists()


def test_the_nodes_of_one_process_train_as_one_batch_with_each_nodes_own_sum(data_dir: Path, cache_dir: Path) -> None:
    """handle_user_train_batch over several real nodes: each node's reply is its own sampled users' clipped
    sum, as handle_user_train gives it alone (equal up to the reduction order), in the nodes' order;
    the batch declines what it does not cover (several SGD steps, requests of different rounds)."""
    import torch
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict

    from clients.central_client import handle_user_train, handle_user_train_batch
    from fl.cohort import build_cohort
    from fl.levels.spec import LevelSpec
    from fl.maps.pipeline import build_model

    cfg, c, _ = _node(data_dir, cache_dir, {"central-clip": 0.05, "client-learning-rate": 0.5, "noise-seed": 11})
    model = build_model(c.map_dim, c.encoder_dim, c.num_classes, hidden_dim=cfg.server.hidden_dim, seed=cfg.users.seed)
    arrays = ArrayRecord(model.state_dict())
    parts = [0, 3, 7, 9]
    for pid in parts:
        build_cohort(LevelSpec.from_config(cfg), pid, 10, progress=False)

    def contexts() -> list[Context]:
        return [Context(1, 100 + p, {"partition-id": p, "num-partitions": 10}, RecordDict(), {}) for p in parts]

    def requests(rounds: list[int]) -> list[Message]:
        return [
            Message(
                content=RecordDict(
                    {wire.MODEL: arrays, wire.CONFIG: ConfigRecord({"server-round": r, "sampling-rate": 0.5})}
                ),
                dst_node_id=100 + p,
                message_type=MessageType.TRAIN,
            )
            for p, r in zip(parts, rounds, strict=True)
        ]

    alone = [handle_user_train(m, ctx, cfg) for m, ctx in zip(requests([4] * 4), contexts(), strict=True)]
    batch = handle_user_train_batch(requests([4] * 4), contexts(), cfg)
    assert batch is not None and len(batch) == len(parts)
    moved = 0
    for one, many in zip(alone, batch, strict=True):
        want, got = one.content[wire.UPDATE_SUM], many.content[wire.UPDATE_SUM]
        assert sorted(want.keys()) == sorted(got.keys())
        for k in want.keys():
            torch.testing.assert_close(torch.from_numpy(got[k].numpy()), torch.from_numpy(want[k].numpy()))
        moved += any(want[k].numpy().any() for k in want.keys())
    assert moved >= 2  # power: several nodes sampled users, so a sum put on the wrong node would show
    sums = [{k: v.numpy() for k, v in m.content[wire.UPDATE_SUM].items()} for m in batch]
    assert any((sums[0][k] != sums[1][k]).any() for k in sums[0])
    assert handle_user_train_batch(requests([4, 4, 5, 4]), contexts(), cfg) is None
    two_steps = cfg.replace(**{"local-epochs": 2})
    assert handle_user_train_batch(requests([4] * 4), contexts(), two_steps) is None


@pytest.mark.parametrize("sets", [{"noise-seed": 11}, {"noise-seed": -1}, {"secure-rng": True}])
def test_the_nodes_of_one_process_sample_in_one_pass_what_each_samples_alone(
    data_dir: Path, cache_dir: Path, sets: dict
) -> None:
    """The batch's sampling (every node's coins in one pass, each under its own secret) gives each node
    the users, documents and owners it samples alone, at several rounds and rates, with a noise seed,
    with OS secrets and with secure-rng keys (drawn node by node)."""
    import torch
    from flwr.app import Context, RecordDict

    from clients.central_client import _cohort, _sampled_documents, _sampled_documents_of_nodes
    from fl.cohort import build_cohort
    from fl.levels.spec import LevelSpec

    cfg, _, _ = _node(data_dir, cache_dir, sets)
    parts = [0, 3, 7, 9]
    for pid in parts:
        build_cohort(LevelSpec.from_config(cfg), pid, 10, progress=False)
    contexts = [Context(1, 100 + p, {"partition-id": p, "num-partitions": 10}, RecordDict(), {}) for p in parts]
    cohorts = [_cohort(ctx, cfg) for ctx in contexts]
    chosen_sets = []
    for server_round, q in [(1, 0.8), (2, 0.8), (5, 0.05), (7, 1.0)]:
        together = _sampled_documents_of_nodes(contexts, cfg, cohorts, server_round, q)
        for ctx, c, got in zip(contexts, cohorts, together, strict=True):
            want = _sampled_documents(ctx, cfg, c, server_round, q)
            for a, b in zip(got, want, strict=True):
                assert a.dtype == b.dtype and torch.equal(a, b)
        chosen_sets.append([set(t[0].tolist()) for t in together])
    # power: nodes and rounds sample different, non-empty sets (a node given another's coins would show;
    # at q = 0.8 a node of 6 users samples none with probability 6e-5, and 4 nodes repeat a round's sets with 1e-4)
    assert all(chosen for chosen in chosen_sets[0])
    assert chosen_sets[0] != chosen_sets[1]
    assert all(len(s) == len(c.train_users) for s, c in zip(chosen_sets[3], cohorts, strict=True))


def test_the_nodes_of_one_process_evaluate_as_one_batch_with_each_nodes_own_counts(
    data_dir: Path, cache_dir: Path
) -> None:
    """handle_central_evaluate_batch over several real nodes: each node's reply (its test users' confusion
    counts) and the model it keeps are those of handle_central_evaluate alone; the batch declines requests
    for different models and requests without one."""
    import torch
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict

    from clients.central_client import handle_central_evaluate, handle_central_evaluate_batch
    from fl.cohort import build_cohort
    from fl.levels.spec import LevelSpec
    from fl.maps.pipeline import build_model

    cfg, c, _ = _node(data_dir, cache_dir, {"noise-seed": 11})
    parts = [0, 3, 7, 9]
    for pid in parts:
        build_cohort(LevelSpec.from_config(cfg), pid, 10, progress=False)

    def arrays(seed: int) -> ArrayRecord:
        gen = torch.Generator().manual_seed(seed)
        model = build_model(c.map_dim, c.encoder_dim, c.num_classes, hidden_dim=cfg.server.hidden_dim, seed=seed)
        for p in model.parameters():
            p.data += torch.randn(p.shape, generator=gen)  # a trained-looking model: not every user in one class
        return ArrayRecord(model.state_dict())

    def contexts() -> list[Context]:
        return [Context(1, 100 + p, {"partition-id": p, "num-partitions": 10}, RecordDict(), {}) for p in parts]

    def requests(models: list[ArrayRecord]) -> list[Message]:
        return [
            Message(
                content=RecordDict({wire.MODEL: m, wire.CONFIG: ConfigRecord({"server-round": 3})}),
                dst_node_id=100 + p,
                message_type=MessageType.EVALUATE,
            )
            for p, m in zip(parts, models, strict=True)
        ]

    model = arrays(1)
    alone_contexts, batch_contexts = contexts(), contexts()
    alone = [handle_central_evaluate(m, ctx, cfg) for m, ctx in zip(requests([model] * 4), alone_contexts, strict=True)]
    batch = handle_central_evaluate_batch(requests([model] * 4), batch_contexts, cfg)
    assert batch is not None and len(batch) == len(parts)
    counts = []
    for one, many, ctx in zip(alone, batch, batch_contexts, strict=True):
        want, got = dict(one.content["metrics"]), dict(many.content["metrics"])
        assert got == want
        counts.append(got["confusion"])
        assert ctx.state.array_records[wire.HELD_MODEL].object_id == model.object_id
    # power: the nodes score different users, so counts put on the wrong node would show
    assert len({tuple(x) for x in counts}) > 1 and all(sum(x) > 0 for x in counts)
    assert handle_central_evaluate_batch(requests([model, model, arrays(2), model]), contexts(), cfg) is None
    bare = requests([model] * 4)
    del bare[1].content[wire.MODEL]
    assert handle_central_evaluate_batch(bare, contexts(), cfg) is None
