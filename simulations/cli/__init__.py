"""Sanitas: federated learning over private text under local differential privacy.

The ``sanitas`` command line, one module per subcommand (``add_parser`` and ``handle``).
``sanitas init-config FILE`` writes a starting config for a CSV / JSON Lines file of one's own;
``sanitas run CONFIG.toml`` runs one simulation; ``sweep``, ``compare`` and ``reproduce`` run many;
``tune`` chooses a local-DP recipe on public data only; ``audit`` and ``attack`` check what a run
prints; ``audit-mechanism`` audits a mechanism (a user's ``file.py:Class`` too) against its declared
epsilon; ``report-documents``, ``audit-levels``, ``composition-table``, ``shuffle-table``,
``word-survival`` and ``privemb-errors`` write the tables and plots the documentation cites;
``config-reference`` regenerates the configuration reference. A bad argument is refused while the
arguments are parsed, before any work, with one line naming the option
(:mod:`simulations.cli.options`); a bad config or data file with one line naming the key or file; both
exit 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from simulations.cli import (
    attack,
    audit,
    audit_levels,
    audit_mechanism,
    compare,
    composition_table,
    config_reference,
    init_config,
    privemb_errors,
    report_documents,
    reproduce,
    run,
    shuffle_table,
    sweep,
    tune,
    word_survival,
)
from simulations.cli.options import OneLineParser
from simulations.runtime.logs import setup_logging

#: The subcommands, in the order ``sanitas --help`` lists them.
SUBCOMMANDS: tuple[ModuleType, ...] = (
    init_config,
    run,
    sweep,
    compare,
    tune,
    reproduce,
    audit,
    audit_mechanism,
    attack,
    report_documents,
    audit_levels,
    composition_table,
    shuffle_table,
    word_survival,
    privemb_errors,
    config_reference,
)


def parser() -> argparse.ArgumentParser:
    """The ``sanitas`` parser with every subcommand."""
    p = OneLineParser(prog="sanitas", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the subcommand; the exit code (0 done, 1 a run or check failed, 2 bad
    input). Bad input never reaches a traceback: one line ``sanitas: error: ...`` on stderr."""
    from simulations.runtime.api import Interrupted, RunFailed

    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser().parse_args(words)
    except SystemExit as stop:  # a refused argument (its one line is printed) or --help
        return stop.code if isinstance(stop.code, int) else 2
    args.argv = words
    setup_logging()
    handler = {module.NAME: module.handle for module in SUBCOMMANDS}[args.command]
    previous = _terminate_as_interrupt()
    try:
        return handler(args)
    except Interrupted as err:
        print(f"sanitas: {err.advice()}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("sanitas: interrupted", file=sys.stderr)
        return 130
    except RunFailed as err:
        print(f"sanitas: error: {err}", file=sys.stderr)
        return 1
    except (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, PermissionError) as err:
        message = " ".join(line.strip() for line in str(err).splitlines() if line.strip())  # always one line
        print(f"sanitas: error: {message or type(err).__name__}", file=sys.stderr)
        return 2
    except OSError as err:  # a write that failed after the checks (a full disk, a folder that changed under the run)
        print(
            f"sanitas: error: {err.strerror or type(err).__name__}: {err.filename or ''}".rstrip(": "), file=sys.stderr
        )
        return 1
    finally:
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)


def _terminate_as_interrupt() -> Any:
    """SIGTERM ends a command as Ctrl-C does (the run's status ``interrupted``, exit 130), in the main
    thread only (where Python delivers signals); returns the previous handler."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def entry() -> None:
    """The ``sanitas`` command: :func:`main`, then leave without Python's interpreter teardown.

    Tearing down torch, its compiler stack, datasets and Flower takes about 1.5 s on 2 cores (a
    fifth of the quickstart) and does nothing a finished command needs: every result file is
    written, fsynced and closed by then, warm workers are stopped by their pool, and Ray (when
    used) was shut down by Flower. The streams and the log handlers are flushed first.
    :func:`main` itself returns normally (tests, warm workers and the Python API call it).
    """
    try:
        code = main()
    except SystemExit as exit_:  # argparse's errors (exit code 2) and --help
        code = exit_.code if isinstance(exit_.code, int) else 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
