"""Progress of the long phases (training rounds, M1 on the public split, the map's scale search, encoder
tuning, encoding a cohort, attacks, audits): in the run's log always, on the console as one display.

Every phase that can take more than a few seconds goes through :func:`bar`. It logs its start, its
progress (once it has run :data:`QUIET_FOR` seconds: every tenth of the way, and at least every
:data:`LOG_EVERY` seconds) with an estimate of the time left, and its end, to the ``fl.progress``
logger (so to ``run.log``). On the console:

* quiet (``sanitas run``'s default; ``simulations.runtime.console``): no bar of its own; the phase is published
  as :func:`current` and the run's one display shows it (what it is doing, how far, how long left);
* otherwise (``--verbose``, or a command outside a run): a ``tqdm`` bar, when stderr is a terminal; into a
  stream that is not one (a pipe, a CI log, a test's captured stream) a bar would write its redraws and cursor
  codes as lines, so there the log lines are the only record.

Written by hand because tqdm has no log sink and no way to hand its state to another display.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

log = logging.getLogger("fl.progress")

#: Seconds between two progress lines in the log, at most (besides one line per tenth of the way).
LOG_EVERY = 30.0
#: A phase logs its progress lines only once it has run this long (its start and end always).
QUIET_FOR = 5.0

_quiet = False
_live: list[Progress] = []  # the phases running now, innermost last
_lock = threading.Lock()


def set_quiet(quiet: bool) -> bool:
    """Turn the bars off (``True``) or on; returns the previous setting."""
    global _quiet
    previous, _quiet = _quiet, bool(quiet)
    return previous


def _terminal() -> bool:
    """Whether stderr (where tqdm draws) is a terminal."""
    import sys

    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def quiet() -> bool:
    """Whether the bars are off."""
    return _quiet


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """One phase's progress: ``update(n)`` as work is done, ``close()`` at the end (or use it as a context
    manager, or iterate over it when built from an iterable). Its log lines are its record; its tqdm bar
    (when shown) is only a view."""

    def __init__(
        self,
        iterable: Iterable[Any] | None = None,
        total: float | None = None,
        desc: str = "",
        unit: str = "it",
        disable: bool = False,
        **tqdm_kwargs: Any,
    ) -> None:
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.n = 0.0
        self.started = time.perf_counter()
        self._logged_at, self._next_tenth = self.started, 1
        self._closed = False
        self._bar = None
        if not (disable or _quiet) and _terminal():
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, **tqdm_kwargs)
        with _lock:
            _live.append(self)
        size = f" ({total:g} {unit})" if total is not None else ""
        log.info("%s: started%s", desc, size)

    # -------------------------------------------------------------- state
    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def remaining(self) -> float | None:
        """Seconds left at the rate so far (None before the first unit, or without a total)."""
        if not self.total or self.n <= 0:
            return None
        return self.elapsed * (self.total - self.n) / self.n

    def text(self) -> str:
        """One line: what, how far, how long left (``"scale search 2/5 candidates, about 40 s left"``)."""
        done = f" {self.n:g}/{self.total:g} {self.unit}" if self.total else f" {self.n:g} {self.unit}"
        left = self.remaining()
        return f"{self.desc}{done}" + (f", about {_duration(left)} left" if left is not None else "")

    # -------------------------------------------------------------- updates
    def update(self, n: float = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
        now = time.perf_counter()
        tenth = int(10 * self.n / self.total) if self.total else 0
        if now - self.started < QUIET_FOR:
            return
        if tenth >= self._next_tenth or now - self._logged_at >= LOG_EVERY:
            if self.total and self.n < self.total:
                log.info("%s (%.0f%%, %s so far)", self.text(), 100 * self.n / self.total, _duration(self.elapsed))
            elif not self.total:
                log.info("%s (%s so far)", self.text(), _duration(self.elapsed))
            self._logged_at, self._next_tenth = now, max(tenth + 1, self._next_tenth)

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        if self._bar is not None:
            self._bar.set_postfix(*args, **kwargs)

    def set_description(self, desc: str) -> None:
        self.desc = desc
        if self._bar is not None:
            self._bar.set_description(desc)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        with _lock:
            if self in _live:
                _live.remove(self)
        log.info("%s: done, %g %s in %s", self.desc, self.n, self.unit, _duration(self.elapsed))

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Any]:
        if self.iterable is None:
            raise TypeError("this progress was not built from an iterable")
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()


def bar(iterable: Iterable[Any] | None = None, **kwargs: Any) -> Progress:
    """A phase's :class:`Progress` (``tqdm``'s arguments: ``total``, ``desc``, ``unit``, ``disable``, ...):
    logged always, drawn as a tqdm bar unless the console is quiet or ``disable``."""
    return Progress(iterable, **kwargs)


def current() -> str | None:
    """The innermost phase running in this process, as one line (None when none runs)."""
    with _lock:
        live = _live[-1] if _live else None
    return live.text() if live is not None else None
