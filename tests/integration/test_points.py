"""Points of a sweep sharing one federation (``strategies.points``, ``clients.points``): each point writes
exactly what it writes run alone, in every mode, while the federation is discovered once and each node
gets one request per round for all the points, and the server models train side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fl import config as config_mod
from simulations.runtime.api import launch, launch_points
from tests.support.runs import MODES, SMALL_RUN, comparable

NODE_LEVEL = {
    "mode": "central",
    "central-unit": "node",
    "central-noise-multiplier": 1.0,
    "central-clip": 1.0,
    "central-delta": 1e-5,
    "local-epochs": 2,
    "batch-size": 4,
    "learning-rate": 0.01,
    "users-per-node": 6,
}
#: Per mode: the run and its points (what the sanitizer or the server does differs; the users do not).
CASES = {
    "local": (
        MODES["local"],
        [{"sentence-epsilon": 10.0, "noise-seed": 0}, {"sentence-epsilon": 1.0, "noise-seed": 1},
         {"sentence-epsilon": 40.0, "label-epsilon": 0.5, "noise-seed": 2}],
    ),
    "central-user": (
        MODES["central-user"],
        [{"central-noise-multiplier": 1.0, "noise-seed": 0}, {"central-noise-multiplier": 3.0, "noise-seed": 1},
         {"central-noise-multiplier": 0.6, "noise-seed": 2}],
    ),
    "central-node": (
        NODE_LEVEL,
        [{"central-noise-multiplier": 1.0, "noise-seed": 0}, {"central-noise-multiplier": 2.0, "noise-seed": 1}],
    ),
}  # fmt: skip
#: Summary fields of the wall clock and of where a run wrote.
NOT_COMPARED = ("results_folder", "wall_seconds", "timings")


def _summary(folder: Path) -> dict:
    summary = json.loads((folder / "summary.json").read_text())
    return {k: v for k, v in summary.items() if k not in NOT_COMPARED}


@pytest.mark.parametrize("mode", sorted(CASES))
def test_each_point_of_a_shared_federation_writes_what_it_writes_alone(
    mode: str, tmp_path: Path, offline_env: None
) -> None:
    extra, points = CASES[mode]
    base = {**SMALL_RUN, **extra}

    def configs(where: str) -> list[config_mod.RunConfig]:
        return [
            config_mod.resolve({**base, **p, "out-dir": str(tmp_path / where), "run-name": f"p{i}"})
            for i, p in enumerate(points)
        ]

    alone = [launch(cfg, verbose=False) for cfg in configs("alone")]
    shared = launch_points(configs("shared"), verbose=False)
    assert all(isinstance(f, Path) for f in shared), shared
    for a, s in zip(alone, shared, strict=True):
        assert isinstance(s, Path)
        assert comparable(s) == comparable(a)
        assert _summary(s) == _summary(a)
    # Power: the points computed different things (a point answered with another's data would show).
    finals = [(json.dumps(comparable(f)[-1]["privacy"]), json.dumps(comparable(f))) for f in alone]
    assert len(set(finals)) == len(points)
    # One federation: one request per node and message type for all the points, trained side by side.
    timings = [json.loads((f / "summary.json").read_text())["timings"] for f in (*alone, *shared)]
    one_run, each = timings[0]["wire"]["messages"], sum(t["wire"]["messages"] for t in timings[: len(points)])
    assert timings[-1]["shared_by_points"] == len(points)
    if mode == "central-node":  # each point samples its own nodes: a node sampled by several gets one message
        assert one_run < timings[-1]["wire"]["messages"] < each
    else:
        assert timings[-1]["wire"]["messages"] == one_run
    log = (shared[0] / "run.log").read_text()
    assert f"{len(points)} points shared one federation" in log
    if mode == "local":
        assert f"{2 * len(points)} trainings side by side, 0 alone (" in log


def test_a_shared_federation_sends_only_what_each_point_declares(
    tmp_path: Path, offline_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message audit's declarations hold on the merged wire: every record of a node's merged reply
    is one point's (``p<point>/...``) and, split per point, declared for that message type and scope."""
    from clients import points as node_points
    from fl import wire

    replies: list = []
    real = node_points.points_client_app

    def recording(cfgs):  # the real app, each merged reply recorded as it leaves the node (local backend)
        app = real(cfgs)

        def call(message, context):
            reply = app(message, context)
            replies.append((message.metadata.message_type, reply))
            return reply

        return call

    monkeypatch.setattr(node_points, "points_client_app", recording)
    scopes = {"local": "local/sentence", "central-user": "central/user"}
    cfgs = [
        config_mod.resolve({**SMALL_RUN, **MODES[mode], "out-dir": str(tmp_path), "run-name": mode}) for mode in scopes
    ]
    assert all(isinstance(f, Path) for f in launch_points(cfgs, verbose=False))
    assert replies
    for kind, reply in replies:
        assert not reply.has_error()
        for point, content in wire.point_contents(reply.content).items():
            scope = list(scopes.values())[point]
            assert wire.undeclared_fields(kind, content, scope) == [], (kind, point)
        assert all(k.split("/", 1)[0] in ("p0", "p1") for k in reply.content.keys())
