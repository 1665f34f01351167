"""Warm workers run many points in one process, and isolate each point's failure as separate
processes would: a failing point is recorded, a point that kills its worker is retried once in a
fresh one, a point past its timeout has its worker replaced."""

from __future__ import annotations

import re
from pathlib import Path

from simulations.runtime.warm import WarmPool

FAKE = "tests.simulations.fake_cli:main"


def _pid(log: Path) -> list[int]:
    return [int(p) for p in re.findall(r"pid=(\d+)", log.read_text())]


def test_points_share_one_warm_worker_and_log_their_own_output(tmp_path: Path) -> None:
    with WarmPool(1, target=FAKE) as pool:
        outcomes = [pool.run(["ok"], tmp_path / f"p{i}.log") for i in range(3)]
    assert [o.returncode for o in outcomes] == [0, 0, 0]
    pids = {_pid(tmp_path / f"p{i}.log")[0] for i in range(3)}
    assert len(pids) == 1  # one process served all three points
    assert "calls=3" in (tmp_path / "p2.log").read_text() and "to stderr" in (tmp_path / "p2.log").read_text()


def test_a_failing_or_raising_point_is_recorded_and_the_worker_goes_on(tmp_path: Path) -> None:
    with WarmPool(1, target=FAKE) as pool:
        failed = pool.run(["fail"], tmp_path / "a.log")
        raised = pool.run(["raise"], tmp_path / "b.log")
        after = pool.run(["ok"], tmp_path / "c.log")
    assert (failed.returncode, raised.returncode, after.returncode) == (3, 1, 0)
    assert "RuntimeError: a bug in the point" in (tmp_path / "b.log").read_text()
    assert _pid(tmp_path / "a.log") == _pid(tmp_path / "c.log")  # the same worker went on


def test_a_point_that_kills_its_worker_is_retried_once_in_a_fresh_one(tmp_path: Path) -> None:
    with WarmPool(1, target=FAKE) as pool:
        pool.run(["ok"], tmp_path / "warm.log")
        died = pool.run(["die"], tmp_path / "die.log")  # dies in the warm worker, then in the fresh one
        assert died.crashed and died.returncode == 9
        assert "retrying in a fresh one" in (tmp_path / "die.log").read_text()
        assert len(set(_pid(tmp_path / "die.log"))) == 2
        recovered = pool.run(["die-once", str(tmp_path / "marker")], tmp_path / "once.log")  # dies, then succeeds
        assert recovered.returncode == 0 and not recovered.crashed
        assert pool.run(["ok"], tmp_path / "next.log").returncode == 0


def test_a_point_past_its_timeout_is_killed_and_the_next_gets_a_fresh_worker(tmp_path: Path) -> None:
    with WarmPool(1, target=FAKE) as pool:
        hung = pool.run(["hang"], tmp_path / "hang.log", timeout=3.0)
        nxt = pool.run(["ok"], tmp_path / "next.log")
    assert hung.returncode == 124 and hung.seconds < 30
    assert nxt.returncode == 0 and _pid(tmp_path / "next.log") != _pid(tmp_path / "hang.log")


def test_two_jobs_run_points_in_two_workers(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with WarmPool(2, target=FAKE) as pool, ThreadPoolExecutor(2) as threads:
        outcomes = list(threads.map(lambda i: pool.run(["ok"], tmp_path / f"j{i}.log"), range(4)))
    assert all(o.returncode == 0 for o in outcomes)
    assert len({_pid(tmp_path / f"j{i}.log")[0] for i in range(4)}) == 2
