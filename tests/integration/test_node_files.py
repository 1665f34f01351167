"""Nodes that hold their own training files (node config ``data-path``), run in this process on the
local backend's grid with the node configs a SuperNode would get.

A federation of nodes reading the documents of their partitions from their own files trains on the
same users and releases as one sharing the dataset, in local and central mode; a node whose file is
wrong stops the run with a message naming the node, its file and the problem.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from fl import config as config_mod
from tests.support.node_files import run_with_node_files as run
from tests.support.node_files import write_node_files
from tests.support.runs import MODES, SMALL_RUN
from tests.support.runs import timeless as rounds


def resolved(tmp_path: Path, data_dir: Path, cache_dir: Path, name: str, **extra: Any) -> dict[str, Any]:
    values = {**SMALL_RUN, **extra, "data-dir": str(data_dir), "cache-dir": str(cache_dir)}
    return config_mod.resolve({**values, "out-dir": str(tmp_path / name)})


@pytest.mark.parametrize("mode", sorted(MODES))
def test_nodes_train_on_their_own_files(mode: str, tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """Each node's file is one partition of the dataset: the run sees the same users, documents and
    releases as a run sharing the dataset. (The server files a document by its user's id, not by its
    row in the server's copy of the dataset, so the training order differs and the models are not
    bit-equal; ``test_deployment`` shows the same node files give bit-equal runs in deployment and
    simulation.)"""
    shared = run(resolved(tmp_path, data_dir, cache_dir, "shared", **MODES[mode]))
    cfg = resolved(tmp_path, data_dir, cache_dir, "own", **MODES[mode])
    files = write_node_files(cfg, tmp_path / "files", [".jsonl", ".csv"])
    own = run(cfg, [{"data-path": str(p)} for p in files])
    mine, theirs = rounds(own), rounds(shared)
    assert len(mine) == 2 and all(r["accuracy"] is not None for r in mine)
    same = ("test_users", "sampled_users", "fresh_train_releases", "train_releases_total", "privacy", "faults")
    for a, b in zip(mine, theirs, strict=True):
        assert {k: a.get(k) for k in same} == {k: b.get(k) for k in same}
    if mode == "local":  # the test side is the run's shared test split on both: identical evaluations
        assert mine[0]["fresh_train_releases"] == mine[0]["train_releases_total"] == 30  # 30 distinct documents
    summary = json.loads((own / "summary.json").read_text())
    assert summary["users"]["nodes_hold_own_files"] is True and summary["users"]["train"] == 60
    assert json.loads((shared / "summary.json").read_text())["users"]["nodes_hold_own_files"] is False
    assert not (own / "attack").exists()  # the server holds none of the nodes' documents to attack


def _bad_label(path: Path) -> None:
    lines = path.read_text().splitlines()
    lines[3] = json.dumps({"text": "fine words", "label": "maybe"})
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("case", "problem"),
    [
        ("unknown label", "data-path '.*node1.jsonl': label 'maybe' at row 3 is not a class of the run"),
        ("missing file", "data-path '.*absent.jsonl' not found"),
        ("missing column", "data-path '.*node1.jsonl': columns \\['label'\\] not found"),
        ("shared and own", "hold their own data files \\(data-path\\) and nodes .* a partition of the run's dataset"),
    ],
)
def test_a_node_with_a_bad_file_stops_the_run_naming_the_node_and_the_problem(
    case: str, problem: str, tmp_path: Path, data_dir: Path, cache_dir: Path
) -> None:
    cfg = resolved(tmp_path, data_dir, cache_dir, "out")
    files = write_node_files(cfg, tmp_path / "files", [".jsonl", ".jsonl"])
    configs: list[dict[str, Any]] = [{"data-path": str(p)} for p in files]
    if case == "unknown label":
        _bad_label(files[1])
    elif case == "missing file":
        configs[1] = {"data-path": str(tmp_path / "absent.jsonl")}
    elif case == "missing column":
        files[1].write_text("".join(json.dumps({"text": "a"}) + "\n" for _ in range(3)))
    else:
        configs[1] = {}
    with pytest.raises(RuntimeError, match=problem) as failure:
        run(cfg, configs)
    if case != "shared and own":
        assert "partition-id=1" in str(failure.value) and "failed during query: node " in str(failure.value)
    status = json.loads((Path(cfg["out-dir"]) / "r" / "status.json").read_text())
    assert status["status"] == "failed" and re.search(problem, status["error"])
    if case == "unknown label":
        head = "RuntimeError: 1 node\\(s\\) failed during query: node \\d+: ValueError: node partition-id=1: "
        assert re.fullmatch(f"{head}{problem} \\(negative, positive\\)", status["error"])
