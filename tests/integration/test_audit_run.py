"""End-to-end audit of the per-user figure (``sanitas audit``): the honest flow passes, and three
broken flows are caught (eps_LB above the printed figure): the mechanism at 3x its epsilon (sentence
and label channels), re-drawing every round while charging one release, and the leaky M1.

Fixed seeds, 20,000 trials per input: with the honest flow eps_LB > printed would happen with
probability <= 5% over the audit's randomness, and with the seed fixed the outcome is deterministic.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulations.analyses.audit_levels import DOCUMENT, LABEL, WORD
from simulations.analyses.audit_run import audit_run
from simulations.cli import main

CONFIG = LABEL  # SST-2, 400 users, 3 rounds, random M1 (m' = 2), Purkayastha eps1 0.5, RR eps 1
PRINTED = 3.141592653589793 * 0.5 + 1.0  # one charged release: Purkayastha's pure pi * eps1 + RR's eps


pytestmark = pytest.mark.usefixtures("offline_env")


@pytest.mark.parametrize(
    ("level", "tamper", "passes"),
    [
        ("sentence", "", True),
        ("label", "", True),
        ("sentence", "epsilon-3x", False),
        ("label", "epsilon-3x", False),
        ("sentence", "redraw-uncharged", False),
    ],
)
def test_audit_passes_the_honest_flow_and_catches_broken_ones(level: str, tamper: str, passes: bool) -> None:
    result = audit_run(CONFIG, level=level, trials=20_000, tamper=tamper, seed=0)
    assert result.printed_epsilon == pytest.approx(PRINTED)  # tampered flows still print the honest figure
    assert result.passed is passes
    assert (result.epsilon_lb <= PRINTED) is passes
    if passes:
        assert result.epsilon_lb > 0.3  # the audit has power: it sees the flow leak something


def test_the_leaky_map_is_caught() -> None:
    """The paper's leaky M1: the reply also carries dLoss/dM1 from the raw embedding. Against its
    mechanism's nominal figure the audit finds a violation with 1,000 trials per input."""
    result = audit_run(CONFIG, trials=1_000, tamper="leaky-map", seed=0)
    assert result.printed_epsilon == pytest.approx(PRINTED)
    assert not result.passed and result.epsilon_lb > PRINTED


def test_fresh_noise_every_round_is_charged_every_round_and_passes() -> None:
    """Re-drawing each of 3 rounds is honest when the ledger charges 3 releases: printed 3x, no violation."""
    result = audit_run({**CONFIG, "fresh-noise-per-round": True}, trials=20_000, seed=0)
    assert result.printed_epsilon == pytest.approx(3 * PRINTED)
    assert result.passed and result.fresh_noise_per_round


def test_cli_exit_codes(tmp_path: Path) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text("".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in CONFIG.items()))
    out = tmp_path / "audit.json"
    assert main(["audit", str(cfg), "--trials", "20000", "--out", str(out)]) == 0 and out.is_file()
    assert main(["audit", str(cfg), "--trials", "20000", "--tamper", "epsilon-3x"]) == 1
    assert main(["audit", str(cfg), "--set", 'map-in="leaky"', "--set", "allow-unaccounted-leakage=true"]) == 2


# ------------------------------------------------------------------ word and document levels
WORD_CI = {**WORD, "word-epsilon": 0.25}  # printed 2.6: an unsanitized node is caught with 1,000 trials


@pytest.mark.parametrize(
    ("cfg", "level"),
    [
        (WORD_CI, "word"),
        (DOCUMENT, "document"),
        ({**DOCUMENT, "document-mechanism": "truncation"}, "document"),
    ],
    ids=["word-cmp", "document-deepcandidate", "document-truncation"],
)
def test_word_and_document_levels_pass_and_catch_an_unsanitized_node(cfg: dict, level: str) -> None:
    """The honest flow passes; a node that forgets its level's mechanism (releases the clean
    embedding) is caught with 1,000 trials per input. Printed figures: one word of cmp (eps * the
    pair's distance, a cached re-send in round 2 is free), a 2-sentence document (DeepCandidate
    eps * k / 2, truncation eps * k)."""
    honest = audit_run(cfg, level=level, trials=1_000, seed=0)
    broken = audit_run(cfg, level=level, trials=1_000, seed=0, tamper="unsanitized")
    assert honest.passed and honest.epsilon_lb <= honest.printed_epsilon
    assert not broken.passed and broken.epsilon_lb > broken.printed_epsilon
    assert broken.printed_epsilon == honest.printed_epsilon
    if level == "word":
        assert honest.pair_epsilon == pytest.approx(honest.printed_epsilon)  # one word, the farthest pair
    else:
        k_eps = 2 * cfg["document-epsilon"] * (0.5 if cfg["document-mechanism"] == "deepcandidate" else 1.0)
        assert honest.printed_epsilon == pytest.approx(k_eps) and honest.pair_epsilon == cfg["document-epsilon"]


@pytest.mark.slow
def test_word_level_3x_is_seen_but_not_caught() -> None:
    """Low power by nature (module docstring): cmp at 3x its epsilon raises eps_LB well above the
    honest flow's, but 50-d noise and nearest-word decoding keep it under the printed figure."""
    cfg = {**WORD, "num-server-rounds": 1}
    honest = audit_run(cfg, level="word", trials=2_000, seed=0)
    three = audit_run(cfg, level="word", trials=2_000, seed=0, tamper="epsilon-3x")
    assert honest.epsilon_lb < 0.5 < 2.0 < three.epsilon_lb <= three.printed_epsilon


def test_level_must_match_the_run() -> None:
    with pytest.raises(ValueError, match="does not match the run's level"):
        audit_run(WORD_CI, level="sentence", trials=100)
    with pytest.raises(ValueError, match="unsanitized power check"):
        audit_run(CONFIG, level="sentence", trials=100, tamper="unsanitized")


def test_the_audit_table_rows_are_valid_configs(tmp_path: Path) -> None:
    """simulations.analyses.audit_levels: every row's config resolves and matches its level; the table writes."""
    from fl.levels.channels import channel_class
    from simulations.analyses.audit_levels import ROWS, write
    from simulations.runtime.api import resolve_config

    for name, cfg, level, tamper, trials in ROWS:
        want = {"word": "WordChannel", "document": "DocumentChannel"}.get(level, "SentenceChannel")
        assert channel_class(resolve_config(cfg, {}).release.level).__name__ == want, name
        assert trials >= 2_000 and (tamper == "" or "power check" in name)
    row = dict.fromkeys(("row", "level", "tamper", "printed_epsilon", "pair_epsilon", "epsilon_lb"), "x")
    row |= {"trials": 1, "confidence": 0.95, "verdict": "passes", "seconds": 0.1, "pair": "p"}
    csv_path, md_path = write([row], tmp_path, "cmd")
    assert csv_path.is_file() and md_path.read_text().startswith("Command: `cmd`")


TUNED = {  # CONFIG with a public-tuned encoder (one top layer, one epoch on the 25% public split)
    **CONFIG,
    "public-fraction": 0.25,
    "encoder-tuning": "public",
    "tuning-part": "top",
    "tuning-layers": 1,
    "tuning-batch-size": 16,
}


@pytest.mark.parametrize(("tamper", "passes"), [("", True), ("epsilon-3x", False)])
def test_a_public_tuned_encoder_keeps_the_printed_figure(tamper: str, passes: bool) -> None:
    """The nodes embed with the published public-tuned encoder: the honest flow's eps_LB stays below the
    printed figure (unchanged by the tuning), and the 3x mechanism is still caught (power)."""
    result = audit_run(TUNED, level="sentence", trials=20_000, tamper=tamper, seed=0)
    assert result.printed_epsilon == pytest.approx(PRINTED)
    assert result.passed is passes and (result.epsilon_lb <= PRINTED) is passes
    if passes:
        assert result.epsilon_lb > 0.3


TASK_AWARE = {  # the public classifier's class through 2-ary RR (supervised M1 from the public split), RR labels
    **CONFIG,
    "public-fraction": 0.25,
    "map-in": "supervised",
    "map-dim": 2,
    "map-scale": 1.0,
    "sentence-mechanism": "class_rr",
    "sentence-epsilon": 2.0,
}
PRIVUNIT = {**CONFIG, "sentence-mechanism": "privunit", "sentence-epsilon": 2.0, "map-dim": 8}
# the class-means recipe: PrivUnit (unbiased) on the public projection, the server's debiased class means
CLASS_MEANS = {
    **PRIVUNIT,
    "public-fraction": 0.25,
    "map-in": "projection",
    "sentence-options": "unbiased = true",
    "server-model": "class-means",
}
# two disjoint cohorts (fl.maps.cohorts): each user still releases once, under one budget, along a public map
CLASS_MEANS_COHORTS = {
    **CLASS_MEANS,
    "cohorts": 2,
    "num-server-rounds": 2,
    "fraction-train": 1.0,
    "cohort-map-dim": 12,
    "class-means-covariance": "releases",
}


@pytest.mark.parametrize(
    ("cfg", "printed"),
    [(TASK_AWARE, 2.0 + 1.0), (PRIVUNIT, 2.0 + 1.0), (CLASS_MEANS, 2.0 + 1.0), (CLASS_MEANS_COHORTS, 2.0 + 1.0)],
)
@pytest.mark.parametrize(("tamper", "passes"), [("", True), ("epsilon-3x", False)])
def test_the_new_mechanisms_keep_the_printed_figure(cfg: dict, printed: float, tamper: str, passes: bool) -> None:
    """class_rr and PrivUnit (pure epsilon per release) under the end-to-end audit: the honest flow
    passes with a non-trivial lower bound, and the mechanism at 3x its epsilon is caught."""
    result = audit_run(cfg, level="sentence", trials=20_000, tamper=tamper, seed=0)
    assert result.printed_epsilon == pytest.approx(printed)
    assert result.passed is passes
    if passes:
        assert result.epsilon_lb > 1.0  # the sentence pair differs in the whole embedding: most of 2 is seen
