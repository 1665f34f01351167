"""Word spaces: <unk>, lookups, GloVe 6B 50d from the installed package."""

from __future__ import annotations

import pytest
import torch

from mechanisms.words import UNK_TOKEN, WordSpace, load_glove, load_space
from mechanisms.words.nearest import diameter
from tests.support.word_spaces import make_space


def test_unk_is_the_mean_and_does_not_enlarge_the_diameter() -> None:
    space = make_space(500, 8)
    real = space.vectors[: space.num_words].to(torch.float64)
    assert space.words[space.unk] == UNK_TOKEN and space.unk == space.num_words == 500
    assert torch.allclose(space.vectors[space.unk].double(), real.mean(0), atol=1e-6)
    assert space.diameter == pytest.approx(diameter(real), rel=1e-9)


def test_lookup_lowercases_and_maps_oov_to_unk() -> None:
    space = WordSpace.from_vectors("toy", ["the", "cat", "n't", "'s"], torch.eye(4))
    ids = space.lookup(["The", "CAT", "dog", "n’t", "’s", "<unk>"])
    assert ids.tolist() == [0, 1, space.unk, 2, 3, space.unk]
    assert space.decode(torch.tensor([1, 0])) == ["cat", "the"]
    cased = WordSpace.from_vectors("cased", ["The", "the"], torch.eye(2), lowercase=False)
    assert cased.lookup(["The", "the", "THE"]).tolist() == [0, 1, cased.unk]


def test_space_validation() -> None:
    with pytest.raises(ValueError, match="reserved"):
        WordSpace.from_vectors("x", ["a", UNK_TOKEN], torch.eye(2))
    with pytest.raises(ValueError, match="unique"):
        WordSpace.from_vectors("x", ["a", "a"], torch.eye(2))
    with pytest.raises(ValueError, match="finite"):
        WordSpace.from_vectors("x", ["a", "b"], torch.tensor([[0.0, float("nan")], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="shape"):
        WordSpace.from_vectors("x", ["a", "b", "c"], torch.eye(2))
    with pytest.raises(ValueError, match="unknown word space"):
        load_space("word2vec")
    small = make_space(100, 4).truncate(10)
    assert small.num_words == 10 and small.vectors.shape == (11, 4)


def test_glove_6b_50d_from_the_installed_package() -> None:
    """400,000 words in frequency order, float32, exact diameter D_V = 21.1036 (unk included)."""
    space = load_glove()
    assert load_space() is space  # cached per process
    assert (space.num_words, space.dim, space.vectors.dtype) == (400_000, 50, torch.float32)
    assert space.words[:4] == ("the", ",", ".", "of")
    assert space.lookup(["The", "n't", "u.s.", "zzqxjwv"]).tolist()[:3] == [
        0,
        space.word_to_id["n't"],
        space.word_to_id["u.s."],
    ]
    assert int(space.lookup(["zzqxjwv"])) == space.unk
    assert space.diameter == pytest.approx(21.103597, abs=1e-5)
    assert load_glove(10_000).num_words == 10_000


@pytest.mark.slow
def test_minilm_word_piece_space() -> None:
    """The encoder's own input embeddings: whole-word pieces only, 384-d."""
    from mechanisms.words import load_minilm

    space = load_minilm()
    assert space.dim == 384 and 20_000 < space.num_words < 30_522
    assert not any(
        w.startswith("##") or (w.startswith("[") and w.endswith("]") and len(w) > 2) for w in space.words[:-1]
    )
    assert "[" in space.word_to_id and "[CLS]" not in space.word_to_id
    assert int(space.lookup(["Charming"])) != space.unk
