"""Tokenizer: exact round trip, GloVe-style word splits (spec §5.1 word level)."""

from __future__ import annotations

import random

import pytest

from mechanisms.words import detokenize, tokenize


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("it 's a charming and often affecting journey . ", ["it", "'s", "a", "charming", "and", "often",
                                                             "affecting", "journey"]),
        ("Don't stop: it's O'Neill's well-known 3.5% of 1,000 U.S. cars.",
         ["Do", "n't", "stop", "it", "'s", "O'Neill", "'s", "well-known", "3.5", "of", "1,000", "U.S.", "cars"]),
        ("does n't , ca n't", ["does", "n't", "ca", "n't"]),
        ("snake_case\ttab\nnewline  naïve café 東京🙂", ["snake", "case", "tab", "newline", "naïve", "café", "東京"]),
        ("", []),
        ("  ... !!", []),
    ],
)
def test_word_splits(text: str, words: list[str]) -> None:
    tokens, separators = tokenize(text)
    assert tokens == words
    assert len(separators) == len(tokens) + 1
    assert detokenize(tokens, separators) == text


def test_round_trip_on_random_text() -> None:
    """detokenize(tokenize(t)) == t for arbitrary strings (letters, digits, punctuation, unicode, whitespace)."""
    rng = random.Random(0)
    alphabet = "abcXYZ019 '’-_.,!?\t\n\"()éß東🙂\u200b"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        tokens, separators = tokenize(text)
        assert detokenize(tokens, separators) == text
        assert all(tokens)  # no empty word token


def test_round_trip_has_power() -> None:
    """A detokenizer that joins with single spaces (a common shortcut) breaks the round trip."""
    tokens, separators = tokenize("a  b,c")
    assert " ".join(tokens) != "a  b,c" and detokenize(tokens, separators) == "a  b,c"


def test_bad_input() -> None:
    with pytest.raises(TypeError):
        tokenize(["not", "a", "string"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="separators"):
        detokenize(["a", "b"], ["", ""])
