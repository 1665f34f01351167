"""The comparison's plan is built once: every run's config resolved once, each seed's documents loaded once, and
nothing written before the plan is checked (simulations.drivers.compare_plan, simulations.drivers.runner)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from simulations.drivers import compare_calibration as calibration
from simulations.drivers import compare_recipes as recipes_mod

QUICKSTART = Path(__file__).resolve().parents[2] / "simulations" / "experiments" / "quickstart.toml"


def test_a_compare_resolves_each_run_once_and_loads_each_seeds_data_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    """Counts, over a whole ``sanitas compare --collect`` (plan, recipes, calibration, tables): each planned run's
    config is resolved exactly once (the probes of the two sides and the seeds aside), and the documents of each
    (data, seed, level) are loaded at most once. Power: the counters see the probes and every seed's load."""
    import fl.config as config_pkg
    from fl.data import datasets as data
    from simulations.cli import main

    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    data._load_cached.cache_clear()
    resolved: Counter[str] = Counter()
    loads: Counter[tuple[Any, ...]] = Counter()
    real_resolve, real_load = config_pkg.resolve, data._load

    def counting_resolve(overrides: Any = None) -> Any:
        resolved[str((overrides or {}).get("run-name", ""))] += 1
        return real_resolve(overrides)

    def counting_load(documents: Any, seed: int, level: str) -> Any:
        loads[(documents, seed, level)] += 1
        return real_load(documents, seed, level)

    def fake_choose(inputs: Any, totals: list[float], grid: object) -> dict:
        assert inputs.num_classes == 2 and inputs.train_users > 0  # through the one door, loaded once
        return {t: recipes_mod.Recipe(0.35, 32) for t in totals}

    monkeypatch.setattr(config_pkg, "resolve", counting_resolve)
    monkeypatch.setattr(data, "_load", counting_load)
    monkeypatch.setattr(recipes_mod, "choose", fake_choose)
    monkeypatch.setattr(
        calibration, "central_noise_table", lambda targets, q, rounds, delta: {t: 1.0 + t for t in targets}
    )
    args = ["compare", str(QUICKSTART), "--epsilons", "3,6", "--central-epsilons", "1,4", "--seeds", "1,2"]
    args += ["--out", str(tmp_path), "--name", "c", "--collect"]
    assert main(args) == 2  # --collect with no run finished: the plan was built, nothing ran
    err = capsys.readouterr().err
    names = [line.split("not run yet: ")[1] for line in err.splitlines() if "not run yet: " in line]
    assert len(names) == 2 * (2 + 2 + 1), err  # per seed: 2 central, 2 local points, 1 noise-free reference
    assert all(resolved[name] == 1 for name in names), {n: resolved[n] for n in names}
    assert resolved["probe"] >= 3  # the file alone, the two sides, the seeds: probes, never a planned run
    assert set(resolved) == {*names, "probe"}
    assert loads and max(loads.values()) == 1, loads
    assert {seed for _, seed, _ in loads} == {1, 2}  # each seed's own draw, loaded once however often it is read
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["recipes.json"]  # kept for the next call


@pytest.mark.parametrize(
    ("sets", "words"),
    [
        (['strategy="FedMedian"', 'server-model="mlp"'], "--set strategy, central side: strategy 'FedMedian'"),
        (['strategy="FedAdam"'], "--set strategy, local side: strategy 'FedAdam' trains on the nodes"),
    ],
)
def test_compare_refuses_a_strategy_one_side_cannot_run_before_any_data(
    sets: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """FedMedian is not a mean (central DP cannot run it); FedAdam trains on the nodes, which the quickstart's
    class-means model cannot. Refused in one line naming the side, before any seed's data is read, nothing
    written. Power: the same command with a mean-family strategy and the MLP gets past this check."""
    from simulations.cli import main
    from simulations.drivers import compare_plan

    def no_data(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the refusal came after reading data")

    monkeypatch.setattr(compare_plan, "RunInputs", no_data)
    args = ["compare", str(QUICKSTART), "--seeds", "1", "--out", str(tmp_path), "--name", "c"]
    for item in sets:
        args += ["--set", item]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and len(err[0]) <= 200, err
    assert not (tmp_path / "c").exists()
    ok = ["compare", str(QUICKSTART), "--seeds", "1", "--out", str(tmp_path), "--name", "c"]
    ok += ["--set", 'strategy="FedAdam"', "--set", 'server-model="mlp"']
    with pytest.raises(AssertionError, match="after reading data"):
        main(ok)
