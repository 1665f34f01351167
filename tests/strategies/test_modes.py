"""One contract over every registered mode: the server and node registries agree, every configurable mode is
registered, and a real small run of each mode writes what a mode must (its strategy owned by it alone, its
summary's guarantee, scope, outcome and users, its attack state) with the messages its wire scopes declare."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from clients.modes import NODE_MODES
from fl import wire
from fl.config import CHOICES, mode_name
from strategies.modes import MODES, declared_fields, mode_of
from tests.support.runs import SMALL_RUN

#: A small run per registered mode (tests.support.runs: two nodes, two rounds).
RUNS: dict[str, dict[str, Any]] = {
    "local": {"label-mechanism": "rr", "label-epsilon": 2.0},
    "central/user": {"mode": "central", "central-unit": "user", "central-cohort-size": 20.0},
    "central/node": {"mode": "central", "central-unit": "node", "fraction-train": 0.5},
}


def test_every_configurable_mode_is_registered_on_both_sides() -> None:
    configurable = {
        mode_name({"mode": mode, "central-unit": unit})
        for mode, unit in itertools.product(CHOICES["mode"], CHOICES["central-unit"])
    }
    assert configurable == {"local", "central/user", "central/node"}
    assert set(MODES) == configurable == set(NODE_MODES) == set(RUNS)


def test_each_mode_owns_its_wire_scopes_and_they_cover_every_scope() -> None:
    scopes = [s for mode in MODES.values() for s in mode.wire_scopes]
    assert sorted(scopes) == sorted(wire.SCOPES)  # each scope belongs to exactly one mode
    for mode in MODES.values():
        types = {f.message_type for f in declared_fields(mode)}
        assert types == {wire.QUERY, wire.TRAIN, wire.EVALUATE}, mode.name


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Any]:
    """Each mode's small run, finished: its results and its last checkpointed strategy."""
    import simulations
    from strategies import server_app

    out = tmp_path_factory.mktemp("modes")
    done = {}
    kept: dict[str, Any] = {}

    class Keeping(server_app.RoundCheckpoints):  # type: ignore[misc]
        """The ServerApp's checkpointer, keeping the strategy it checkpoints (the run's, accounting outermost)."""

        def __init__(self, strategy: Any, *args: Any, **kwargs: Any) -> None:
            kept["strategy"] = strategy
            super().__init__(strategy, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(server_app, "RoundCheckpoints", Keeping)
        for name, keys in RUNS.items():
            config = {**SMALL_RUN, "data-dir": str(data_dir), **keys}
            result = simulations.run(config, out=out, run_name=name.replace("/", "-"))
            done[name] = (result, kept.pop("strategy"))
    return done


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_run_of_each_mode_keeps_the_contract(name: str, finished: dict[str, Any]) -> None:
    result, strategy = finished[name]
    mode = MODES[name]
    assert [m.name for m in MODES.values() if m.owns(strategy)] == [name]  # its strategy is its own alone
    assert mode_of(strategy) is mode
    summary = result.summary
    assert summary["ldp_guarantee_holds"] is mode.releases_embeddings
    assert summary["guarantee_covers"] and summary["guarantee"]["notes"]
    assert summary["rounds"] == 2 and len(result.rounds) == 2
    assert set(summary["outcome"]) == {
        "majority_class_rate",
        "beats_majority_class",
        "training_moved",
        "learned_nothing",
        "test_inputs",  # what accuracy scored: sanitized releases (local) or clean inputs (central)
        "public_only_accuracy",  # the strongest of public_only_models (None: no public data)
        "public_only_models",
        "gain_over_public",
        "adds_over_public",
    }
    assert summary["outcome"]["test_inputs"] == ("sanitized" if mode.releases_embeddings else "clean")
    assert summary["users"]["train"] > 0 and summary["users"]["nodes_hold_own_files"] is False
    assert (result.folder / "attack" / "state.pt").is_file()  # SST-2 documents on the server: attackable
    privacy = summary["privacy"]
    assert (privacy.get("epsilon_ldp") if mode.releases_embeddings else privacy.get("epsilon")) > 0


def test_the_levels_are_defined_once_and_every_embedding_level_has_its_channel() -> None:
    from fl.config import EMBEDDING_LEVELS
    from fl.levels.channels import CHANNELS
    from mechanisms.base import LEVELS

    assert sorted(LEVELS) == ["document", "label", "sentence", "word"]
    assert sorted(CHANNELS) == sorted(EMBEDDING_LEVELS) == ["document", "sentence", "word"]
