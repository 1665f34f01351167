"""A run's release channels: the embedding channel of its level, plus the label channel.

:func:`make_channels` builds them once, for the level :func:`fl.config.level_of` decides;
everything after that asks the channel, never the config's level keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from fl.config import ReleaseConfig
from fl.levels.base import Drawn, EmbeddingChannel, Received, ReleaseInputs, concat_extras
from fl.levels.document.channel import DocumentChannel
from fl.levels.document.setup import DocumentSetup
from fl.levels.label.channel import LabelChannel
from fl.levels.sentence.channel import SentenceChannel
from fl.levels.spec import LevelSpec
from fl.levels.word.channel import WordChannel

#: Level name -> channel class; ``fl.config.level_of`` decides which level a config selects.
CHANNELS: dict[str, type[EmbeddingChannel]] = {
    "sentence": SentenceChannel,
    "word": WordChannel,
    "document": DocumentChannel,
}


def channel_class(level: str) -> type[EmbeddingChannel]:
    """The class of the embedding channel of ``level`` (``ReleaseConfig.level``; its class methods need no
    built channel)."""
    return CHANNELS[level]


@dataclass(frozen=True)
class Channels:
    """The run's embedding channel and label channel."""

    embedding: EmbeddingChannel
    label: LabelChannel


def run_label(release: ReleaseConfig) -> str:
    """The level's mechanism and epsilon, for run names and plot titles (no channel needs building)."""
    return channel_class(release.level).run_label(release)


def make_channels(
    spec: LevelSpec, input_dim: int, setup: DocumentSetup | None = None, num_classes: int | None = None
) -> Channels:
    """Build the run's channels once (``setup``: the document level's public material; ``num_classes``: the
    number of labels, which randomized response's charges carry for its dp-accounting event)."""
    level = spec.level
    if level == "document":
        if setup is None:
            raise ValueError("the document level needs the server's public setup")
        embedding: EmbeddingChannel = DocumentChannel(spec.release, input_dim, setup)
    else:
        embedding = CHANNELS[level](spec.release, input_dim, num_classes=num_classes)
    return Channels(embedding, LabelChannel(spec, num_classes))


__all__ = [
    "CHANNELS",
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
    "make_channels",
    "run_label",
]
