"""Release channels: one per level (sentence, word, document) plus the label channel.

:func:`make_channels` is the one place that decides, from the config, which
level a run releases at; everything else asks the channel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..document_level import DocumentSetup
from ..levels import level_of
from .base import Drawn, EmbeddingChannel, Received, ReleaseInputs, concat_extras
from .document import DocumentChannel
from .label import LabelChannel
from .sentence import SentenceChannel
from .word import WordChannel

#: Level name -> channel class; ``fl.levels.level_of`` reads which level a config selects.
LEVELS: dict[str, type[EmbeddingChannel]] = {
    "sentence": SentenceChannel,
    "word": WordChannel,
    "document": DocumentChannel,
}


def channel_class(cfg: Mapping[str, Any]) -> type[EmbeddingChannel]:
    """The class of the run's embedding channel (its class methods need no built channel)."""
    return LEVELS[level_of(cfg)]


@dataclass(frozen=True)
class Channels:
    """The run's embedding channel and label channel."""

    embedding: EmbeddingChannel
    label: LabelChannel


def run_label(cfg: Mapping[str, Any]) -> str:
    """The level's mechanism and epsilon, for run names and plot titles (no channel needs building)."""
    return channel_class(cfg).run_label(cfg)


def make_channels(
    cfg: Mapping[str, Any], input_dim: int, setup: DocumentSetup | None = None, num_classes: int | None = None
) -> Channels:
    """Build the run's channels once (``setup``: the document level's public material; ``num_classes``: the
    number of labels, which randomized response's charges carry for its dp-accounting event)."""
    level = level_of(cfg)
    if level == "document":
        if setup is None:
            raise ValueError("the document level needs the server's public setup")
        embedding: EmbeddingChannel = DocumentChannel(cfg, input_dim, setup)
    else:
        embedding = LEVELS[level](cfg, input_dim)
    return Channels(embedding, LabelChannel(cfg, num_classes))


__all__ = [
    "LEVELS",
    "Channels",
    "DocumentChannel",
    "Drawn",
    "EmbeddingChannel",
    "LabelChannel",
    "Received",
    "ReleaseInputs",
    "SentenceChannel",
    "WordChannel",
    "channel_class",
    "concat_extras",
    "level_of",
    "make_channels",
    "run_label",
]
