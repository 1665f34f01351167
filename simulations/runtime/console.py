"""What a run shows on the console, and its full log.

Every run writes its whole log (Sanitas, Flower, Ray, the accountant, Python warnings) to
``<results folder>/run.log``. On the console, by default (quiet), a run shows one progress
display (rich: the round it is in, from the run's ``status.json``, whatever the backend), its
warnings, and at the end one summary table (:func:`summary_table`); Flower's banners and metric
dumps, per-worker progress bars and library warnings go to the log only. ``verbose`` shows
everything on the console as well.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from fl.accounting.scope import guarantee_statement
from fl.reporting.progress import set_quiet
from fl.reporting.results import RUN_LOG

#: Loggers whose records go to the run's log.
LOGGERS = ("fl", "clients", "strategies", "simulations", "sanitas", "flwr", "absl", "py.warnings", "ray")
#: What quiet mode sets in the environment of the processes a run starts (this process's libraries
#: read theirs at import: they are switched directly).
QUIET_ENVIRONMENT = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error"}
#: Loggers whose console output quiet mode raises to warnings.
QUIETED = ("fl", "clients", "strategies", "simulations", "sanitas", "flwr")


@contextmanager
def run_console(folder: Path, num_rounds: int, verbose: bool) -> Iterator[None]:
    """Log everything to ``folder/run.log`` and, unless ``verbose``, quiet the console and show one
    progress display over the rounds while the body runs. Restores every setting afterwards."""
    with _console([folder], num_rounds, verbose):
        yield


@contextmanager
def points_console(folders: Sequence[Path], num_rounds: int, verbose: bool) -> Iterator[None]:
    """:func:`run_console` for the points of a shared federation (``strategies.points``): each point's
    server logs to its own ``run.log`` (the federation's own records, the nodes', go to the first);
    one progress display, over the first point's rounds."""
    with _console(folders, num_rounds, verbose, by_point=True):
        yield


class _PointFilter(logging.Filter):
    """Records of one point's server (``strategies.points.CURRENT_POINT``); ``point`` 0 also takes those
    of no point."""

    def __init__(self, point: int) -> None:
        super().__init__()
        self.point = point

    def filter(self, record: logging.LogRecord) -> bool:
        from strategies.points import CURRENT_POINT

        current = CURRENT_POINT.get()
        return current == self.point or (current is None and self.point == 0)


@contextmanager
def _console(folders: Sequence[Path], num_rounds: int, verbose: bool, by_point: bool = False) -> Iterator[None]:
    handlers = []
    for i, folder in enumerate(folders):
        folder.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(folder / RUN_LOG, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.INFO)
        if by_point:
            handler.addFilter(_PointFilter(i))
        handlers.append(handler)
    with ExitStack() as undo:  # each change registers its own undo; they run in reverse order
        for handler in handlers:
            undo.callback(handler.close)
        for name in LOGGERS:
            logger = logging.getLogger(name)
            undo.callback(logger.setLevel, logger.level)
            if logger.getEffectiveLevel() > logging.INFO:
                logger.setLevel(logging.INFO)
            for handler in handlers:
                undo.callback(logger.removeHandler, handler)
                logger.addHandler(handler)
        logging.captureWarnings(True)
        undo.callback(logging.captureWarnings, False)
        undo.enter_context(warnings.catch_warnings())
        if not verbose:
            _quiet(undo, handlers)
            stop = threading.Event()
            watcher = threading.Thread(target=_show_rounds, args=(folders[0], num_rounds, stop), daemon=True)
            watcher.start()
            undo.callback(watcher.join, 5)
            undo.callback(stop.set)
        yield


def _quiet(undo: ExitStack, handlers: Sequence[logging.Handler]) -> None:
    """Keep the console to warnings and one progress display (every change undone by ``undo``)."""
    for name in LOGGERS:  # nothing reaches the root logger's handlers (a library's basicConfig)
        logger = logging.getLogger(name)
        undo.callback(setattr, logger, "propagate", logger.propagate)
        logger.propagate = False
    for name in QUIETED:
        for h in logging.getLogger(name).handlers:
            if h not in handlers:
                undo.callback(h.setLevel, h.level)
                h.setLevel(logging.WARNING)
    for key, value in QUIET_ENVIRONMENT.items():  # read by processes started from here (Ray's actors)
        undo.callback(_restore_env, key, os.environ.get(key))
        os.environ[key] = value
    undo.callback(set_quiet, set_quiet(True))
    undo.callback(_hub_bars_off())
    warnings.simplefilter("ignore")  # library deprecation chatter (inside run_console's catch_warnings)


def _restore_env(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


def _hub_bars_off() -> Callable[[], None]:
    """Turn off the Hugging Face progress bars (hub downloads, transformers' "Loading weights"; the
    environment variables are read at import, too late here); returns what restores them."""
    import sys

    try:
        import huggingface_hub.utils as hub
    except ImportError:
        return lambda: None
    hub_was = hub.are_progress_bars_disabled()
    hub.disable_progress_bars()  # transformers, imported later in the run, starts with its bars off
    tf = sys.modules.get("transformers.utils.logging")
    tf_was = tf.is_progress_bar_enabled() if tf is not None else None
    if tf is not None:
        tf.disable_progress_bar()

    def restore() -> None:
        if not hub_was:
            hub.enable_progress_bars()
        if tf is not None and tf_was:
            tf.enable_progress_bar()

    return restore


def _show_rounds(folder: Path, num_rounds: int, stop: threading.Event) -> None:
    """One rich progress bar over the rounds, read from ``status.json`` (both backends write it), its
    text naming the long phase running now in this process when there is one
    (:func:`fl.reporting.progress.current`: public tuning, the map's scale search, encoding, ...)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fl.reporting.progress import current

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task("setting up (data, nodes, public map)", total=max(num_rounds, 1))
        done = None
        while not stop.wait(0.5):
            try:
                done = int(json.loads((folder / "status.json").read_text()).get("completed_rounds", 0))
            except (OSError, ValueError):
                pass
            where = "setting up" if done is None else f"round {min(done + 1, num_rounds)}/{num_rounds}"
            phase = current()
            progress.update(task, completed=done or 0, description=f"{where}: {phase}" if phase else where)


def privacy_text(summary: Mapping[str, Any]) -> str:
    """The run's guarantee in words (:func:`fl.accounting.scope.guarantee_statement`): epsilon, its unit
    and delta, the messages it covers, whether the noise is secret from the server, and the evaluation
    counts outside it. A summary that already states it (``guarantee_statement``) is shown as written."""
    stated = summary.get("guarantee_statement")
    if isinstance(stated, str) and stated:
        return stated
    return guarantee_statement(summary)


def outcome_verdict(block: Mapping[str, Any]) -> str:
    """Whether the run learned, against the majority-class rate (``summary.json``'s ``outcome``)."""
    majority = block.get("majority_class_rate")
    if majority is None:
        return ""
    if block.get("learned_nothing"):
        still = "; its scores never moved" if block.get("training_moved") is False else ""
        return f"NO: not above the majority-class rate {majority:.4f}{still}"
    return f"yes (majority-class rate {majority:.4f})"


def public_only_rows(block: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The summary rows that hold the run against the models fitted on its public data alone (``summary.json``'s
    ``outcome``): its gain over the strongest of them on the run's own test inputs and, where the nodes also
    scored clean inputs, on-device; each public-only model scored is named with its accuracy. A gain within
    one binomial standard error is named as adding nothing."""
    rows = []
    for label, scored in (("vs public-only", block), ("on-device", block.get("on_device") or {})):
        public = scored.get("public_only_accuracy")
        if public is None:
            continue
        inputs = scored.get("test_inputs", "sanitized")
        accuracy = f"accuracy {scored['accuracy']:.4f}, " if label == "on-device" else ""
        verdict = "" if scored.get("adds_over_public") is not False else ": ADDS NOTHING over the public data"
        models = scored.get("public_only_models") or {}
        named = ", ".join(f"{name.replace('_', ' ')} {value:.4f}" for name, value in models.items())
        which = f" = the best of {named};" if len(models) > 1 else f": {named};" if models else ","
        rows.append(
            (
                label,
                f"{accuracy}gain over public-only {scored['gain_over_public']:+.4f} (public-only {public:.4f}{which} "
                f"{inputs} test inputs){verdict}",
            )
        )
    return rows


def summary_table(summary: Mapping[str, Any]) -> Any:
    """The final summary as a rich table: the accuracy, the verdicts, the guarantee (:func:`privacy_text`, wrapped
    over several lines), wall time, folder.

    A local run whose nodes also scored clean test inputs leads with on-device inference (the model shipped to
    each device applied to its clean input, the test mode the central side is scored in and the README answers
    with), then server-side inference (the server's model on the sanitized test inputs); each mode has its own
    line against the public-only models."""
    from rich.table import Table

    final = summary.get("final") or {}
    block = summary.get("outcome") or {}
    table = Table(title="sanitas run", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()

    def number(value: Any) -> str:
        return "-" if value is None else f"{value:.4f}"

    rows = dict(public_only_rows(block))
    on_device = block.get("on_device") or {}
    if on_device.get("accuracy") is not None:
        table.add_row(
            "on-device",
            f"accuracy {number(on_device['accuracy'])}, macro-F1 {number(final.get('clean_macro_f1'))}: the model "
            "shipped to each device, applied to its clean input",
        )
        if "on-device" in rows:
            table.add_row("  vs public-only", rows["on-device"].split(", ", 1)[1])
        table.add_row(
            "server-side",
            f"accuracy {number(final.get('accuracy'))}, macro-F1 {number(final.get('macro_f1'))}: the server's "
            "model on the sanitized test inputs",
        )
        if "vs public-only" in rows:
            table.add_row("  vs public-only", rows["vs public-only"])
    else:
        table.add_row("accuracy", number(final.get("accuracy")))
        table.add_row("macro-F1", number(final.get("macro_f1")))
        if "vs public-only" in rows:
            table.add_row("vs public-only", rows["vs public-only"])
    verdict = outcome_verdict(block)
    if verdict:
        table.add_row("learned", verdict)
    table.add_row("privacy", privacy_text(summary))
    table.add_row("wall time", f"{summary.get('wall_seconds', float('nan')):.1f} s")
    table.add_row("results", str(summary.get("results_folder", "")))
    return table


def print_summary(summary: Mapping[str, Any]) -> None:
    """Print :func:`summary_table` to stdout."""
    from rich.console import Console

    Console().print(summary_table(summary))
