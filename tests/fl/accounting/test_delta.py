"""The central delta tied to the population: 1 / (10 N) at most 1e-5 by default, a given delta >= 1/N flagged."""

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


def test_a_delta_of_one_over_n_or_more_is_flagged() -> None:
    assert delta_warning(1e-5, 99_999, "user") is None
    assert "delta * N = 1" in str(delta_warning(1e-5, 100_000, "user"))
    flagged = delta_fields(1e-5, 50_400, "user")
    assert flagged["delta_times_population"] == pytest.approx(0.504)
    assert "delta_warning" not in flagged
    big = delta_fields(1e-3, 50_400, "user")
    assert "50400 users" in big["delta_warning"] and big["delta_rule"] == "given (central-delta)"
    default = delta_fields(0.0, 50_400, "user")
    assert default["delta_times_population"] == pytest.approx(0.1)
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
