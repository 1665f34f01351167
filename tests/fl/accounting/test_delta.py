"""The central delta tied to the population: 1 / (10 N) at most 1e-5 by default, a given delta with delta * N > 0.1
flagged."""

from __future__ import annotations

import pytest

from fl import config
from fl.accounting.delta import delta_fields, delta_warning, population_delta
from fl.accounting.user_level import user_privacy_record


@pytest.mark.parametrize(
    ("configured", "n", "expected"),
    [
        (0.0, 50_400, 1 / 504_000),  # the SST-2 population: well below 1/N
        (0.0, 1_000, 1e-5),  # 1 / (10 N) = 1e-4 is capped
        (0.0, 100_000, 1e-6),
        (3e-4, 50, 3e-4),  # given: kept
    ],
)
def test_the_default_delta_is_a_tenth_of_one_over_n_at_most_1e_5(configured: float, n: int, expected: float) -> None:
    assert population_delta(configured, n) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("delta", "n", "flagged"), [(5e-7, 100_000, False), (2e-6, 100_000, True), (2e-5, 100_000, True)]
)
def test_a_delta_above_a_tenth_of_one_over_n_is_flagged(delta: float, n: int, flagged: bool) -> None:
    """delta * N = 0.05 passes, 0.2 (below 1/N, but not well below) and 2 are flagged: the warning names
    the delta, N and delta * N, and says a delta should be well below 1/N."""
    warning = delta_warning(delta, n, "user")
    assert (warning is not None) == flagged
    if warning:
        ratio = f"{delta * n:.3g}"
        assert warning.startswith(f"central-delta = {delta:g} for N = 100000 users gives delta * N = {ratio} (> 0.1)")
        assert "a delta should be well below 1/N = 1e-05" in warning
    assert ("delta_warning" in delta_fields(delta, n, "user")) == flagged


def test_the_default_delta_passes_and_a_given_one_is_flagged_in_the_record() -> None:
    assert delta_warning(1e-5, 10_000, "user") is None  # delta * N = 0.1 exactly: the default's rule
    assert "delta * N = 1 " in str(delta_warning(1e-5, 100_000, "user"))
    flagged = delta_fields(1e-5, 50_400, "user")
    assert flagged["delta_times_population"] == pytest.approx(0.504)
    assert "delta_warning" in flagged  # 0.504 < 1 passed before: not well below 1/N
    big = delta_fields(1e-3, 50_400, "user")
    assert "50400 users" in big["delta_warning"] and big["delta_rule"] == "given (central-delta)"
    for n in (7, 50_400, 99_999, 123_457):  # 1 / (10 N) * N is 0.1 give or take an ulp: never flagged
        default = delta_fields(0.0, n, "node")
        assert "delta_warning" not in default
    assert delta_fields(0.0, 50_400, "user")["delta_times_population"] == pytest.approx(0.1)
    with pytest.raises(ValueError):
        population_delta(0.0, 0)


def test_the_user_level_record_accounts_at_the_resolved_delta() -> None:
    cfg = config.resolve({"mode": "central", "central-noise-multiplier": 1.0})
    record = user_privacy_record(cfg.central, 0.02, 50_400, 10)
    assert record["delta"] == pytest.approx(1 / 504_000)
    given = user_privacy_record(config.resolve({"central-delta": 1e-5}).central, 0.02, 50_400, 10)
    assert given["delta"] == 1e-5
    assert record["epsilon"] > given["epsilon"]  # a smaller delta costs epsilon
    flagged = user_privacy_record(config.resolve({"central-delta": 1e-3}).central, 0.02, 50_400, 10)
    assert "delta_warning" in flagged
