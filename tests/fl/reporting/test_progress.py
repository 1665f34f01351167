"""Long phases report themselves: start, progress with an estimate, end, in the log; the live phase for
the run's one console display."""

from __future__ import annotations

import logging
import sys

import pytest

from fl.reporting import progress


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def logged() -> object:
    """The progress logger's lines, whatever earlier tests did to the ``fl`` loggers' propagation."""
    logger = logging.getLogger("fl.progress")
    handler, level = _Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.lines
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture
def quiet_console() -> object:
    previous = progress.set_quiet(True)
    yield
    progress.set_quiet(previous)


def test_a_phase_logs_its_start_every_tenth_and_its_end(
    logged: list[str], quiet_console: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "QUIET_FOR", 0.0)  # a long phase (no clock is read: every update counts)
    with progress.bar(total=20, desc="choosing map-scale", unit="candidates") as bar:
        assert bar._bar is None  # quiet: no tqdm bar of its own
        for _ in range(20):
            bar.update(1)
    lines = logged
    assert lines[0] == "choosing map-scale: started (20 candidates)"
    assert lines[-1].startswith("choosing map-scale: done, 20 candidates in ")
    middle = lines[1:-1]
    assert len(middle) == 9  # 2/20, 4/20, ..., 18/20: one line per tenth, none at the end
    assert middle[0].startswith("choosing map-scale 2/20 candidates, about ") and "left (10%" in middle[0]


def test_a_short_phase_logs_only_its_start_and_end(logged: list[str], quiet_console: object) -> None:
    with progress.bar(total=20, desc="round 1: training", unit="epochs") as bar:
        for _ in range(20):
            bar.update(1)
    lines = logged
    assert len(lines) == 2 and lines[1].startswith("round 1: training: done, 20 epochs in ")


def test_the_live_phase_is_published_until_it_ends(quiet_console: object) -> None:
    assert progress.current() is None
    outer = progress.bar(total=4, desc="public encoder tuning", unit="steps")
    assert progress.current() == "public encoder tuning 0/4 steps"  # no estimate before the first step
    outer.update(1)
    assert progress.current().startswith("public encoder tuning 1/4 steps, about ")
    with progress.bar(total=2, desc="encoding 10 new texts", unit="shards"):
        assert progress.current().startswith("encoding 10 new texts 0/2 shards")  # the innermost phase
    assert progress.current().startswith("public encoder tuning 1/4")
    outer.close()
    outer.close()  # closing twice is harmless
    assert progress.current() is None


def test_iterating_counts_each_item_and_closes(logged: list[str], quiet_console: object) -> None:
    assert list(progress.bar(["a", "b", "c"], desc="attacking 3 run(s)", unit="runs")) == ["a", "b", "c"]
    assert logged[-1].startswith("attacking 3 run(s): done, 3 runs in ")
    assert progress.current() is None


def test_a_visible_bar_is_drawn_only_when_the_console_is_not_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = progress.set_quiet(False)
    try:
        monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
        with progress.bar(total=2, desc="x") as shown:
            assert shown._bar is not None
        with progress.bar(total=2, desc="y", disable=True) as hidden:
            assert hidden._bar is None
    finally:
        progress.set_quiet(previous)


def test_no_bar_is_drawn_into_a_stream_that_is_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pipe or a captured stream gets no tqdm redraws (cursor codes written as lines): the log is the record."""
    previous = progress.set_quiet(False)
    try:
        monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
        with progress.bar(total=2, desc="fitting the public model") as bar:
            bar.update(2)
            assert bar._bar is None
    finally:
        progress.set_quiet(previous)
    assert "fitting the public model" not in capsys.readouterr().err
