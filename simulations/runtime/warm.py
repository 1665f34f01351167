"""Warm workers: the points of a sweep run one after another in long-lived processes.

A point is exactly ``sanitas run CONFIG --set ... --out DIR`` (:func:`simulations.cli.main`),
executed in a worker process that stays up between points, so the interpreter, the imports
(torch, Flower, datasets), the encoder, the loaded datasets and the embedding-cache index are
paid once per worker, not once per point. Each point's stdout and stderr (file descriptors 1 and
2, so C-level output too) go to its own log file.

Isolation, as with one process per point:

* a point that fails (non-zero exit, an exception) is recorded and the worker goes on;
* a point that kills its worker (a segfault, the OOM killer, ``os._exit``) is retried once in a
  fresh worker, then recorded as failed;
* a point past its timeout has its worker killed (exit 124 recorded) and a fresh worker serves
  the next point.

Between points a worker drops the per-run caches (the nodes' cohorts), so memory stays that of one
run. ``jobs`` workers serve points in parallel, each with ``cpus // jobs`` torch threads (unless
``$OMP_NUM_THREADS`` says otherwise; one worker keeps torch's default).
With ``backend = "ray"`` a point still starts and stops Ray (Flower's Ray backend shuts Ray
down at the end of every run); the imports and caches are still shared.

Written by hand: ``concurrent.futures.ProcessPoolExecutor`` breaks the whole pool when one
worker dies and cannot kill a single stuck task.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PointOutcome:
    """How one point ended: its exit code (124: timed out; negative: killed by that signal)."""

    returncode: int
    seconds: float
    crashed: bool = False  # the worker died during the point


#: What a worker runs for each point: the ``sanitas`` command line.
CLI = "simulations.cli:main"
#: A job of several points that share one federation (``simulations.runtime.shared.run_together``).
POINTS_JOB = "points"
#: A job of one point given as its resolved config (``simulations.runtime.shared.run_resolved``).
CONFIG_JOB = "config"


def _serve(conn: Connection, threads: int, target: str) -> None:
    """A worker's loop: receive ``(argv, log_path)``, run ``target`` (``module:function``, the CLI) with
    output to the log, send the exit code."""
    import importlib

    if threads > 0:
        import torch

        torch.set_num_threads(threads)
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    module, _, name = target.partition(":")
    main = getattr(importlib.import_module(module), name)
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        if job[0] == POINTS_JOB:  # several points in one federation (resolved configs): one exit code each
            _, cfgs, log_path = job
            codes: list[int] = []
            _run_logged(lambda _: codes.extend(_run_together(cfgs)) or 0, [], Path(log_path))
            conn.send(codes or [1] * len(cfgs))
        elif job[0] == CONFIG_JOB:  # one point, its config resolved by the driver
            _, cfg, log_path = job
            conn.send(_run_logged(lambda _: _run_resolved(cfg), [], Path(log_path)))
        else:
            argv, log_path = job
            conn.send(_run_logged(main, list(argv), Path(log_path)))
        _drop_run_caches()


def _run_together(cfgs: Sequence[Mapping[str, Any]]) -> list[int]:
    from simulations.runtime.shared import run_together

    return run_together(cfgs)


def _run_resolved(cfg: Mapping[str, Any]) -> int:
    from simulations.runtime.shared import run_resolved

    return run_resolved(cfg)


def _exit_when_orphaned(parent: int) -> None:
    """End this worker as soon as the process that started it is gone (killed without closing its
    pool): a sweep stopped with a signal leaves no point running behind it."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _run_logged(main: Any, argv: list[str], log_path: Path) -> int:
    """``main(argv)`` with file descriptors 1 and 2 appended to ``log_path``; its exit code."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "a") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        except BaseException:  # noqa: BLE001 - a failing point is recorded, the worker goes on
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    return int(code or 0)


def _drop_run_caches() -> None:
    """Free what one run cached that the next cannot use (cohorts are keyed by the whole config)."""
    import gc

    from fl.cohort import clear_cohorts

    clear_cohorts()
    gc.collect()


class Worker:
    """One warm worker process and its pipe."""

    def __init__(self, threads: int, target: str = CLI) -> None:
        ctx = mp.get_context("spawn")  # a clean interpreter: no threads or CUDA state inherited
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=_serve, args=(child, threads, target), daemon=True, name="sanitas-warm-worker"
        )
        self.process.start()
        child.close()

    def _exchange(self, job: tuple[Any, ...], points: int, timeout: float | None) -> list[PointOutcome]:
        """Send ``job`` and wait for its exit codes (one per point; never raises for their failure): past
        the timeout the worker is killed (124, a fresh one serves the next job); a worker that dies fails
        every point of the job (``crashed``)."""
        started = time.time()
        try:
            self.conn.send(job)
            if self.conn.poll(timeout):
                codes, seconds = self.conn.recv(), round(time.time() - started, 2)
                return [PointOutcome(int(c), seconds) for c in (codes if isinstance(codes, list) else [codes])]
        except (EOFError, OSError, BrokenPipeError):
            pass
        else:
            self.kill()
            return [PointOutcome(124, round(time.time() - started, 2))] * points
        self.process.join(5)
        code = self.process.exitcode
        failed = PointOutcome(code if code not in (None, 0) else 1, round(time.time() - started, 2), crashed=True)
        return [failed] * points

    def run(self, argv: Sequence[str], log_path: Path, timeout: float | None) -> PointOutcome:
        """Run one point; never raises for the point's failure."""
        return self._exchange((list(argv), str(log_path)), 1, timeout)[0]

    def run_config(self, cfg: Mapping[str, Any], log_path: Path, timeout: float | None) -> PointOutcome:
        """Run one point given as its resolved config; never raises for the point's failure."""
        return self._exchange((CONFIG_JOB, cfg, str(log_path)), 1, timeout)[0]

    def run_points(
        self, cfgs: Sequence[Mapping[str, Any]], log_path: Path, timeout: float | None
    ) -> list[PointOutcome]:
        """Run several points (their resolved configs) in one federation (``simulations.runtime.shared``); one
        outcome each. A worker that dies or times out fails them all (``crashed``, or 124)."""
        return self._exchange((POINTS_JOB, list(cfgs), str(log_path)), len(cfgs), timeout)

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)

    def close(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.process.join(10)
        self.kill()


class WarmPool:
    """``jobs`` warm workers; :meth:`run` is safe to call from ``jobs`` threads at once."""

    def __init__(self, jobs: int = 1, target: str = CLI) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {jobs}")
        self.jobs = jobs
        self.target = target
        # Several workers share the cores; one worker keeps torch's own choice (all cores, or
        # $OMP_NUM_THREADS), as a `sanitas run` in a shell would. 0 = leave torch alone.
        shared = jobs > 1 and not os.environ.get("OMP_NUM_THREADS")
        self.threads = max(1, (os.cpu_count() or 1) // jobs) if shared else 0
        self._idle: queue.Queue[Worker | None] = queue.Queue()
        for _ in range(jobs):
            self._idle.put(None)  # started on first use
        self._all: list[Worker] = []
        self._lock = threading.Lock()

    def _fresh(self) -> Worker:
        worker = Worker(self.threads, self.target)
        with self._lock:
            self._all.append(worker)
        return worker

    @contextmanager
    def _worker(self) -> Iterator[list[Worker]]:
        """An idle worker (started if need be), as a one-item list the body may replace; given back to
        the pool afterwards, or dropped when it died."""
        worker = self._idle.get()
        held = [worker if worker is not None and worker.alive else self._fresh()]
        try:
            yield held
        finally:
            self._idle.put(held[0] if held[0].alive else None)

    def run(self, argv: Sequence[str], log_path: Path, timeout: float | None = None) -> PointOutcome:
        """Run one point (its ``sanitas`` command line) on an idle worker; a point that kills its worker is
        retried once on a fresh one."""
        return self._retried(lambda worker: worker.run(argv, log_path, timeout), log_path)

    def run_config(self, cfg: Mapping[str, Any], log_path: Path, timeout: float | None = None) -> PointOutcome:
        """Run one point given as its resolved config on an idle worker (nothing is resolved again there); a
        point that kills its worker is retried once on a fresh one."""
        return self._retried(lambda worker: worker.run_config(cfg, log_path, timeout), log_path)

    def _retried(self, job: Any, log_path: Path) -> PointOutcome:
        with self._worker() as held:
            outcome = job(held[0])
            if outcome.crashed:
                with open(log_path, "a") as log:
                    log.write(f"sanitas: the worker died (exit code {outcome.returncode}); retrying in a fresh one\n")
                held[0] = self._fresh()
                outcome = job(held[0])
            return outcome

    def run_points(
        self, cfgs: Sequence[Mapping[str, Any]], log_path: Path, timeout: float | None = None
    ) -> list[PointOutcome]:
        """Run several points (their resolved configs) in one federation on an idle worker (no retry: a crash
        fails them all, and the sweep runs them again one by one)."""
        with self._worker() as held:
            return held[0].run_points(cfgs, log_path, timeout)

    def close(self) -> None:
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.close()

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
