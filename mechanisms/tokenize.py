"""Split text into word tokens and the separators between them, reversibly.

``tokenize(text)`` returns ``(tokens, separators)`` with
``len(separators) == len(tokens) + 1``: ``separators[0]`` precedes the first
token, ``separators[i + 1]`` follows token i, and

    detokenize(tokens, separators) == text

for every string (the separators keep whitespace, punctuation and anything
else verbatim). A word sanitizer replaces the tokens only, one output word per
input word; the separators, hence the number and positions of the words, are
released as they are (docs/SPEC.md §0.1: a word-level guarantee compares
documents of equal length).

Word tokens follow GloVe's (Stanford/PTB) tokenization so that lookups hit the
vocabulary: runs of letters and digits, with internal hyphens and apostrophes
("well-known", "o'neill"), decimal numbers ("3.5", "1,000"), dotted
abbreviations ("u.s.", "e.g."), and English
clitics split off as their own tokens ("don't" -> "do" + "n't", "it's" ->
"it" + "'s", both in GloVe), so pre-tokenized corpora such as SST-2
("does n't", "it 's") and raw text give the same words.

Plain text, no torch, no import of Sanitas: :meth:`mechanisms.base.WordMechanism.rewrite` splits
with it, :mod:`mechanisms.words` re-exports it, and :mod:`fl.cohort` counts words with it.
"""

from __future__ import annotations

import re

_CLITIC = r"(?:['’](?:s|re|ve|ll|d|m)|n['’]t)(?![^\W_])"
WORD_PATTERN = re.compile(
    "|".join(
        [
            r"[^\W_]+(?=n['’]t(?![^\W_]))",  # "do" in "don't"
            _CLITIC,  # "n't", "'s", "'re", ... (also stand-alone, as in SST-2)
            r"\d+(?:[.,]\d+)+",  # 3.5, 1,000, 1.000.000
            r"(?:[^\W\d_]\.){2,}",  # u.s., e.g.
            rf"[^\W_]+(?:(?!{_CLITIC})[-'’][^\W_]+)*",  # words, hyphenated words, o'neill
        ]
    ),
    re.IGNORECASE,
)


def tokenize(text: str) -> tuple[list[str], list[str]]:
    """Word tokens of ``text`` and the ``len(tokens) + 1`` separators around them."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    tokens: list[str] = []
    separators: list[str] = []
    end = 0
    for match in WORD_PATTERN.finditer(text):
        separators.append(text[end : match.start()])
        tokens.append(match.group())
        end = match.end()
    separators.append(text[end:])
    return tokens, separators


def detokenize(tokens: list[str], separators: list[str]) -> str:
    """Inverse of :func:`tokenize`: interleave separators and tokens."""
    if len(separators) != len(tokens) + 1:
        raise ValueError(f"need len(separators) == len(tokens) + 1, got {len(separators)} and {len(tokens)}")
    parts = [separators[0]]
    for token, sep in zip(tokens, separators[1:]):
        parts.append(token)
        parts.append(sep)
    return "".join(parts)


__all__ = ["WORD_PATTERN", "detokenize", "tokenize"]
