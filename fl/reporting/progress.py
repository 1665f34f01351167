"""Progress bars of the server's long phases (training rounds, M1 on the public split, encoder tuning).

One switch for all of them: ``sanitas run`` turns them off on a quiet console, where one display
over the rounds stands for the whole run (``simulations.console``); ``--verbose`` keeps them.
"""

from __future__ import annotations

from typing import Any

_quiet = False


def set_quiet(quiet: bool) -> bool:
    """Turn the bars off (``True``) or on; returns the previous setting."""
    global _quiet
    previous, _quiet = _quiet, bool(quiet)
    return previous


def quiet() -> bool:
    """Whether the bars are off."""
    return _quiet


def bar(**kwargs: Any) -> Any:
    """A ``tqdm`` bar (``tqdm.auto``), disabled while the console is quiet."""
    from tqdm.auto import tqdm

    kwargs["disable"] = bool(kwargs.get("disable", False)) or _quiet
    return tqdm(**kwargs)
