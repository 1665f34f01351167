"""The run's results folder: files, and what the per-round plot shows."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pytest

from fl.reporting.results import RunWriter, epsilon_label, round_epsilon

matplotlib.use("Agg")


def _local(round_: int, eps: float) -> dict:
    return {
        "round": round_,
        "accuracy": 0.6 + 0.05 * round_,
        "macro_f1": 0.55 + 0.05 * round_,
        "clean_accuracy": 0.8,
        "random_guess_f1": 0.5,
        "ldp_guarantee_holds": True,
        "privacy": {"epsilon_ldp": eps - 2.0, "epsilon_total": eps},
    }


def _central(round_: int, eps: float) -> dict:
    return {"round": round_, "accuracy": 0.7, "mode": "central", "privacy": {"epsilon": eps, "delta": 1e-5}}


def test_round_epsilon_reads_each_mode() -> None:
    assert round_epsilon(_local(1, 33.4)) == 33.4
    labels_clear = {"round": 1, "ldp_guarantee_holds": True, "privacy": {"epsilon_ldp": 31.4, "epsilon_total": None}}
    assert round_epsilon(labels_clear) == 31.4
    assert round_epsilon(_central(3, 1.07)) == 1.07
    # A run without a guarantee (leaky map) never gets an epsilon on its plot.
    assert round_epsilon({**_local(1, 33.4), "ldp_guarantee_holds": False}) is None
    assert "delta=1e-05" in epsilon_label(_central(1, 1.0))
    assert "pure-LDP" in epsilon_label(_local(1, 1.0))


def test_plot_draws_reference_guess_and_epsilon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.figure

    saved: list[matplotlib.figure.Figure] = []
    real_savefig = matplotlib.figure.Figure.savefig

    def spy(self: matplotlib.figure.Figure, *args: object, **kwargs: object) -> None:
        saved.append(self)
        real_savefig(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    writer = RunWriter(tmp_path / "run")
    for r in (1, 2, 3):
        writer.append_round(_local(r, 31.4 * r))
    path = writer.plot("t", reference=0.81)
    assert path.is_file() and path.stat().st_size > 0
    (fig,) = saved
    ax, ax2 = fig.axes
    labels = ax.get_legend().get_texts()
    text = [t.get_text() for t in labels]
    assert any("random guess (0.500)" in t for t in text)
    assert any("non-private reference (0.810)" in t for t in text)
    assert any("per-user pure-LDP epsilon" in t for t in text)
    assert list(ax2.lines[0].get_ydata()) == pytest.approx([31.4, 62.8, 94.2])
    ticks = [t for t in ax.get_xticks() if 1 <= t <= 3]
    assert all(float(t).is_integer() for t in ticks)
    rows = [json.loads(line) for line in (tmp_path / "run" / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == [1, 2, 3]


def test_status_is_written_first_and_complete_only_at_finish(tmp_path) -> None:
    """A folder says "running" from its first file on, counts its rounds, and says "complete" only after
    finish(), which also removes the resume state (checkpoints and the nodes' secrets)."""
    import json

    from fl.reporting.results import RunWriter, read_status

    writer = RunWriter(tmp_path / "run", num_rounds=3)
    assert read_status(writer.folder) == {**read_status(writer.folder), "status": "running", "completed_rounds": 0}
    writer.append_round({"round": 1, "accuracy": 0.5})
    writer.append_round({"round": 2, "accuracy": 0.6})
    assert read_status(writer.folder)["completed_rounds"] == 2
    (writer.folder / "nodes" / "node-0").mkdir(parents=True)
    (writer.folder / "checkpoints").mkdir()
    # A kill while round 3 was being appended leaves a cut line; reopening after round 1 drops it and round 2.
    with (writer.folder / "rounds.jsonl").open("a") as fh:
        fh.write('{"round": 3, "accura')
    again = RunWriter.reopen(writer.folder, completed_rounds=1)
    assert [r["round"] for r in again.rounds] == [1]
    assert [json.loads(x)["round"] for x in (writer.folder / "rounds.jsonl").read_text().splitlines()] == [1]
    assert read_status(writer.folder)["resumed_from"] == 1
    again.finish()
    assert read_status(writer.folder)["status"] == "complete"
    assert not (writer.folder / "nodes").exists() and not (writer.folder / "checkpoints").exists()
    with pytest.raises(ValueError, match="complete run"):
        RunWriter.reopen(writer.folder, 1)


def test_a_results_folder_has_one_writer(tmp_path) -> None:
    from fl.reporting.results import RunWriter

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "status.json").touch()  # another run claimed the (otherwise empty) folder first
    with pytest.raises(FileExistsError):
        RunWriter(tmp_path / "run")
