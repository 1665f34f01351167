"""Registry, constructors, bad input, the text contract and OOV handling (docs/SPEC.md §5.1, §0.4)."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

import mechanisms
from mechanisms.words import WordSpace

WORD_MECHANISMS = ["cmp", "mahalanobis", "trlaplace", "word_gaussian", "word_laplace"]


def test_registry_and_lazy_default_space() -> None:
    """create(name, epsilon=...) works for every word mechanism without loading GloVe."""
    assert set(WORD_MECHANISMS) <= set(mechanisms.names())
    for name in WORD_MECHANISMS:
        mech = mechanisms.create(name, epsilon=10)
        assert mech.level == "word" and mechanisms.mechanism_class(name).level == "word"
        assert isinstance(mech, mechanisms.WordMechanism)
        assert mech._space is None  # loaded on first use only


@pytest.mark.parametrize("name", WORD_MECHANISMS)
def test_bad_parameters(name: str, space16: WordSpace) -> None:
    for eps in (0, -1.0, float("nan"), float("inf"), "ten", None):
        with pytest.raises(ValueError, match="epsilon"):
            mechanisms.create(name, epsilon=eps, space=space16)
    with pytest.raises(ValueError, match="unknown word space"):
        mechanisms.create(name, epsilon=1.0, space="fasttext")
    with pytest.raises(ValueError, match="bad parameters"):
        mechanisms.create(name, epsilon=1.0, space=space16, no_such_option=3)
    with pytest.raises(ValueError, match="vocab_size"):
        mechanisms.create(name, epsilon=1.0, space=space16, vocab_size=1)
    with pytest.raises(ValueError, match="unknown mechanism"):
        mechanisms.create(name + "_x", epsilon=1.0)


@pytest.mark.parametrize("name", WORD_MECHANISMS)
def test_bad_ids_and_texts(name: str, space16: WordSpace) -> None:
    mech = mechanisms.create(name, epsilon=1.0, space=space16)
    g = torch.Generator().manual_seed(0)
    for bad in (torch.tensor([[1, 2]]), torch.tensor([0.5]), torch.tensor([-1]), torch.tensor([space16.unk + 1])):
        with pytest.raises(ValueError, match="ids"):
            mech.sanitize_ids(bad, g)
    with pytest.raises(TypeError):
        mech.sanitize_ids([1, 2], g)
    with pytest.raises(TypeError, match="list of str"):
        mech.sanitize_text("a single string", g)
    assert mech.sanitize_ids(torch.empty(0, dtype=torch.int64), g).shape == (0,)
    assert mech.sanitize_text([], g) == [] and mech.sanitize_text(["", " ,. "], g) == ["", " ,. "]


@pytest.mark.parametrize("name", WORD_MECHANISMS)
def test_text_structure_and_round_trip(name: str) -> None:
    """One output word per input word, separators verbatim; with negligible noise the text comes back
    (lower-cased) and OOV words never do (they go through <unk>). TrLaplace's noise never falls below
    about Lap(4C) per coordinate (dummy dimensions), so it keeps only the structure."""
    space = WordSpace.from_vectors(
        "toy",
        ["the", "cat", "sat", "on", "mat", "'s"],
        torch.tensor([[0.0, 0.0], [4, 0], [0, 4], [4, 4], [-4, 0], [0, -4]]),
    )
    params = {"clip": 100.0} if name.startswith("word_") else {}
    mech = mechanisms.create(name, epsilon=1e6 if name == "trlaplace" else 1e9, space=space, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = mech.sanitize_text(["The cat's  on\tthe mat!", "Zebra sat."], torch.Generator().manual_seed(0))
    pattern = r"^[a-z']+ [a-z']+'?[a-z']*  [a-z']+\t[a-z']+ [a-z']+!$"
    assert re.match(pattern, out[0]) and re.match(r"^[a-z']+ [a-z']+\.$", out[1])
    if name != "trlaplace":
        assert out[0] == "the cat's  on\tthe mat!"
        assert out[1].endswith(" sat.") and not out[1].startswith("Zebra")


@pytest.mark.parametrize("name", ["cmp", "mahalanobis", "word_laplace"])
def test_oov_goes_through_unk_and_is_perturbed(name: str, space16: WordSpace) -> None:
    """OOV -> <unk> (the mean vector) -> noise -> a vocabulary word: never passed through, never dropped."""
    mech = mechanisms.create(name, epsilon=2.0, space=space16)
    texts = ["qqzzx"] * 3000
    out = mech.sanitize_text(texts, torch.Generator().manual_seed(1))
    assert all(o in space16.word_to_id for o in out)  # one real word per OOV word
    assert len(set(out)) > 20  # perturbed: many different outputs, not a fixed replacement
    ids = space16.lookup(["qqzzx"]).expand(3000)
    y = mech.perturb(ids, torch.Generator().manual_seed(2))
    centre = mech.input_vectors(torch.device("cpu"))[space16.unk]  # the mean vector (clipped for word_laplace)
    assert torch.allclose(centre.float(), space16.vectors[space16.unk]) or name == "word_laplace"
    assert ((y.mean(0) - centre).abs() < 5 * y.std(0) / 3000**0.5).all()  # noise centred on the <unk> vector


def test_outputs_independent_across_tokens_of_a_batch(space16: WordSpace) -> None:
    """The same word 3000 times in one call: many different outputs (one noise vector per batch would give one)."""
    mech = mechanisms.create("cmp", epsilon=3.0, space=space16)
    out = mech.sanitize_ids(torch.full((3000,), 11, dtype=torch.int64), torch.Generator().manual_seed(0))
    assert len(torch.unique(out)) > 20
    again = mech.sanitize_ids(torch.full((3000,), 11, dtype=torch.int64), torch.Generator().manual_seed(0))
    assert torch.equal(out, again)  # reproducible from the generator


def test_document_guarantee_validation(space16: WordSpace) -> None:
    mech = mechanisms.create("word_laplace", epsilon=1.0, space=space16)
    assert mech.document_guarantee(0).epsilon == 0.0
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="num_words"):
            mech.document_guarantee(bad)


def test_cmp_on_glove_end_to_end() -> None:
    """Real GloVe 6B 50d: large epsilon keeps most words, OOV words are replaced, structure is kept."""
    mech = mechanisms.create("cmp", epsilon=50)
    text = "it 's a charming and often affecting journey . Qzxwvbn !"
    out = mech.sanitize_text([text] * 20, torch.Generator().manual_seed(0))
    kept = sum(a == b for o in out for a, b in zip(o.split(" "), text.split(" ")))
    assert kept > 0.6 * 20 * len(text.split(" "))
    assert all(o.split(" ")[-3] == "." and o.endswith(" !") and "Qzxwvbn" not in o for o in out)
    g = mech.guarantee
    assert g.diameter == pytest.approx(21.1036, abs=1e-4) and g.as_ldp()[0] == pytest.approx(50 * g.diameter)


def test_document_guarantee_composes_per_notion(space16: WordSpace) -> None:
    """pure -> k eps; metric -> eps on the summed distance (diameter k D); approx -> (k eps, min(1, k delta))."""
    lap = mechanisms.create("word_laplace", epsilon=1.5, space=space16).document_guarantee(4)
    assert (lap.notion, lap.epsilon, lap.delta, lap.granularity) == ("pure", 6.0, 0.0, "document")
    cmp = mechanisms.create("cmp", epsilon=2.0, space=space16)
    doc = cmp.document_guarantee(3)
    assert doc.metric == "euclidean_sum" and doc.epsilon == 2.0
    assert doc.diameter == pytest.approx(3 * cmp.guarantee.diameter)
    assert doc.as_ldp()[0] == pytest.approx(3 * cmp.guarantee.as_ldp()[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the large-delta warning of TrLaplace at epsilon = 1
        tr = mechanisms.create("trlaplace", epsilon=1.0, space=space16)
        _ = tr.guarantee
    small = tr.document_guarantee(1)
    assert small.delta == pytest.approx(tr.guarantee.delta) and not small.is_vacuous
    big = tr.document_guarantee(50)
    # TrLaplace composes its support leak exactly: 1 - (1 - delta)^k, here within 1e-11 of 1.
    assert big.delta == pytest.approx(1 - (1 - tr.guarantee.delta) ** 50, abs=1e-15)
    assert big.is_vacuous and "VACUOUS" in big.describe() and not tr.document_guarantee(3).is_vacuous


def test_rewrite_keeps_ids_and_word_counts(space16: WordSpace) -> None:
    mech = mechanisms.create("cmp", epsilon=1e4, space=space16)
    r = mech.rewrite(["w1 w2, w3", "", "zzz w4"], torch.Generator().manual_seed(0))
    assert r.num_words.tolist() == [3, 0, 2]
    assert r.input_ids.tolist() == [1, 2, 3, space16.unk, 4]
    assert r.texts[0] == "w1 w2, w3" and r.texts[1] == ""  # huge epsilon: words kept, separators kept
    assert r.output_ids[3] != space16.unk and r.texts[2].endswith(" w4")
