"""The one error a run config raises: :class:`ConfigError`, a one-line message naming the key."""

from __future__ import annotations


class ConfigError(ValueError):
    """A run configuration that cannot run; the message names the key."""
