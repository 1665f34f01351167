"""The run-config keys that may name user code, and where a relative file in them is found.

``strategy`` and the four ``*-mechanism`` keys take ``"path/to/file.py:Class"`` or
``"package.module:Class"`` (:mod:`mechanisms.user_code` imports them). A relative file is found next to the
config file first, then in the working directory; :func:`anchor_specs` writes the path it found as an
absolute one, so the same file is named in every process of the run (the Ray actors, the warm workers of a
sweep) whatever their working directory.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from mechanisms import user_code

#: The keys whose value may be a user's class.
PLUGIN_KEYS = ("strategy", "sentence-mechanism", "label-mechanism", "word-mechanism", "document-mechanism")


def anchor_specs(raw: MutableMapping[str, Any], config_file: str | Path | None = None) -> MutableMapping[str, Any]:
    """Make the relative ``file.py`` paths of :data:`PLUGIN_KEYS` in ``raw`` absolute (in place; returned):
    looked up beside ``config_file`` (when given), then in the working directory. A file found in neither
    place is left as written (the check that loads it names both places)."""
    bases = ([Path(config_file).expanduser().resolve().parent] if config_file else []) + [Path.cwd()]
    for key in PLUGIN_KEYS:
        value = raw.get(key)
        if isinstance(value, str) and user_code.is_file_spec(value):
            raw[key] = user_code.anchor(value, *bases)
    return raw
