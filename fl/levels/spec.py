"""What the release levels read of a run: :class:`LevelSpec`, built once at an edge from the run config."""

from __future__ import annotations

from dataclasses import dataclass

from fl.config import DataConfig, EncoderConfig, ReleaseConfig, RunConfig, UsersConfig


@dataclass(frozen=True)
class LevelSpec:
    """The sections a level's work reads, and nothing else of the run config.

    ``release``: the mechanisms, their budgets and ``noise-seed`` (every channel); ``data`` and ``users``:
    which documents (the public ones a label prior, the document level's recoder or the word level's
    quality check is fitted on, and the cache keys of per-document work); ``encoder``: the encoder that
    embeds rewrites and public sentences; ``device``: the configured device they are embedded on
    (``"auto"`` included, resolved by :func:`fl.encoding.encoder.best_device`). Frozen and hashable.
    """

    release: ReleaseConfig
    data: DataConfig
    users: UsersConfig
    encoder: EncoderConfig
    device: str

    @property
    def level(self) -> str:
        """The level the run releases at (``ReleaseConfig.level``)."""
        return self.release.level

    @classmethod
    def from_config(cls, cfg: RunConfig) -> LevelSpec:
        """The level inputs of a resolved run config (for the edges: the apps, a mode's start, drivers)."""
        return cls(cfg.release, cfg.data, cfg.users, cfg.encoder, cfg.server.device)
