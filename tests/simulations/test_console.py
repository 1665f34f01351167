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


SECRET = {"secret": True, "source": "each node's OS CSPRNG, never sent"}
SEEDED = {
    "secret": False,
    "noise_seed": 0,
    "note": "reproducible simulation: whoever knows noise-seed (the run config, which the server holds) can replay "
    "every node's noise; the printed epsilon is not a guarantee against them",
}
COVERS = (
    "Covers: the training releases (sanitized embedding and label) and the test users' sanitized evaluation inputs."
)
OUTSIDE = " Outside the guarantee (measurements): the evaluation confusion counts, from the test users' true labels"
SST2_PHRASE = (
    "per phrase (a GLUE SST-2 training row; one review sentence can hold up to 35 phrases, each released under its "
    "own budget)"
)


def _local(dataset: str, noise: dict, **extra: object) -> dict:
    return {
        "dataset": dataset,
        "ldp_guarantee_holds": True,
        "privacy": {"epsilon_total": 6.28, "delta_total": 0.0, "epsilon_ldp": 5.652},
        "noise": noise,
        **extra,
    }


def test_a_local_run_with_secret_noise_names_what_it_covers_and_what_it_does_not() -> None:
    summary = _local("agnews", SECRET)
    assert privacy_text(summary) == (
        f"epsilon 6.28 per training row, delta 0, local DP. {COVERS} Noise: secret from the server: each node's OS "
        f"CSPRNG, never sent.{OUTSIDE}."
    )
    clean = privacy_text(_local("agnews", SECRET, clean_evaluation=True))
    assert clean.endswith(
        "from the test users' true labels, and on-device inference on their clean inputs (clean-evaluation = true)."
    )


def test_a_seeded_run_says_it_is_reproducible_and_no_guarantee_against_whoever_knows_the_seed() -> None:
    assert privacy_text(_local("agnews", SEEDED)) == (
        f"epsilon 6.28 per training row, delta 0, local DP. {COVERS} Noise: NOT secret, noise-seed = 0: a "
        "reproducible simulation; whoever knows the seed (the run config, which the server holds) can replay the "
        f"noise, and this epsilon is no guarantee against them.{OUTSIDE}."
    )


def test_an_sst2_row_user_is_a_phrase_and_a_source_user_a_source_sentence() -> None:
    row = _local("sst2", SECRET, data={"user_unit": "row"})
    assert privacy_text(row) == (
        f"epsilon 6.28 {SST2_PHRASE}, delta 0, local DP. {COVERS} Noise: secret from the server: each node's OS "
        f"CSPRNG, never sent.{OUTSIDE}."
    )
    assert privacy_text(_local("sst2", SECRET)) == privacy_text(row)  # row: the default unit
    source = _local("sst2", SECRET, data={"user_unit": "source"})
    assert privacy_text(source) == (
        f"epsilon 6.28 per source sentence, delta 0, local DP. {COVERS} Noise: secret from the server: each node's "
        f"OS CSPRNG, never sent.{OUTSIDE}."
    )


def test_the_privacy_line_names_the_unit_and_what_is_covered() -> None:
    central = {"mode": "central", "privacy": {"epsilon": 1.9946, "delta": 1e-5, "unit": "user"}}
    assert privacy_text(central) == (
        "(1.99, 1e-05)-DP per training row, central DP (user level). Covers: the noised global models (and "
        "everything computed from them). Outside the guarantee (measurements): the evaluation confusion counts, "
        "from the test users' true labels and clean inputs."
    )
    node = {"mode": "central", "dataset": "sst2", "privacy": {"epsilon": 2.0, "delta": 1e-5, "unit": "node"}}
    assert privacy_text(node).startswith("(2, 1e-05)-DP per node, central DP (node level).")
    seeded_central = {**central, "dataset": "sst2", "noise": {**SEEDED, "note": "..."}}
    text = privacy_text(seeded_central)
    assert text.startswith("(1.99, 1e-05)-DP per phrase (a GLUE SST-2 training row; one review sentence can hold")
    assert "each protected under its own budget" in text and "NOT secret, noise-seed = 0" in text
    both = {"ldp_guarantee_holds": True, "privacy": {"epsilon_total": 8.0, "delta_total": 0.0, "epsilon_ldp": 6.0}}
    assert privacy_text(both).startswith("epsilon 8 per training row, delta 0, local DP")
    clear = {
        "ldp_guarantee_holds": True,
        "privacy": {
            "epsilon_total": None,
            "epsilon_ldp": 31.4159,
            "composition_embedding": {"epsilon_best_approx": 31.4159},
        },
    }
    assert privacy_text(clear).startswith(
        "epsilon 31.4 per training row for the embedding, local DP; labels in the clear: no finite epsilon"
    )
    assert privacy_text({"ldp_guarantee_holds": False, "privacy": {"epsilon_ldp": 3.0}}).startswith("NOT LDP")
    assert privacy_text({**both, "guarantee_statement": "as written"}) == "as written"  # summary.json's own


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
    for expected in ("accuracy", "0.7900", "macro-F1", "0.7800", "(2, 1e-05)-DP per", "3.2 s", "/tmp/r"):
        assert expected in text


def test_the_summary_holds_the_run_against_public_only_on_both_test_inputs() -> None:
    from simulations.runtime.console import public_only_rows

    block = {
        "test_inputs": "sanitized",
        "public_only_accuracy": 0.5654,
        "gain_over_public": 0.0149,
        "adds_over_public": False,
        "on_device": {
            "test_inputs": "clean",
            "accuracy": 0.7534,
            "public_only_accuracy": 0.7213,
            "gain_over_public": 0.0321,
            "adds_over_public": True,
        },
    }
    assert public_only_rows(block) == [
        (
            "vs public-only",
            "gain over public-only +0.0149 (public-only 0.5654, sanitized test inputs): ADDS NOTHING over the public "
            "data",
        ),
        ("on-device", "accuracy 0.7534, gain over public-only +0.0321 (public-only 0.7213, clean test inputs)"),
    ]
    assert public_only_rows({"public_only_accuracy": None}) == []
    # with the public-only models named: the line is the best of them, each shown with its accuracy
    named = {
        **block,
        "public_only_models": {"server_model": 0.5654},
        "on_device": {
            **block["on_device"],
            "public_only_models": {"logistic_regression": 0.7013, "server_model": 0.7213},
        },
    }
    assert public_only_rows(named) == [
        (
            "vs public-only",
            "gain over public-only +0.0149 (public-only 0.5654: server model 0.5654; sanitized test inputs): ADDS "
            "NOTHING over the public data",
        ),
        (
            "on-device",
            "accuracy 0.7534, gain over public-only +0.0321 (public-only 0.7213 = the best of logistic regression "
            "0.7013, server model 0.7213; clean test inputs)",
        ),
    ]


def test_a_local_run_that_scored_clean_inputs_leads_with_on_device_inference() -> None:
    """With on-device scores the table's first row is on-device inference (accuracy and its gain), then
    server-side inference with its own gain line, each flagged on its own: the quickstart's answer first."""
    from rich.console import Console

    summary = {
        "final": {"accuracy": 0.5665, "macro_f1": 0.5661, "clean_macro_f1": 0.7496},
        "outcome": {
            "test_inputs": "sanitized",
            "public_only_accuracy": 0.5711,
            "gain_over_public": -0.0046,
            "adds_over_public": False,
            "on_device": {
                "test_inputs": "clean",
                "accuracy": 0.75,
                "public_only_accuracy": 0.7225,
                "gain_over_public": 0.0275,
                "adds_over_public": True,
            },
        },
        "wall_seconds": 8.3,
        "results_folder": "/tmp/r",
    }
    console = Console(record=True, width=200)
    console.print(summary_table(summary))
    lines = [line for line in console.export_text().splitlines() if "│" in line]
    assert "on-device" in lines[0] and "accuracy 0.7500, macro-F1 0.7496" in lines[0]
    assert "vs public-only" in lines[1] and "+0.0275" in lines[1] and "ADDS NOTHING" not in lines[1]
    assert "server-side" in lines[2] and "accuracy 0.5665" in lines[2]
    assert "vs public-only" in lines[3] and "ADDS NOTHING over the public data" in lines[3]
