"""The run's console: everything logged to run.log, the console quiet unless verbose, settings restored,
and a final summary line per privacy unit that says exactly what the run's epsilon covers."""

from __future__ import annotations

import logging
from pathlib import Path

from fl.reporting import progress
from simulations.runtime.console import privacy_text, run_console, summary_table


def test_the_run_log_gets_everything_and_the_console_only_warnings(tmp_path: Path) -> None:
    flwr = logging.getLogger("flwr")
    console = logging.StreamHandler()
    console.setLevel(logging.INFO)
    flwr.addHandler(console)
    try:
        with run_console(tmp_path, 3, verbose=False):
            assert console.level == logging.WARNING and progress.quiet()
            flwr.info("a Flower banner")
            logging.getLogger("absl").warning("failed to converge")
            logging.getLogger("strategies.server_app").info("done")
        assert console.level == logging.INFO and not progress.quiet()  # restored
        text = (tmp_path / "run.log").read_text()
        assert "a Flower banner" in text and "failed to converge" in text and "done" in text
        with run_console(tmp_path, 3, verbose=True):
            assert console.level == logging.INFO and not progress.quiet()
    finally:
        flwr.removeHandler(console)
    assert not any(isinstance(h, logging.FileHandler) for h in flwr.handlers)


def test_the_privacy_line_names_the_unit_and_what_is_covered() -> None:
    central = {"mode": "central", "privacy": {"epsilon": 1.9946, "delta": 1e-5, "unit": "user"}}
    assert privacy_text(central) == "(1.99, 1e-05)-DP per user (central)"
    both = {"ldp_guarantee_holds": True, "privacy": {"epsilon_total": 8.0, "delta_total": 0.0, "epsilon_ldp": 6.0}}
    assert privacy_text(both).startswith("epsilon 8 per user, delta 0")
    clear = {
        "ldp_guarantee_holds": True,
        "privacy": {
            "epsilon_total": None,
            "epsilon_ldp": 31.4159,
            "composition_embedding": {"epsilon_best_approx": 31.4159},
        },
    }
    assert "31.4 per user for the embedding" in privacy_text(clear) and "labels in the clear" in privacy_text(clear)
    assert privacy_text({"ldp_guarantee_holds": False, "privacy": {"epsilon_ldp": 3.0}}).startswith("NOT LDP")


def test_the_summary_table_has_the_five_rows() -> None:
    from rich.console import Console

    summary = {
        "final": {"accuracy": 0.79, "macro_f1": 0.78},
        "mode": "central",
        "privacy": {"epsilon": 2.0, "delta": 1e-5, "unit": "user"},
        "wall_seconds": 3.25,
        "results_folder": "/tmp/r",
    }
    console = Console(record=True, width=120)
    console.print(summary_table(summary))
    text = console.export_text()
    for expected in ("accuracy", "0.7900", "macro-F1", "0.7800", "(2, 1e-05)-DP per user", "3.2 s", "/tmp/r"):
        assert expected in text
