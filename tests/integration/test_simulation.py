"""End to end: real encoder, real SST-2 subset, real Flower simulation on Ray.

Runs the ``sanitas`` CLI in a subprocess (as a user would) and checks the
results folder, the accounting and the custom-strategy hooks.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

from tests.support.simulation import rounds_of, run_cli


def test_end_to_end_run_writes_a_complete_results_folder(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    proc = run_cli(tmp_path, data_dir, cache_dir, {"clean-evaluation": "true"})  # on-device inference too
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "out" / "r"
    for name in ("config.json", "rounds.jsonl", "rounds.csv", "summary.json", "accuracy_vs_round.png"):
        assert (folder / name).is_file(), name
    rounds = rounds_of(folder)
    assert [r["round"] for r in rounds] == [1, 2]
    # what sanitas attack reads: the final model and the documents whose releases trained it
    from fl.attacks.state import AttackState

    state = AttackState.load(folder)
    assert state.members.size == rounds[-1]["train_releases_total"] and state.model() is not None
    for r in rounds:
        assert 0.0 <= r["accuracy"] <= 1.0 and 0.0 <= r["macro_f1"] <= 1.0 and 0.0 <= r["clean_accuracy"] <= 1.0
        assert r["test_users"] == 40
        assert set(r["privacy"]) >= {"epsilon_metric", "epsilon_ldp", "epsilon_label", "releases"}
        # What a shuffler would make of the round's fresh embedding reports (pure 10*pi each).
        if r["privacy"]["shuffled_reports"]:
            shuffled, epsilon0 = r["privacy"]["epsilon_shuffled"], r["privacy"]["shuffle_epsilon0"]
            assert 0 < shuffled <= epsilon0 == pytest.approx(10 * math.pi)
        assert r["privacy"]["epsilon_shuffled_joint"] is None  # labels in the clear: no joint figure
    # Cached releases: every user released once; re-sent rows cost nothing more.
    last = rounds[-1]["privacy"]
    assert last["epsilon_metric"] == pytest.approx(10.0)
    assert last["epsilon_ldp"] == pytest.approx(10.0 * math.pi)
    assert last["max_releases_per_user"] == 1
    assert last["epsilon_label"] is None and last["label_protected"] is False
    assert rounds[0]["fresh_test_releases"] == 40 and rounds[1]["fresh_test_releases"] == 0
    # Issue 11 item 2: the guarantee covers releases; evaluation counts (true labels) are outside it.
    for r in rounds:
        assert (
            r["privacy"]["evaluation_covered"] is False
            and "true labels" in r["privacy"]["evaluation_not_covered_because"]
        )
        assert r["privacy"]["guarantee_covers"].startswith("the sanitized releases only")
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["evaluation_covered"] is False and "nearly reveal" in summary["evaluation_not_covered_because"]
    header = (folder / "rounds.csv").read_text().splitlines()[0].split(",")
    assert "privacy.evaluation_covered" in header and "privacy.evaluation_not_covered_because" in header
    assert summary["users"] == {"train": 60, "test": 40, "nodes": 10, "nodes_hold_own_files": False}
    assert "released in the clear" in summary["guarantee"]["label"]["text"]
    config = json.loads((folder / "config.json").read_text())["config"]
    assert config["sentence-mechanism"] == "purkayastha"


CUSTOM = textwrap.dedent(
    '''
    import numpy as np
    from flwr.serverapp.strategy import Strategy
    from strategies import ReleaseTraining


    class FirstHalfUsers(ReleaseTraining):
        """Always asks the first half of the users (a custom sampling policy)."""

        def sample_users(self, server_round):
            return np.arange(self.num_train_users // 2)


    class Counting(Strategy):
        """A wrapper in the shape of Flower's DP wrappers: counts rounds, delegates the rest."""

        def __init__(self, strategy):
            self.strategy = strategy
            self.trained = 0

        def configure_train(self, server_round, arrays, config, grid):
            return self.strategy.configure_train(server_round, arrays, config, grid)

        def aggregate_train(self, server_round, replies):
            self.trained += 1
            return self.strategy.aggregate_train(server_round, replies)

        def configure_evaluate(self, server_round, arrays, config, grid):
            return self.strategy.configure_evaluate(server_round, arrays, config, grid)

        def aggregate_evaluate(self, server_round, replies):
            return self.strategy.aggregate_evaluate(server_round, replies)

        def summary(self):
            self.strategy.summary()
    '''
)


def test_custom_strategy_outside_the_package_with_fresh_noise(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """A subclass defined outside Sanitas runs; fresh noise per round is accounted per round."""
    (tmp_path / "my_strategies.py").write_text(CUSTOM)
    extra = {
        "strategy": '"my_strategies:FirstHalfUsers"',
        "fresh-noise-per-round": "true",
        "label-mechanism": '"rr"',
        "label-epsilon": "1.0",
    }
    proc = run_cli(tmp_path, data_dir, cache_dir, extra, pythonpath=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "out" / "r"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["strategy"] == "FirstHalfUsers"
    rounds = rounds_of(folder)
    assert [r["sampled_users"] for r in rounds] == [30, 30]
    assert [r["fresh_train_releases"] for r in rounds] == [30, 30]
    last = rounds[-1]["privacy"]
    # Two fresh releases of the same users (and two of each test user): 2 * eps.
    assert last["epsilon_metric"] == pytest.approx(20.0)
    assert last["epsilon_label"] == pytest.approx(2.0)
    assert last["epsilon_total"] == pytest.approx(20.0 * math.pi + 2.0)
    assert last["max_releases_per_user"] == 2


@pytest.mark.slow  # the wrapper is checked in process (tests/strategies); this is its Ray run
def test_wrapper_strategy(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    (tmp_path / "my_strategies.py").write_text(CUSTOM)
    proc = run_cli(
        tmp_path,
        data_dir,
        cache_dir,
        {"strategy": '"my_strategies:Counting"', "num-server-rounds": "1"},
        pythonpath=str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "r" / "summary.json").read_text())
    assert summary["strategy"] == "Counting" and summary["rounds"] == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"dataset": '"sst3"'}, "unknown dataset 'sst3'"),
        ({"sentence-mechanism": '"gauss"'}, "unknown mechanism 'gauss'"),
        ({"sentence-epsilon": "-1.0"}, "epsilon must be > 0"),
        ({"dataset": '"20newsgroups"'}, "empty document"),
        ({"map-in": '"leaky"'}, "allow-unaccounted-leakage"),
        ({"map-in": '"public"'}, "public-fraction"),
        ({"sentence-mechanism": '"privemb"', "sentence-options": "'speed = 2'"}, "bad parameters for mechanism"),
    ],
)
def test_bad_input_fails_before_writing(
    tmp_path: Path, data_dir: Path, cache_dir: Path, extra: dict, message: str
) -> None:
    proc = run_cli(tmp_path, data_dir, cache_dir, extra)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_existing_results_folder_is_refused_before_running(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    folder = tmp_path / "out" / "r"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text("{}")
    proc = run_cli(tmp_path, data_dir, cache_dir, {})
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert "Ray" not in proc.stderr and (folder / "summary.json").read_text() == "{}"


def test_public_map_with_rr_prior_labels_and_privemb(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """map-in = public (M1 trained on the public split, frozen), RR-with-prior labels (prior from the
    server model on the sanitized rows) and a projecting mechanism (privemb, k = 8)."""
    extra = {
        "map-in": '"public"',
        "public-fraction": "0.3",
        "public-epochs": "2",
        "sentence-mechanism": '"privemb"',
        "sentence-options": "'out_dim = 8'",
        "sentence-epsilon": "5.0",
        "label-mechanism": '"rr_prior"',
        "label-epsilon": "2.0",
    }
    proc = run_cli(tmp_path, data_dir, cache_dir, extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "out" / "r"
    rounds = rounds_of(folder)
    assert rounds[0]["public_pretraining"]["public_documents"] > 0
    # M1 is frozen after pretraining: test releases are drawn once and re-sent.
    assert rounds[0]["fresh_test_releases"] == 40 and rounds[1]["fresh_test_releases"] == 0
    last = rounds[-1]["privacy"]
    assert last["epsilon_metric"] == pytest.approx(5.0) and last["epsilon_ldp"] == pytest.approx(10.0)
    assert last["epsilon_label"] == pytest.approx(2.0) and last["label_protected"] is True
    assert all(r["ldp_guarantee_holds"] for r in rounds)
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["ldp_guarantee_holds"] is True
    assert "trained on the public split" in summary["guarantee"]["sentence"]["text"]
    assert summary["final"]["clean_accuracy"] is None  # privemb releases live in R^8, not in M1's space


@pytest.mark.slow  # ~30 s; in the default run the leaky flow is covered in process (message audit, sanitas audit)
def test_leaky_map_says_ldp_does_not_hold_everywhere(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """The leaky mode says LDP does not hold everywhere; with clean-evaluation = false the nodes
    score the sanitized releases only (no clean scores come back)."""
    extra = {"map-in": '"leaky"', "allow-unaccounted-leakage": "true", "clean-evaluation": "false"}
    proc = run_cli(tmp_path, data_dir, cache_dir, extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "out" / "r"
    rounds = rounds_of(folder)
    for r in rounds:
        assert r["ldp_guarantee_holds"] is False
        assert r["privacy"]["ldp_guarantee_holds"] is False and "NOT LOCAL DP" in r["privacy"]["reason"]
        assert "epsilon_ldp" not in r["privacy"] and r["privacy"]["evaluation_covered"] is False
        assert r["clean_accuracy"] is None and 0.0 <= r["accuracy"] <= 1.0
    # M1 changed after round 1, so round 2's test releases were drawn again.
    assert rounds[1]["fresh_test_releases"] == 40
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["ldp_guarantee_holds"] is False
    assert summary["guarantee"]["sentence"]["text"].startswith("NOT LOCAL DP")
    assert any("NOT LOCAL DP" in note for note in summary["guarantee"]["notes"])
    assert "False" in (folder / "rounds.csv").read_text()
    assert "NOT LOCAL DP" in proc.stderr


def test_budget_refusals_reach_the_server_as_normal_replies(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """max-epsilon = 4: a training release costs pi*1 + 0.5 = 3.64 and a test release pi = 3.14, so
    the second round's fresh draws are refused by the clients, the cached releases are re-sent,
    and no user's spend exceeds the budget."""
    extra = {
        "sentence-epsilon": "1.0",
        "label-mechanism": '"rr"',
        "label-epsilon": "0.5",
        "fresh-noise-per-round": "true",
        "fraction-train": "1.0",
        "max-epsilon": "4.0",
    }
    proc = run_cli(tmp_path, data_dir, cache_dir, extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rounds = rounds_of(tmp_path / "out" / "r")
    assert rounds[0]["refused_train_releases"] == 0 and rounds[0]["refused_test_releases"] == 0
    assert rounds[1]["refused_train_releases"] == 60 and rounds[1]["refused_test_releases"] == 40
    assert rounds[1]["fresh_train_releases"] == 0 and rounds[1]["train_releases_total"] == 60
    assert rounds[1]["refused_releases_total"] == {"train": 60, "test": 40}
    last = rounds[-1]["privacy"]
    assert last["max_releases_per_user"] == 1
    assert last["epsilon_total"] == pytest.approx(math.pi + 0.5) and last["epsilon_total"] <= 4.0
    assert 0.0 <= rounds[1]["accuracy"] <= 1.0


@pytest.mark.slow  # a Ray run (~45 s); the word level's messages are checked in process by the message audit
def test_word_level_rewrite_with_budget_warning_and_quality(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """word-mechanism = trlaplace (eps 20 per word, delta 0.0532 > 1/100 users): documents are
    rewritten on the nodes and their embeddings released without further noise. The ledger charges
    k * 20 per k-word document (+ 2 for the RR label), the clients refuse documents over the
    budget of 150, the delta warning is loud, and the rewrite diagnostics are written."""
    extra = {
        "sentence-mechanism": '"none"',
        "map-in": '"identity"',
        "word-mechanism": '"trlaplace"',
        "word-epsilon": "20.0",
        "word-options": "'vocab_size = 20000'",
        "word-quality-docs": "20",
        "word-support-words": "1",
        "label-mechanism": '"rr"',
        "label-epsilon": "2.0",
        "max-epsilon": "150.0",
    }
    proc = run_cli(tmp_path, data_dir, cache_dir, extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARNING: the word mechanism's delta per word is 0.0532" in proc.stderr
    folder = tmp_path / "out" / "r"
    rounds = rounds_of(folder)
    privacy = rounds[-1]["privacy"]
    word = privacy["word_level"]
    assert word["per_word"]["epsilon"] == 20.0 and word["per_word"]["delta"] == pytest.approx(0.0532, abs=1e-4)
    assert "0.0532" in word["delta_warning"]
    # Only documents of at most 7 words fit the budget: 7 * 20 + 2 = 142 <= 150 < 8 * 20 + 2.
    refused = sum(r["refused_train_releases"] + r["refused_test_releases"] for r in rounds)
    assert refused > 0 and word["max_words_per_document"] <= 7
    assert privacy["epsilon_total"] <= 150.0
    assert privacy["epsilon_ldp"] == pytest.approx(20.0 * word["max_words_per_document"])
    longest = word["per_document_longest"]
    assert longest["epsilon"] == pytest.approx(privacy["epsilon_ldp"])
    assert longest["delta"] == pytest.approx(1 - (1 - word["per_word"]["delta"]) ** word["max_words_per_document"])
    summary = json.loads((folder / "summary.json").read_text())
    assert "word-level rewrite" in summary["guarantee"]["sentence"]["text"]
    assert any("delta per word" in note for note in summary["guarantee"]["notes"])
    quality = json.loads((folder / "rewrite_quality.json").read_text())
    assert quality["documents"] == 20 and 0.0 <= quality["N_w"] <= 1.0 and 0.0 <= quality["rouge1_f"] <= 1.0
    assert summary["rewrite_quality"]["bleu"] == quality["bleu"]
    from simulations.drivers import sweep_tables

    columns = sweep_tables._word_columns(summary)
    assert columns["pure_ldp_per_word"] == 20.0 and columns["N_w"] == quality["N_w"]
    assert columns["document_epsilon_longest"] == pytest.approx(privacy["epsilon_ldp"])


DOCUMENT_LEVEL = {
    "dataset": '"imdb"',
    "train-size": "80",
    "test-size": "20",
    "public-fraction": "0.5",
    "users-per-node": "10",
    "sentence-mechanism": '"none"',
    "map-in": '"identity"',
    "document-epsilon": "10.0",
    "recoder-clusters": "4",
    "recoder-epochs": "2",
    "num-candidates": "20",
    "candidate-min-sentences": "4",
}


# Ray runs (~60 s each): slow tests; both document mechanisms' messages are checked in process by the
# message audit, and their releases by sanitas audit
@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["deepcandidate", "truncation"])
def test_document_level_releases(tmp_path: Path, data_dir: Path, cache_dir: Path, mechanism: str) -> None:
    """Sentence-level DP of IMDB reviews: the server builds the public material (recoder, candidates and a
    tuned p, or the clipping box) from public reviews, nodes release one document each, the ledger charges
    the whole-document guarantee (eps k / 2 or eps k), and scores are broken down by k."""
    proc = run_cli(tmp_path, data_dir, cache_dir, {**DOCUMENT_LEVEL, "document-mechanism": f'"{mechanism}"'})
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "out" / "r"
    rounds = rounds_of(folder)
    level = rounds[-1]["privacy"]["document_level"]
    k_max = level["max_sentences_per_document"]
    assert level["mechanism"] == mechanism and level["per_sentence"]["epsilon"] == 10.0 and k_max >= 2
    whole = 10.0 * k_max / 2 if mechanism == "deepcandidate" else 10.0 * k_max
    assert level["per_document_longest"]["epsilon"] == pytest.approx(whole)
    assert rounds[-1]["privacy"]["epsilon_ldp"] == pytest.approx(whole)  # one release per user, cached after
    assert rounds[0]["fresh_test_releases"] == 20 and rounds[1]["fresh_test_releases"] == 0
    buckets = rounds[-1]["by_sentences"]
    assert sum(b["documents"] for b in buckets) == 20 and all(0 <= b["macro_f1"] <= 1 for b in buckets)
    assert 0.5 - 1e-9 <= rounds[-1]["random_guess_f1"] <= 1.0  # sum q_i^2 >= 1/K for K = 2 classes
    setup = rounds[0]["public_pretraining"]["document_setup"]
    summary = json.loads((folder / "summary.json").read_text())
    assert "number of sentences k is revealed" in summary["guarantee"]["sentence"]["text"]
    assert set(summary["data"]["dropped_short_documents"]) == {"train", "test"}  # counted, even if 0
    if mechanism == "deepcandidate":
        assert setup["candidates"] <= 20 and setup["projection_tuning"]["chosen"] in (10, 25, 50, 100)
        assert level["num_projections"] == setup["projection_tuning"]["chosen"]
    else:
        assert setup["box_mean_width"] > 0
