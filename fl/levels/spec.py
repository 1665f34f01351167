"""What the release levels read of a run: :class:`LevelSpec`, built once at an edge from the run config."""

from __future__ import annotations

from dataclasses import dataclass

from fl.config import RunConfig
from fl.config.specs import DocumentSpec


@dataclass(frozen=True)
class LevelSpec(DocumentSpec):
    """The sections a level's work reads (:class:`~fl.config.specs.DocumentSpec`) and its device.

    ``release``: the mechanisms, their budgets and ``noise-seed`` (every channel); ``data`` and ``users``:
    which documents (the public ones a label prior, the document level's recoder or the word level's
    quality check is fitted on, and the cache keys of per-document work); ``encoder``: the encoder that
    embeds rewrites and public sentences; ``device``: the configured device they are embedded on
    (``"auto"`` included, resolved by :func:`fl.encoding.encoder.best_device`). Frozen and hashable.
    """

    device: str

    @classmethod
    def from_config(cls, cfg: RunConfig) -> LevelSpec:
        """The level inputs of a resolved run config (for the edges: the apps, a mode's start, drivers)."""
        return cls(cfg.data, cfg.users, cfg.encoder, cfg.release, cfg.server.device)
