"""Offline, deterministic sentence splitter (no model, no download).

Rule: a sentence ends at ``.``, ``!`` or ``?`` (possibly repeated, possibly
followed by closing quotes or brackets) when whitespace follows and the token
before the period is not a known abbreviation or a single initial. HTML line
breaks (``<br />``, as in IMDB) are sentence boundaries too. Whitespace is
collapsed; empty pieces are dropped. The same input always gives the same output.
"""

from __future__ import annotations

import re

ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e u.s u.k inc ltd co corp no fig jan feb mar apr jun jul "
    "aug sep sept oct nov dec mt ft approx dept est gen gov lt col sgt rev".split()
)
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_CANDIDATE = re.compile(r"([.!?]+[\"'”’)\]]*)\s+")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences; returns ``[]`` for empty or whitespace-only text."""
    sentences: list[str] = []
    for block in _BREAK.split(text):
        block = " ".join(block.split())
        start = 0
        for match in _CANDIDATE.finditer(block):
            end = match.end(1)
            if match.group(1).startswith(".") and _is_abbreviation(block[start : match.start(1)]):
                continue
            piece = block[start:end].strip()
            if piece:
                sentences.append(piece)
            start = match.end()
        tail = block[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences


def _is_abbreviation(before: str) -> bool:
    words = before.split()
    if not words:
        return False
    last = words[-1].lower().lstrip("(\"'")
    return last in ABBREVIATIONS or (len(last) == 1 and last.isalpha())
