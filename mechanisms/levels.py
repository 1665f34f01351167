"""The release levels a mechanism works at (no torch: the config reads them before any mechanism exists)."""

from __future__ import annotations

#: Where a mechanism applies: to words, sentence embeddings, whole documents, or labels.
LEVELS: tuple[str, ...] = ("word", "sentence", "document", "label")
