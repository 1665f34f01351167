"""Which level a run releases at, read from the config in exactly one place.

``fl.channels`` builds the level's channel from this; modules that must
prepare a level's inputs before any channel exists (the cohort's sentence
embeddings or word counts, the short-document filter of the data) ask
:func:`level_of` too, never the ``word-mechanism`` / ``document-mechanism``
keys directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LEVELS = ("sentence", "word", "document")


def level_of(cfg: Mapping[str, Any]) -> str:
    """``"word"`` or ``"document"`` when that level's mechanism is set, else ``"sentence"``
    (the config check refuses two levels at once)."""
    if cfg["word-mechanism"] != "none":
        return "word"
    if cfg["document-mechanism"] != "none":
        return "document"
    return "sentence"
