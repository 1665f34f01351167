"""One round on synthetic users, local and user-level central DP: speed and memory vs a plain loop (JSON).

Usage: python benchmarks/bench_simulation.py [--users 1000 10000 100000 1000000] [--modes local central]
       [--users-per-node N] [--test-users 2000] [--dim 384] [--cohort-size 1000] [--threads N]
       [--timeout S] [--smoke] [--out FILE]

For each mode (``--modes``) and each number of training users N (``--users``) it runs, each in a
fresh child process, a **federated** round and its **floor**. Both modes use ``dataset =
"synthetic"`` (``fl/data/datasets.py``: each node generates its own users), the same N users and
``synthetic-test-users`` test users, ``ceil(max(N, test users) / users-per-node)`` Flower nodes on
the ``--backend`` (``local``: in the child's process, the default; ``ray``: a fresh local Ray
instance), one round, ``noise-seed = 0``.

``local`` (local DP, ``mode = "local"``):

* **federated**: ``simulations.run``, sentence-level Purkayastha (epsilon 10, ``map-in =
  "random"``, m' = 16: the defaults), labels in the clear, ``server-epochs = 1``. Its strategy is
  ``ReleaseTraining`` with timers (:class:`TimedReleaseTraining`, through the ``strategy`` key),
  which splits the run into ``discovery`` (Ray and actor start-up, ClientApp imports on the actors,
  and the nodes' cohort generation: the first message each node answers), the
  ``train_round_trip`` (nodes map, sanitize and reply; Flower and Ray move the messages),
  ``store`` and ``fit`` (server training), the ``evaluate_round_trip``, and
  ``ray_start_and_other`` (start-up before the ServerApp runs, accounting, results files, Ray
  shutdown: the rest of the wall time).
* **floor**: the same work in one process, without Flower or Ray: generate the same synthetic
  users block by block (``users-per-node`` at a time), apply the same M1 and the same sanitizer
  with the same code (``fl.maps.input_map.apply_input_map``, the sentence channel's mechanism), train the
  same server model for the same epochs (``fl.maps.pipeline.train_epochs``), and score the test users
  (sanitized and clean), as the round's evaluation does.

``central`` (user-level central DP, ``mode = "central"``, ``central-unit = "user"``: DP-FedAvg,
``strategies.central_user``): ``map-in = "identity"``, ``central-cohort-size`` = ``--cohort-size``
(1000: each user is Poisson-sampled with q = min(1, 1000 / N)), clip C = 1, noise multiplier
z = 1, ``local-epochs = 1`` (one SGD step per user at ``client-learning-rate = 1``), FedAdam at
``server-learning-rate = 0.01`` (the settings of ``simulations/experiments/sst2_user_central.toml``).

* **federated**: ``simulations.run``. Central mode refuses the ``strategy`` key, so the phases
  come from the time breakdown ``UserLevelDPFedAvg`` writes in its round record (``timing``:
  ``train_round_trip``: the nodes sample, compute and clip their users' updates and reply with
  the sums; ``server_step``: sum, noise and the server-optimizer step; ``evaluate_round_trip``;
  ``accounting``: the per-user epsilon), and ``discovery`` (as in local mode: the nodes' first
  answer, cohort generation included) from a timer this child wraps around
  ``strategies.discovery.discover_nodes`` (in its own process, where the ServerApp runs);
  ``ray_start_and_other`` is the rest of the wall time.
* **floor**: the same work in one process, without Flower or Ray: generate the same synthetic
  users node block by node block (the nodes' blocks, ``fl.data.partition.cohort``), draw the same
  Poisson coins (``fl.training.user_updates.poisson_sample``, ``noise-seed`` as every node's secret), sum
  each block's clipped per-user updates with the nodes' code (``fl.maps.input_map.apply_input_map``,
  ``fl.training.user_updates.pad_by_user`` and ``clipped_update_sum``), add the same noise to the float64
  sum of the blocks' float32 sums (``fl.training.user_updates.noisy_mean``, seeded as the strategy seeds
  it), take the same server-optimizer step, account (``fl.accounting.user_level.user_privacy_record``)
  and score the test users block by block. It computes the very model the federated round
  computes, so ``same_accuracy`` (federated and floor test accuracy equal) checks that the
  floor did the same work.

Per mode and N it reports the wall seconds and users per second of both, ``overhead_ratio`` =
federated / floor wall seconds (1 = no overhead), ``overhead_ratio_after_discovery`` = (federated
wall - discovery) / floor wall, which leaves out the federation's one-time start-up (both sides
still generate their users: the nodes do it inside the round), and the peak memory of each
child's whole process tree (the child and every descendant: Ray's GCS, raylet, agents and
ClientApp actors): the peak of the summed RSS
(counts shared pages, such as Ray's object store, once per process that maps them) and of the
summed PSS (shared pages divided among those processes), sampled every 0.25 s from ``/proc`` by a
thread of this process (Linux; a peak shorter than the interval can be missed).
``resource.getrusage(RUSAGE_CHILDREN)`` would not do: it reports the largest single waited-for
descendant, not the tree's sum. Between consecutive sizes, ``marginal`` gives the seconds one
more user costs on both sides and their ratio: the per-user overhead, free of the fixed start-up.
The JSON holds one entry per mode under ``modes`` (``config``, ``cases``, ``marginal``). Every child
imports torch, ``torch._dynamo`` (which the first torch optimizer of a process imports: seconds) and
``fl.data.datasets`` before its clock starts, so neither side counts them.

``--smoke`` runs one tiny size per mode (untimed: the figures are not measurements) to check that
the script works end to end. Timings are wall-clock, so other work on the machine skews them; the
load average is recorded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmark this checkout

from _common import emit, run_header  # noqa: E402  (benchmarks/ is sys.path[0])
from strategies.local.release_training import ReleaseTraining  # noqa: E402

SCRIPT = Path(__file__).resolve()
RESULT_MARK = "BENCH_SIMULATION_RESULT "
SAMPLE_SECONDS = 0.25
TREE_EVERY = 4


# ------------------------------------------------------------------------------------ the run config
MODES = ("local", "central")


def run_config(
    users: int, users_per_node: int, test_users: int, dim: int, mode: str = "local", cohort_size: float = 1000.0
) -> dict[str, Any]:
    """The federated run's config (run-config keys) in ``mode``; the floor reads the same one."""
    common = {
        "dataset": "synthetic",
        "num-users": users,
        "synthetic-test-users": test_users,
        "synthetic-dim": dim,
        "users-per-node": users_per_node,
        "num-server-rounds": 1,
        "noise-seed": 0,
        "seed": 42,
        "device": "cpu",
    }
    if mode == "local":
        return {
            **common,
            "server-epochs": 1,
            "sentence-mechanism": "purkayastha",
            "sentence-epsilon": 10.0,
            "label-mechanism": "none",
        }
    if mode != "central":
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return {
        **common,
        "mode": "central",
        "central-unit": "user",
        "map-in": "identity",
        "central-cohort-size": float(cohort_size),  # q = min(1, cohort_size / N)
        "central-clip": 1.0,
        "central-noise-multiplier": 1.0,
        "central-delta": 1e-5,
        "local-epochs": 1,
        "client-learning-rate": 1.0,
        "server-optimizer": "adam",
        "server-learning-rate": 0.01,
    }


# ------------------------------------------------------------------------------------ peak memory
def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc/<pid>/stat."""
    kids: dict[int, list[int]] = defaultdict(list)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        kids[int(stat.rsplit(")", 1)[1].split()[1])].append(int(entry.name))
    return kids


def _tree(root: int) -> list[int]:
    kids, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def _kib(path: str, field: str) -> int:
    """A ``Field:  N kB`` line of a /proc file, in KiB (0 when the process is gone)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class TreeMemory(threading.Thread):
    """Samples the summed RSS and PSS of a process and all its descendants; keeps the peaks.

    The process tree is re-read every ``TREE_EVERY`` samples (Ray starts its processes once).
    """

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_rss_kib = self.peak_pss_kib = self.peak_processes = 0
        self.pids: list[int] = [pid]
        self._samples = 0
        self._done = threading.Event()

    def sample(self) -> None:
        if self._samples % TREE_EVERY == 0:
            self.pids = _tree(self.pid)
        self._samples += 1
        pids = self.pids
        rss = sum(_kib(f"/proc/{p}/status", "VmRSS:") for p in pids)
        pss = sum(_kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids)
        self.peak_rss_kib = max(self.peak_rss_kib, rss)
        self.peak_pss_kib = max(self.peak_pss_kib, pss)
        self.peak_processes = max(self.peak_processes, len(pids))

    def run(self) -> None:
        while not self._done.is_set():
            self.sample()
            self._done.wait(SAMPLE_SECONDS)

    def stop(self) -> dict[str, Any]:
        self._done.set()
        self.join()
        return {
            "peak_rss_mib": round(self.peak_rss_kib / 1024, 1),
            "peak_pss_mib": round(self.peak_pss_kib / 1024, 1),
            "peak_processes": self.peak_processes,
        }


# ------------------------------------------------------------------------------------ federated child
PHASES: dict[str, float] = defaultdict(float)


def _timed(name: str, method: Any) -> Any:
    def wrapper(self: ReleaseTraining, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            PHASES[name] += time.perf_counter() - start
            PHASES[f"{name}_end"] = time.perf_counter()

    return wrapper


class TimedReleaseTraining(ReleaseTraining):
    """``ReleaseTraining`` with timers around its phases (what the federated child's strategy is)."""

    discover = _timed("discovery", ReleaseTraining.discover)
    configure_train = _timed("configure_train", ReleaseTraining.configure_train)
    aggregate_train = _timed("aggregate_train", ReleaseTraining.aggregate_train)
    fit = _timed("fit", ReleaseTraining.fit)
    _store = _timed("store", ReleaseTraining._store)
    configure_evaluate = _timed("configure_evaluate", ReleaseTraining.configure_evaluate)
    aggregate_evaluate = _timed("aggregate_evaluate", ReleaseTraining.aggregate_evaluate)


def federated_local(cfg: dict[str, Any]) -> dict[str, Any]:
    """One ``simulations.run`` of ``cfg``, timed; its phases from :class:`TimedReleaseTraining`."""
    import bench_simulation  # this file as a module: the ServerApp loads the strategy from it by name
    import simulations

    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        result = simulations.run(cfg, out=out, run_name="bench", strategy="bench_simulation:TimedReleaseTraining")
        wall = time.perf_counter() - start
    p = bench_simulation.PHASES
    train_trip = p["aggregate_train_end"] - p["aggregate_train"] - p["configure_train_end"]
    evaluate_trip = p["aggregate_evaluate_end"] - p["aggregate_evaluate"] - p["configure_evaluate_end"]
    phases = {
        "discovery": p["discovery"],
        "train_round_trip": train_trip,
        "store": p["store"],
        "fit": p["fit"],
        "aggregate_train_other": p["aggregate_train"] - p["store"] - p["fit"],
        "evaluate_round_trip": evaluate_trip,
    }
    phases["ray_start_and_other"] = wall - sum(phases.values())
    record = result.rounds[0]
    return {
        "wall_seconds": wall,
        "round_seconds": record["seconds"],
        "phases": {k: round(v, 3) for k, v in phases.items()},
        "nodes": result.summary["users"]["nodes"],
        "releases": record["train_releases_total"],
        "test_users": record["test_users"],
        "accuracy": record["accuracy"],
    }


def federated_central(cfg: dict[str, Any]) -> dict[str, Any]:
    """One user-level central ``simulations.run`` of ``cfg``, timed: its phases from the round
    record's ``timing`` (``UserLevelDPFedAvg``) and a timer around the nodes' discovery."""
    import simulations
    from strategies import discovery as discovery_module

    # Central mode refuses the ``strategy`` key (fl.config.rules.check_central_config), so no
    # timed subclass can be loaded; the ServerApp runs in this process and finds the nodes through
    # this module attribute (strategies.modes call discovery.discover_nodes), so a wrapper here times it.
    discover_nodes = discovery_module.discover_nodes
    discovery = 0.0

    def timed_discover_nodes(*args: Any, **kwargs: Any) -> Any:
        nonlocal discovery
        start = time.perf_counter()
        try:
            return discover_nodes(*args, **kwargs)
        finally:
            discovery += time.perf_counter() - start

    discovery_module.discover_nodes = timed_discover_nodes
    try:
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            result = simulations.run(cfg, out=out, run_name="bench")
            wall = time.perf_counter() - start
    finally:
        discovery_module.discover_nodes = discover_nodes
    record = result.rounds[0]
    timing = record["timing"]
    phases = {
        "discovery": discovery,
        **{k: float(timing[k]) for k in ("train_round_trip", "server_step", "evaluate_round_trip", "accounting")},
    }
    phases["ray_start_and_other"] = wall - sum(phases.values())
    privacy = record["privacy"]
    return {
        "wall_seconds": wall,
        "round_seconds": record["seconds"],
        "phases": {k: round(v, 3) for k, v in phases.items()},
        "nodes": result.summary["users"]["nodes"],
        "expected_sampled_users": privacy["expected_users_per_round"],
        "test_users": record["test_users"],
        "accuracy": record["accuracy"],
        "epsilon": privacy["epsilon"],
    }


def federated(cfg: dict[str, Any]) -> dict[str, Any]:
    """The federated child of ``cfg``'s mode."""
    return federated_central(cfg) if cfg.get("mode") == "central" else federated_local(cfg)


# ------------------------------------------------------------------------------------ floor child
def floor_local(cfg: dict[str, Any]) -> dict[str, Any]:
    """The local-mode round's work in one plain loop: generate, map, sanitize, train, score."""
    import numpy as np
    import torch

    from fl import config as config_mod
    from fl.data import datasets
    from fl.levels.channels import make_channels
    from fl.levels.spec import LevelSpec
    from fl.maps import input_map as maps
    from fl.maps.pipeline import build_model, confusion_matrix, predict, scores, train_epochs

    start = time.perf_counter()
    rc = config_mod.resolve(cfg)
    ds = datasets.load(rc.data, rc.users, rc.release.level)
    assert isinstance(ds, datasets.SyntheticDataset)
    m_prime = maps.map_dim(rc.release, ds.dim)
    matrix = maps.input_map(rc["map-in"], ds.dim, m_prime, rc["map-seed"])
    channels = make_channels(LevelSpec.from_config(rc), m_prime)
    mechanism = channels.embedding.mechanism
    generator = torch.Generator().manual_seed(int(rc["noise-seed"]))
    block = int(rc["users-per-node"])
    phases = {"generate": 0.0, "map_and_sanitize": 0.0, "fit": 0.0, "evaluate": 0.0}

    def released(split: str, lo: int, hi: int) -> tuple[torch.Tensor, np.ndarray, torch.Tensor]:
        t0 = time.perf_counter()
        x, y = ds.rows(split, range(lo, hi))
        t1 = time.perf_counter()
        mapped = maps.apply_input_map(torch.from_numpy(x), matrix)
        rows = mechanism.sanitize(mapped, generator=generator).to(torch.float32)
        phases["generate"] += t1 - t0
        phases["map_and_sanitize"] += time.perf_counter() - t1
        return rows, y, mapped.to(torch.float32)

    release_dim = int(mechanism.output_dim(m_prime))
    x_all = np.zeros((ds.num_train, release_dim), dtype=np.float32)
    y_all = np.zeros(ds.num_train, dtype=np.int64)
    for lo in range(0, ds.num_train, block):
        hi = min(lo + block, ds.num_train)
        rows, y, _ = released("train", lo, hi)
        x_all[lo:hi] = rows.numpy()
        y_all[lo:hi] = channels.label.release(torch.from_numpy(y), rows, None, ds.num_classes, generator)
    t0 = time.perf_counter()
    model = build_model(release_dim, ds.dim, ds.num_classes, hidden_dim=rc.server.hidden_dim, seed=rc.users.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=rc["learning-rate"])
    fit_generator = torch.Generator().manual_seed(int(rc["seed"]))
    loss = train_epochs(
        model,
        optimizer,
        torch.from_numpy(x_all),
        torch.from_numpy(y_all),
        int(rc["server-epochs"]),
        int(rc["batch-size"]),
        fit_generator,
    )
    phases["fit"] = time.perf_counter() - t0
    k = ds.num_classes
    confusion, clean = np.zeros((k, k), dtype=np.int64), np.zeros((k, k), dtype=np.int64)
    test_block = -(-ds.num_test // -(-ds.num_train // block))  # the test users of one node
    for lo in range(0, ds.num_test, test_block):
        hi = min(lo + test_block, ds.num_test)
        rows, y, mapped = released("test", lo, hi)
        t0 = time.perf_counter()
        confusion += confusion_matrix(y, predict(model, rows).numpy(), k)
        clean += confusion_matrix(y, predict(model, mapped).numpy(), k)
        phases["evaluate"] += time.perf_counter() - t0
    wall = time.perf_counter() - start
    phases["other"] = wall - sum(phases.values())
    return {
        "wall_seconds": wall,
        "phases": {k: round(v, 3) for k, v in phases.items()},
        "train_loss": loss,
        "accuracy": scores(confusion)["accuracy"],
        "clean_accuracy": scores(clean)["accuracy"],
    }


def floor_central(cfg: dict[str, Any]) -> dict[str, Any]:
    """The user-level central round's work in one plain loop, node block by node block: generate,
    Poisson-sample, sum the clipped per-user updates, noise, server step, account, score."""
    import numpy as np
    import torch

    from fl import config as config_mod
    from fl.accounting.user_level import sampling_rate, user_privacy_record
    from fl.data import datasets
    from fl.data.partition import cohort, num_nodes
    from fl.maps import input_map as maps
    from fl.maps.pipeline import build_model, confusion_matrix, predict, scores
    from fl.training.user_updates import clipped_update_sum, hash_seed, noisy_mean, pad_by_user, poisson_sample

    start = time.perf_counter()
    rc = config_mod.resolve(cfg)
    ds = datasets.load(rc.data, rc.users, rc.release.level)
    assert isinstance(ds, datasets.SyntheticDataset)
    m_prime = maps.map_dim(rc.release, ds.dim)
    matrix = maps.input_map(rc["map-in"], ds.dim, m_prime, rc["map-seed"])  # None for identity
    nodes = num_nodes(max(ds.num_train, ds.num_test), int(rc["users-per-node"]))  # as simulations.launch
    # the strategy's seeded start
    model = build_model(m_prime, ds.dim, ds.num_classes, hidden_dim=rc.server.hidden_dim, seed=rc.users.seed)
    lr = float(rc["server-learning-rate"])  # the optimizer as UserLevelDPFedAvg builds it, before the round
    params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=lr) if rc["server-optimizer"] == "adam" else torch.optim.SGD(params, lr=lr)
    q = sampling_rate(float(rc["central-cohort-size"]), ds.num_train)
    secret, server_round = int(rc["noise-seed"]), 1  # every node's secret and the strategy's noise secret
    z, clip = float(rc["central-noise-multiplier"]), float(rc["central-clip"])
    phases = dict.fromkeys(("setup", "generate", "sample", "update_sum", "server_step", "accounting", "evaluate"), 0.0)
    phases["setup"] = time.perf_counter() - start
    total = {k: torch.zeros(p.shape, dtype=torch.float64) for k, p in model.named_parameters()}
    sampled = 0
    for node in range(nodes):  # the nodes' blocks, in the strategy's summation order
        users = cohort(node, nodes, ds.num_train)
        if not len(users):
            continue
        t0 = time.perf_counter()
        x, y = ds.rows("train", users)
        t1 = time.perf_counter()
        ids = torch.arange(users.start, users.stop, dtype=torch.int64)  # one document per synthetic user
        chosen = ids[poisson_sample(secret, server_round, ids, ds.num_train, q)]
        t2 = time.perf_counter()
        if chosen.numel():  # as clients.central_client.handle_user_train
            keep = torch.isin(ids, chosen)
            features = maps.apply_input_map(torch.from_numpy(x)[keep], matrix).to(torch.float32)
            owner = torch.searchsorted(chosen, ids[keep])
            xs, ys, mask = pad_by_user(features, torch.from_numpy(y)[keep], owner, int(chosen.numel()))
            part, _ = clipped_update_sum(
                model,
                xs,
                ys,
                mask,
                steps=int(rc["local-epochs"]),
                lr=float(rc["client-learning-rate"]),
                clip=clip,
            )
            for k in total:  # a node replies in float32; the server sums in float64
                total[k] += part[k].detach().to(torch.float32).to(torch.float64)
        sampled += int(chosen.numel())
        phases["generate"] += t1 - t0
        phases["sample"] += t2 - t1
        phases["update_sum"] += time.perf_counter() - t2
    t0 = time.perf_counter()  # as UserLevelDPFedAvg.aggregate_train
    generator = torch.Generator().manual_seed(hash_seed(secret, server_round, 0x5E1))
    mean = noisy_mean(total, z, clip, q * ds.num_train, generator)
    optimizer.zero_grad(set_to_none=True)
    for k, p in model.named_parameters():
        p.grad = -mean[k].to(dtype=p.dtype)
    optimizer.step()
    phases["server_step"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    privacy = user_privacy_record(rc.central, q, ds.num_train, 1)
    phases["accounting"] = time.perf_counter() - t0
    k = ds.num_classes
    confusion = np.zeros((k, k), dtype=np.int64)
    for node in range(nodes):  # as clients.central_client.handle_central_evaluate
        test = cohort(node, nodes, ds.num_test)
        if not len(test):
            continue
        t0 = time.perf_counter()
        x, y = ds.rows("test", test)
        t1 = time.perf_counter()
        pred = predict(model, maps.apply_input_map(torch.from_numpy(x), matrix).to(torch.float32)).numpy()
        confusion += confusion_matrix(y, pred, k)
        phases["generate"] += t1 - t0
        phases["evaluate"] += time.perf_counter() - t1
    wall = time.perf_counter() - start
    phases["other"] = wall - sum(phases.values())
    return {
        "wall_seconds": wall,
        "phases": {k: round(v, 3) for k, v in phases.items()},
        "nodes": nodes,
        "sampled_users": sampled,
        "expected_sampled_users": privacy["expected_users_per_round"],
        "test_users": int(confusion.sum()),
        "accuracy": scores(confusion)["accuracy"],
        "epsilon": privacy["epsilon"],
    }


def floor(cfg: dict[str, Any]) -> dict[str, Any]:
    """The floor child of ``cfg``'s mode."""
    return floor_central(cfg) if cfg.get("mode") == "central" else floor_local(cfg)


def child(kind: str, cfg: dict[str, Any]) -> None:
    """Run one measurement in this (child) process and print its result line."""
    import torch  # noqa: F401  (imported before the clock starts on both sides)
    import torch._dynamo  # noqa: F401  (a process's first torch optimizer imports it: seconds, not work)

    out = federated(cfg) if kind == "federated" else floor(cfg)
    print(RESULT_MARK + json.dumps(out), flush=True)


# ------------------------------------------------------------------------------------ the parent
def measure(kind: str, cfg: dict[str, Any], threads: int, timeout: float) -> dict[str, Any]:
    """Run one child, sample its process tree's memory, and read its result line."""
    env = dict(os.environ)
    if threads:
        env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
    cmd = [sys.executable, str(SCRIPT), "--child", kind, "--config", json.dumps(cfg)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    sampler = TreeMemory(proc.pid)
    sampler.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in reversed(_tree(proc.pid)):  # the child and the Ray processes it started
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        stdout, stderr = proc.communicate()
        sampler.stop()
        return {"error": f"timed out after {timeout:.0f}s", "stderr_tail": stderr[-2000:]}
    memory = sampler.stop()
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_MARK)]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit status {proc.returncode}", "stderr_tail": stderr[-2000:]}
    return {**json.loads(lines[-1][len(RESULT_MARK) :]), **memory}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b and math.isfinite(a) and b > 0 else None


def one_size(users: int, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    users_per_node = args.users_per_node or max(1000, -(-users // 100))  # at most ~100 nodes
    cfg = run_config(users, users_per_node, args.test_users, args.dim, mode, args.cohort_size)
    cfg["backend"] = args.backend
    fed = measure("federated", cfg, args.threads, args.timeout)
    flo = measure("floor", cfg, args.threads, args.timeout)
    case: dict[str, Any] = {"users": users, "users_per_node": users_per_node, "federated": fed, "floor": flo}
    if "error" in fed or "error" in flo:
        return case
    if mode == "central":  # the floor computes the federated round's model: the same test accuracy
        case["same_accuracy"] = fed["accuracy"] == flo["accuracy"]
    fed["users_per_second"] = users / fed["wall_seconds"]
    flo["users_per_second"] = users / flo["wall_seconds"]
    case["overhead_ratio"] = _ratio(fed["wall_seconds"], flo["wall_seconds"])
    case["overhead_ratio_after_discovery"] = _ratio(
        fed["wall_seconds"] - fed["phases"]["discovery"], flo["wall_seconds"]
    )
    for side in (fed, flo):
        side["wall_seconds"] = round(side["wall_seconds"], 3)
        side["users_per_second"] = round(side["users_per_second"], 1)
    return case


def marginal(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Between consecutive sizes: the seconds each extra user costs on both sides and their ratio,
    the federation's per-user overhead without its fixed start-up and shutdown."""
    done = sorted((c for c in cases if "overhead_ratio" in c), key=lambda c: c["users"])
    out = []
    for a, b in zip(done, done[1:], strict=False):
        extra = b["users"] - a["users"]
        if extra <= 0:
            continue
        fed = (b["federated"]["wall_seconds"] - a["federated"]["wall_seconds"]) / extra
        flo = (b["floor"]["wall_seconds"] - a["floor"]["wall_seconds"]) / extra
        out.append(
            {
                "from_users": a["users"],
                "to_users": b["users"],
                "federated_microseconds_per_user": round(fed * 1e6, 2),
                "floor_microseconds_per_user": round(flo * 1e6, 2),
                "overhead_ratio": _ratio(fed, flo),
            }
        )
    return out


BENCHMARKS = {
    "local": "one local-DP round (sentence-level Purkayastha, epsilon 10) on dataset = 'synthetic': "
    "simulations.run vs a plain loop",
    "central": "one user-level central-DP round (DP-FedAvg, Poisson-sampled users, C = 1, z = 1) on "
    "dataset = 'synthetic': simulations.run vs a plain loop",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=[1000, 10_000, 100_000], help="training users")
    parser.add_argument(
        "--modes", nargs="+", choices=MODES, default=list(MODES), help="local (local DP) and/or central (user level)"
    )
    parser.add_argument(
        "--users-per-node", type=int, default=0, help="users per node (0: max(1000, ceil(users / 100)))"
    )
    parser.add_argument("--test-users", type=int, default=2000, help="synthetic-test-users")
    parser.add_argument("--dim", type=int, default=384, help="synthetic-dim")
    parser.add_argument(
        "--cohort-size", type=float, default=1000.0, help="central mode: central-cohort-size (q = min(1, this / N))"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="OMP/MKL (torch) threads of every child process, the server's training included (0: torch's "
        "default); 1 by default: on a busy 2-core machine a 2-thread training step can be 50x slower",
    )
    parser.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="the federated side's simulation backend (config key backend; default local, in one process)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per child before it is killed")
    parser.add_argument("--smoke", action="store_true", help="one tiny untimed size per mode, to check the script")
    parser.add_argument("--out", default="", help="also write the JSON to this file")
    parser.add_argument("--child", choices=("federated", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--config", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, json.loads(args.config))
        return 0
    if args.smoke:
        args.users, args.users_per_node, args.test_users, args.dim, args.cohort_size = [200], 100, 40, 32, 50.0
    modes = list(dict.fromkeys(args.modes))
    header = run_header()  # the load before the children run
    results: dict[str, Any] = {}
    for mode in modes:
        cases = [one_size(n, mode, args) for n in args.users]
        config = run_config(0, 0, args.test_users, args.dim, mode, args.cohort_size)
        results[mode] = {
            "benchmark": BENCHMARKS[mode],
            "config": {k: v for k, v in config.items() if k not in ("num-users", "users-per-node")},
            "cases": cases,
            "marginal": marginal(cases),
        }
    result = {
        **header,
        "benchmark": "one round on dataset = 'synthetic' per mode: simulations.run vs a plain loop",
        "smoke": args.smoke,
        "child_threads": args.threads or None,
        "backend": args.backend,
        "memory": "peak over 0.25 s samples of the summed RSS / PSS of the child's process tree (from /proc)",
        "modes": results,
    }
    emit(result, args.out)
    failed = any("error" in c["federated"] or "error" in c["floor"] for r in results.values() for c in r["cases"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
