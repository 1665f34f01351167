"""Tokenizer: exact round trip, GloVe-style word splits (docs/SPEC.md §5.1 word level)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from mechanisms.words import detokenize, tokenize


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "it 's a charming and often affecting journey . ",
            ["it", "'s", "a", "charming", "and", "often", "affecting", "journey"],
        ),
        (
            "Don't stop: it's O'Neill's well-known 3.5% of 1,000 U.S. cars.",
            ["Do", "n't", "stop", "it", "'s", "O'Neill", "'s", "well-known", "3.5", "of", "1,000", "U.S.", "cars"],
        ),
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


def _round_trip_failures(detok: Callable[[list[str], list[str]], str]) -> list[str]:
    """The random texts (letters, digits, punctuation, unicode, whitespace) on which ``detok(*tokenize(t)) != t``
    or ``tokenize`` yields an empty word token."""
    rng = random.Random(0)
    alphabet = "abcXYZ019 '’-_.,!?\t\n\"()éß東🙂\u200b"
    failures = []
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        tokens, separators = tokenize(text)
        if detok(tokens, separators) != text or not all(tokens):
            failures.append(text)
    return failures


def test_round_trip_on_random_text() -> None:
    """detokenize(tokenize(t)) == t for arbitrary strings, and no empty word token."""
    assert _round_trip_failures(detokenize) == []


@pytest.mark.parametrize(
    "broken",
    [
        lambda tokens, separators: " ".join(tokens),  # single spaces: a common shortcut
        lambda tokens, separators: "".join(s + t for s, t in zip(separators, tokens)),  # drops the last separator
        lambda tokens, separators: " ".join(detokenize(tokens, separators).split()),  # collapses whitespace
    ],
    ids=["space-join", "no-trailing-separator", "collapsed-whitespace"],
)
def test_round_trip_has_power(broken: Callable[[list[str], list[str]], str]) -> None:
    """The round-trip check above fails for a detokenizer that loses separators."""
    assert len(_round_trip_failures(broken)) > 100


def test_bad_input() -> None:
    with pytest.raises(TypeError):
        tokenize(["not", "a", "string"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="separators"):
        detokenize(["a", "b"], ["", ""])
