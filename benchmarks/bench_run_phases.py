"""Where a run's wall time goes, per backend: ``sanitas run`` end to end, with its phase breakdown (JSON).

Usage: python benchmarks/bench_run_phases.py [--cases quickstart full-sst2 user-central]
       [--backends local ray] [--repeats 2] [--repo CHECKOUT] [--against CHECKOUT] [--out FILE]

Each case is a real ``sanitas run`` (a fresh process, as a user types it) on the offline SST-2
(``$SANITAS_DATA_DIR``) with the embeddings cached:

* ``readme-quickstart``: ``simulations/experiments/quickstart.toml``, the README's main job (full SST-2,
  local DP, the class-means head, one round);
* ``quickstart``: ``simulations/experiments/sst2_class_rr_4000.toml`` (4,000 sentences, 6 nodes, 3 rounds);
* ``full-sst2``: the same recipe on the whole training split (``train-size = 0``: 50,549
  private users on 102 nodes, 3 rounds);
* ``user-central``: ``simulations/experiments/sst2_user_central.toml`` (full SST-2,
  user-level DP-FedAvg), at 60 rounds; ``user-central-30`` at 30; ``user-central-bytes`` at 60 with
  ``local-wire = "bytes"`` and ``evaluate-every = 1`` (every message serialised, each node alone, every
  round evaluated: the round as it was before the handoff);
* ``lora-central``: the LoRA + head central run of ``docs/results/encoder-compare-sst2`` (seed 1, 50
  rounds, per-user epsilon 2); ``lora-central-2cpu`` the same with ``node-cpus = 2`` (the local
  backend runs one node at a time, so a node may use both cores).

Per case and backend it reports the process's wall seconds (the first repeat also fills the
run's own caches: the public map's scale choice; later repeats are "after caching") and the
run's ``timings`` from ``summary.json``: the phases the launcher and the ServerApp measure in their
process (``fl.reporting.timing``: interpreter and imports, launcher checks, backend start, every round
trip by message type, the server's configure / aggregate steps (server training is
``server aggregate_train`` in local mode), checkpoints, writing results) and, on the local
backend, the nodes' own seconds per message type and the wire's bytes and serialisation
seconds. Phases nest where the server's steps send messages: local mode's round-1
``server configure_train`` holds node discovery (``round trip query``) and the public map.
``outside_server_seconds`` is the command's wall time outside the ServerApp (interpreter, imports,
checks, the backend's start and shutdown, writing the console's table).

``--against CHECKOUT`` (e.g. a git worktree of the commit before a change) runs that checkout's run of
each repeat right after this one's, interleaved, so that the machine's drift over minutes (on a shared
2-core machine the same run took 19.6 s and 25.3 s a few minutes apart) falls on both alike;
its runs are under ``against``, with each case's median walls and their ratio under ``medians``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _common import emit, run_header  # noqa: E402  (benchmarks/ is sys.path[0])

LORA = [
    'mode="central"',
    'central-train="encoder"',
    'map-in="identity"',
    "num-server-rounds=50",
    "central-noise-multiplier=0.824245",
    "seed=1",
    "noise-seed=1",
]
CASES: dict[str, tuple[str, list[str]]] = {
    # the README's main job: full SST-2, local DP, the class-means head
    "readme-quickstart": ("simulations/experiments/quickstart.toml", []),
    "quickstart": ("simulations/experiments/sst2_class_rr_4000.toml", []),
    "full-sst2": ("simulations/experiments/sst2_class_rr_4000.toml", ["train-size=0"]),
    "user-central": ("simulations/experiments/sst2_user_central.toml", ["num-server-rounds=60"]),
    # the "30-round user-level central run of the head on SST-2 with 67,000 users"
    "user-central-30": ("simulations/experiments/sst2_user_central.toml", ["num-server-rounds=30"]),
    # the same 60 rounds with every message deflated and inflated and each node alone (the wire before the handoff)
    "user-central-bytes": (
        "simulations/experiments/sst2_user_central.toml",
        ["num-server-rounds=60", 'local-wire="bytes"', "evaluate-every=1"],
    ),
    # The encoder-compare grid's LoRA + head central run (seed 1, per-user epsilon 2 at 50 rounds).
    "lora-central": ("simulations/experiments/sst2_encoder.toml", LORA),
    "lora-central-2cpu": ("simulations/experiments/sst2_encoder.toml", [*LORA, "node-cpus=2"]),
}


def one_run(config: str, sets: list[str], backend: str, out: Path, timeout: float, repo: Path = REPO) -> dict[str, Any]:
    """One ``sanitas run`` of checkout ``repo`` in a fresh process; its wall seconds and the summary's
    timings. ``backend = "as-is"``: a checkout from before the backend key (it runs on Ray)."""
    command = [sys.executable, "-m", "simulations.cli", "run", config, "--out", str(out)]
    if backend != "as-is":
        command += ["--set", f'backend="{backend}"']
    for item in sets:
        command += ["--set", item]
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:], "wall_seconds": round(wall, 2)}
    summary = json.loads(next(out.glob("*/summary.json")).read_text())
    timings = summary.get("timings") or {}  # absent before fl.reporting.timing existed
    phases = timings.get("phases", {})
    return {
        "wall_seconds": round(wall, 2),
        "server_wall_seconds": summary.get("wall_seconds"),
        "accuracy": summary["final"]["accuracy"],
        "test_users": summary["final"].get("test_users"),
        "phases": phases,
        "wire": timings.get("wire"),
        # the command's time outside the ServerApp: interpreter, imports, checks, backend start and shutdown
        "outside_server_seconds": round(wall - summary["wall_seconds"], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=["quickstart", "full-sst2"])
    parser.add_argument("--backends", nargs="+", choices=("local", "ray", "as-is"), default=["local", "ray"])
    parser.add_argument(
        "--repo",
        default=str(REPO),
        help="the checkout to run (e.g. a git worktree of an older commit; with --backends as-is when it "
        "predates the backend key)",
    )
    parser.add_argument("--against", default="", help="a second checkout, run interleaved with --repo (see above)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per case and backend (the first fills caches)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run before it is killed")
    parser.add_argument("--out", default="", help="also write the JSON to this file")
    args = parser.parse_args()
    if not os.environ.get("SANITAS_DATA_DIR"):
        print("set SANITAS_DATA_DIR to the offline data folder (../shared/data)", file=sys.stderr)
        return 2
    header = run_header()
    results: dict[str, Any] = {}
    for case in args.cases:
        config, sets = CASES[case]
        results[case] = {"config": config, "sets": sets}
        for backend in args.backends:
            runs: list[dict[str, Any]] = []
            against: list[dict[str, Any]] = []
            for _ in range(args.repeats):
                for repo, into in ((args.repo, runs), (args.against, against)):
                    if not repo:
                        continue
                    with tempfile.TemporaryDirectory() as tmp:
                        into.append(one_run(config, sets, backend, Path(tmp), args.timeout, Path(repo)))
                    print(f"{case} {backend} {repo}: {into[-1].get('wall_seconds')} s", file=sys.stderr, flush=True)
            results[case][backend] = runs
            if against:
                results[case].setdefault("against", {})[backend] = against
                walls = [statistics.median(r["wall_seconds"] for r in rs if "error" not in r) for rs in (runs, against)]
                results[case].setdefault("medians", {})[backend] = {
                    "repo": walls[0],
                    "against": walls[1],
                    "repo_over_against": round(walls[0] / walls[1], 3),
                }
        done = [b for b in ("local", "ray") if b in results[case] and "error" not in results[case][b][-1]]
        if len(done) == 2:
            local, ray = results[case]["local"][-1]["wall_seconds"], results[case]["ray"][-1]["wall_seconds"]
            results[case]["ray_over_local"] = round(ray / local, 2)

    def commit(repo: str) -> str:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()

    title = "sanitas run end to end, per backend, with its phase breakdown"
    commits = {"repo_commit": commit(args.repo), **({"against_commit": commit(args.against)} if args.against else {})}
    emit({**header, "benchmark": title, **commits, **results}, args.out)
    backends = ("local", "ray", "as-is")
    groups = [g for c in results.values() for g in (c, c.get("against", {}))]
    every = [r for g in groups for b in backends for r in g.get(b, [])]
    return 1 if any("error" in r for r in every) else 0


if __name__ == "__main__":
    sys.exit(main())
