"""``did you mean ...?`` for a name the user typed: the closest known name, if one is close.

It lives in the lowest package so that every layer (the mechanism registry, the config, the
command line) words its refusals the same way.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the known name closest to ``word`` (difflib's ratio >= 0.6), else ``""``."""
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
