"""What a piece of work reads of a run: the sections that say which documents it loads and how it embeds them.

:class:`DocumentSpec` holds the four sections that the public start (:class:`fl.maps.public_start.PublicSpec`),
the encoder's public tuning (:class:`fl.encoding.public_tuning.TuningSpec`) and the release levels
(:class:`fl.levels.spec.LevelSpec`) all read: ``data`` and ``users`` (which documents, public and private, drawn
with ``users.seed``), ``encoder`` (what embeds them, and the cache) and ``release`` (the level, the mechanisms and
the maps). Each of those adds only what it reads beyond them. Frozen and hashable, like the sections: a spec is
a cache key.
"""

from __future__ import annotations

from dataclasses import dataclass

from fl.config.data_keys import DataConfig, UsersConfig
from fl.config.model_keys import EncoderConfig
from fl.config.release_keys import ReleaseConfig
from fl.config.values import has_public


@dataclass(frozen=True)
class DocumentSpec:
    """The data, users, encoder and release sections of a run, and nothing else of it."""

    data: DataConfig
    users: UsersConfig
    encoder: EncoderConfig
    release: ReleaseConfig

    @property
    def seed(self) -> int:
        """The run's ``seed`` (``users.seed``): the split, the public draw and the server model's start."""
        return int(self.users.seed)

    @property
    def level(self) -> str:
        """The level the run releases at (``ReleaseConfig.level``)."""
        return self.release.level

    @property
    def has_public(self) -> bool:
        """Whether the run has public documents (:func:`fl.config.has_public` of the data section)."""
        return has_public(self.data.flat())
