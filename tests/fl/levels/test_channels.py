"""The channel contract, for every registered mechanism of every level: a guarantee is stated,
the cost the client's budget check uses equals what the server's ledger charges, the release
and its charges survive the wire, and bad parameters are refused before anything runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.app import RecordDict

import mechanisms
from fl import config, wire
from fl.accounting import PrivacyLedger
from fl.config import level_of
from fl.levels.channels import (
    DocumentChannel,
    EmbeddingChannel,
    LabelChannel,
    SentenceChannel,
    WordChannel,
    make_channels,
    run_label,
)
from fl.levels.document.setup import DocumentSetup
from fl.levels.spec import LevelSpec
from mechanisms.guarantee import Guarantee

DIM = 8


def _names(level: str) -> list[str]:
    return [n for n in mechanisms.names() if n != "none" and mechanisms.mechanism_class(n).level == level]


def _setup(kind: str, eps: float = 2.0) -> DocumentSetup:
    gen = torch.Generator().manual_seed(0)
    if kind == "deepcandidate":
        return DocumentSetup(kind, eps, candidates=torch.randn(50, DIM, generator=gen), num_projections=10)
    return DocumentSetup(kind, eps, lo=-torch.ones(DIM), hi=torch.ones(DIM))


def _channel(level: str, name: str) -> EmbeddingChannel:
    if level == "sentence":
        return make_channels(
            LevelSpec.from_config(config.resolve({"sentence-mechanism": name, "sentence-epsilon": 2.0})), DIM
        ).embedding
    if level == "word":
        cfg = config.resolve(
            {
                "word-mechanism": name,
                "word-epsilon": 5.0,
                "sentence-mechanism": "none",
                "word-options": "vocab_size = 2000",
            }
        )
        return make_channels(LevelSpec.from_config(cfg), DIM).embedding
    cfg = config.resolve(
        {
            "document-mechanism": name,
            "document-epsilon": 2.0,
            "sentence-mechanism": "none",
            "map-in": "identity",
            "public-fraction": 0.1,
        }
    )
    return make_channels(LevelSpec.from_config(cfg), DIM, _setup(name)).embedding


EXTRAS = {
    "sentence": {},
    "word": {"num-words": np.array([3, 0, 7, 3])},
    "document": {"num-sentences": np.array([2, 5, 5, 9])},
}
CASES = [(level, name) for level in ("sentence", "word", "document") for name in _names(level)]


#: Each channel's pure-epsilon cost of the 4 rows of EXTRAS at the test epsilons (sentence 2, word 5,
#: document 2). Sentence: epsilon for a pure or (epsilon, delta) release, epsilon times the unit sphere's
#: diameter for a metric one (2 in the Euclidean metric, pi in the angular one). Word: per word, times the
#: words (3, 0, 7, 3); the metric mechanisms times the vocabulary's diameter in their metric (GloVe 6B
#: 50d). Document: per document with (2, 5, 5, 9) sentences.
PINNED_COSTS = {
    ("sentence", "class_rr"): [2.0] * 4,
    ("sentence", "gaussian"): [2.0] * 4,
    ("sentence", "laplace"): [2.0] * 4,
    ("sentence", "planar_laplace"): [4.0] * 4,
    ("sentence", "privemb"): [4.0] * 4,
    ("sentence", "privunit"): [2.0] * 4,
    ("sentence", "purkayastha"): [2 * math.pi] * 4,
    ("word", "cmp"): [156.119846, 0.0, 364.27964, 156.119846],
    ("word", "mahalanobis"): [151.696529, 0.0, 353.958567, 151.696529],
    ("word", "trlaplace"): [15.0, 0.0, 35.0, 15.0],
    ("word", "word_gaussian"): [15.0, 0.0, 35.0, 15.0],
    ("word", "word_laplace"): [15.0, 0.0, 35.0, 15.0],
    ("document", "deepcandidate"): [2.0, 5.0, 5.0, 9.0],
    ("document", "truncation"): [4.0, 10.0, 10.0, 18.0],
}


def test_every_channel_s_cost_is_pinned() -> None:
    assert sorted(PINNED_COSTS) == sorted(CASES)  # a new mechanism gets its pinned cost


@pytest.mark.parametrize(("level", "name"), CASES)
def test_cost_equals_the_ledger_charge_and_survives_the_wire(level: str, name: str) -> None:
    """Budget cost per row == what the ledger records from the wire; the wire round trip keeps
    rows, extras and charges."""
    channel = _channel(level, name)
    assert isinstance(channel.guarantee, Guarantee) and channel.guarantee.is_private
    assert channel.level == level == channel.release_config.level
    extras = EXTRAS[level]
    n = 4
    costs = channel.costs(n, extras)
    assert costs.shape == (n,) and costs == pytest.approx(PINNED_COSTS[(level, name)], rel=1e-6)
    charges, index = channel.charges(n, extras)
    users = np.arange(n)
    ids = np.arange(n) if isinstance(channel, DocumentChannel) else None
    emb = np.random.default_rng(0).normal(size=(n, DIM)).astype(np.float32)
    if isinstance(channel, DocumentChannel) and channel.setup.candidates is not None:
        emb = channel.setup.candidates[torch.as_tensor(ids)].numpy()
    rel = wire.Release(
        user_ids=users,
        fresh=np.ones(n, dtype=bool),
        rows=channel.to_record(emb, ids, extras),
        charges={"embedding": charges},
        index={"embedding": index},
    )
    back = wire.Release.from_content(RecordDict(rel.to_content()))
    ledger = PrivacyLedger({"train": n})
    for group, charge in back.fresh_charges("embedding"):
        units = None if charge.units is None else np.full(group.size, charge.units)
        ledger.record("train", group, charge.guarantee, "embedding", units=units)
    assert ledger.spent("train", users) == pytest.approx(costs)
    received = channel.from_record(back.rows_record())
    np.testing.assert_allclose(received.emb, emb, rtol=1e-6)
    for key, value in extras.items():
        assert np.array_equal(received.extras[key], value)


@pytest.mark.parametrize(("level", "name"), CASES)
def test_bad_parameters_are_refused_before_running(level: str, name: str) -> None:
    """A non-positive epsilon stops the config with a message naming the key."""
    key = {"sentence": "sentence-epsilon", "word": "word-epsilon", "document": "document-epsilon"}[level]
    base = {
        "sentence": {},
        "word": {"sentence-mechanism": "none"},
        "document": {"sentence-mechanism": "none", "map-in": "identity", "public-fraction": 0.1},
    }[level]
    with pytest.raises(config.ConfigError, match="epsilon"):
        config.resolve({**base, f"{level}-mechanism": name, key: -1.0})


@pytest.mark.parametrize(
    "name", [n for n in mechanisms.names() if mechanisms.mechanism_class(n).level == "label" or n == "none"]
)
def test_label_channel_contract(name: str) -> None:
    """The label channel charges one use of its guarantee per label (infinite in the clear)."""
    channel = LabelChannel(LevelSpec.from_config(config.resolve({"label-mechanism": name, "label-epsilon": 1.5})))
    charges, index = channel.charges(3)
    assert len(charges) == 1 and np.array_equal(index, np.zeros(3))
    expected = 1.5 if name != "none" else math.inf
    assert channel.costs(3) == pytest.approx(np.full(3, expected))
    y = torch.tensor([0, 1, 1])
    torch.manual_seed(0)  # the prior model's weights (rr_prior with label-prior = "model")
    model = torch.nn.Linear(2, 2)
    out = channel.release(y, torch.zeros(3, 2), model, 2, torch.Generator().manual_seed(0))
    assert out.shape == (3,) and set(out.tolist()) <= {0, 1}
    if name == "none":
        assert np.array_equal(out, y.numpy())


def test_the_rr_label_channel_keeps_a_label_with_the_probability_its_epsilon_gives() -> None:
    """2-ary randomized response at epsilon 1.5 keeps a label with probability e^1.5 / (e^1.5 + 1) = 0.8176:
    20,000 releases land within 4 standard deviations of it (power: epsilon 1.0 keeps 0.7311, 3.0 keeps
    0.9526, both more than 30 standard deviations away)."""
    channel = LabelChannel(
        LevelSpec.from_config(config.resolve({"label-mechanism": "rr", "label-epsilon": 1.5})), num_classes=2
    )
    n = 20_000
    y = torch.arange(n) % 2
    out = channel.release(y, torch.zeros(n, 2), None, 2, torch.Generator().manual_seed(3))
    kept = float((torch.as_tensor(out) == y).double().mean())
    p = math.exp(1.5) / (math.exp(1.5) + 1)
    assert abs(kept - p) < 4 * math.sqrt(p * (1 - p) / n), (kept, p)


def test_one_factory_decides_the_level() -> None:
    """Only the factory reads the level flags; the run name follows the channel."""
    sentence = config.resolve({})
    word = config.resolve({"word-mechanism": "cmp", "sentence-mechanism": "none"})
    document = config.resolve(
        {"document-mechanism": "truncation", "sentence-mechanism": "none", "map-in": "identity", "public-fraction": 0.1}
    )
    assert [level_of(c) for c in (sentence, word, document)] == ["sentence", "word", "document"]
    assert isinstance(make_channels(LevelSpec.from_config(sentence), DIM).embedding, SentenceChannel)
    assert isinstance(make_channels(LevelSpec.from_config(word), DIM).embedding, WordChannel)
    assert isinstance(
        make_channels(LevelSpec.from_config(document), DIM, _setup("truncation")).embedding, DocumentChannel
    )
    with pytest.raises(ValueError, match="public setup"):
        make_channels(LevelSpec.from_config(document), DIM)
    assert (run_label(sentence.release), run_label(word.release), run_label(document.release)) == (
        "purkayastha-eps10",
        "cmp-eps10-per-word",
        "truncation-eps10-per-sentence",
    )


def test_rr_label_charges_name_the_number_of_labels() -> None:
    """k-ary RR's charges carry K, so the ledger composes dp-accounting's RandomizedResponseDpEvent(K)."""
    from dp_accounting import dp_event

    cfg = config.resolve({"label-mechanism": "rr", "label-epsilon": 1.0})
    (charge,), _ = LabelChannel(LevelSpec.from_config(cfg), num_classes=4).charges(2)
    assert charge.num_buckets == 4
    assert isinstance(charge.event, dp_event.RandomizedResponseDpEvent)
    assert charge.event.noise_parameter == pytest.approx(4 / (math.e + 3)) and charge.event.num_buckets == 4
    (unknown,), _ = LabelChannel(LevelSpec.from_config(cfg)).charges(2)
    assert unknown.num_buckets is None and unknown.event is None  # K unknown: the generic pair
    prior = config.resolve({"label-mechanism": "rr_prior", "label-epsilon": 1.0})
    assert (
        LabelChannel(LevelSpec.from_config(prior), num_classes=4).charges(1)[0][0].num_buckets is None
    )  # not k-RR's law
