"""End-to-end audit of the per-user figure (``sanitas audit``): the honest flow passes, and three
broken flows are caught (eps_LB above the printed figure): the mechanism at 3x its epsilon (sentence
and label channels), re-drawing every round while charging one release, and the leaky M1.

Fixed seeds, 20,000 trials per input: with the honest flow eps_LB > printed would happen with
probability <= 5% over the audit's randomness, and with the seed fixed the outcome is deterministic.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulations.audit_run import audit_run
from simulations.cli import main

CONFIG = {
    "dataset": "sst2",
    "train-size": 400,
    "test-size": 100,
    "users-per-node": 400,
    "num-server-rounds": 3,
    "map-in": "random",
    "map-dim": 2,
    "sentence-mechanism": "purkayastha",
    "sentence-epsilon": 0.5,
    "label-mechanism": "rr",
    "label-epsilon": 1.0,
}
PRINTED = 3.141592653589793 * 0.5 + 1.0  # one charged release: Purkayastha's pure pi * eps1 + RR's eps


@pytest.fixture(autouse=True)
def _data(monkeypatch: pytest.MonkeyPatch, data_dir: Path, cache_dir: Path) -> None:
    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    monkeypatch.setenv("SANITAS_CACHE_DIR", str(cache_dir))


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
