"""The SST-2 200-public recipe trained on the server and on the nodes under Flower's FedAvg, FedAdam and
FedTrimmedAvg: accuracy and wall time side by side, over seeds.

    SANITAS_DATA_DIR=../shared/data python benchmarks/bench_strategies.py [--seeds 1,2,3] [--rounds 5]
        [--out strategies.json] [--docs docs/results/strategies-on-nodes]

Every variant is the quickstart (``simulations/experiments/quickstart.toml``: 200 public SST-2 texts split by
source, a public projection to 32 dimensions, PrivUnit at 4.082 and RR at 2.198 per user, each user releasing
once), at the same seed and noise seed, so the users' releases are the same draws and the ledger is the
same (checked: every variant's per-user epsilon is printed). What changes is where the model is trained:

* ``server, class-means``: today's recipe (the releases' debiased class means, one round);
* ``server, mlp``: the MLP trained by Adam on every release on the server, ``--rounds`` rounds;
* ``nodes, FedAvg`` / ``FedAdam`` / ``FedTrimmedAvg``: the same MLP trained on each node over its own users'
  releases (``server-epochs`` per round), the nodes' models aggregated by the Flower strategy, ``--rounds``
  rounds (re-sent releases cost nothing: the ledger is that of one release per user).

Beside each: its own noise-free ceiling (the same variant with ``sentence-mechanism = label-mechanism =
"none"``, same seeds), the public-only line the run printed (the server model fitted on the public data alone) and the
paired gain over it across seeds (mean, sd, a one-sided paired t-test). Writes the JSON to ``--out`` and, with
``--docs``, results.csv, results.md and accuracy_by_strategy.png into that folder.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import time
from pathlib import Path
from typing import Any

from _common import emit, run_header

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "simulations" / "experiments" / "quickstart.toml"

VARIANTS: dict[str, dict[str, Any]] = {
    "server, class-means": {},
    "server, mlp": {"server-model": "mlp"},
    "nodes, FedAvg": {"server-model": "mlp", "strategy": "FedAvg"},
    "nodes, FedAdam": {"server-model": "mlp", "strategy": "FedAdam", "strategy-options": "eta = 0.01"},
    "nodes, FedTrimmedAvg": {"server-model": "mlp", "strategy": "FedTrimmedAvg", "strategy-options": "beta = 0.2"},
}


def one_run(keys: dict[str, Any], seed: int, rounds: int, out: Path, name: str) -> dict[str, Any]:
    """One variant at one seed: its accuracy, public-only line, per-user epsilon and wall seconds."""
    import simulations

    extra = {"num-server-rounds": rounds} if keys.get("server-model") == "mlp" else {}
    started = time.time()
    result = simulations.run(
        QUICKSTART,
        out=out,
        run_name=name,
        seed=seed,
        noise_seed=seed,
        **{k.replace("-", "_"): v for k, v in {**keys, **extra}.items()},
    )
    s = result.summary
    outcome = s["outcome"]
    return {
        "accuracy": s["final"]["accuracy"],
        "public_only_accuracy": outcome.get("public_only_accuracy"),
        "majority_rate": outcome.get("majority_class_rate"),
        "epsilon_per_user": s["privacy"]["epsilon_total"],  # embedding and label, composed per user
        "releases": s["privacy"].get("releases"),
        "trained_on": s.get("trained_on"),
        "strategy": s.get("strategy"),
        "wall_seconds": round(time.time() - started, 2),
        "rounds": rounds if extra else 1,
    }


def paired(gains: list[float]) -> dict[str, float]:
    """Mean and sd of the paired gains over the public-only line, and the one-sided paired t-test's p."""
    from scipy.stats import ttest_1samp

    mean = statistics.fmean(gains)
    sd = statistics.stdev(gains) if len(gains) > 1 else float("nan")
    p = float(ttest_1samp(gains, 0.0, alternative="greater").pvalue) if len(gains) > 1 and sd > 0 else float("nan")
    return {"gain_mean": mean, "gain_sd": sd, "p_one_sided": p}


def write_docs(folder: Path, rows: list[dict[str, Any]], summary: dict[str, dict[str, Any]], command: str) -> None:
    """results.csv (one row per run), results.md (the table) and accuracy_by_strategy.png (mean +- sd)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "| variant | accuracy (mean +- sd) | noise-free ceiling | public-only | gain over public (p, one-sided paired "
        "t) | per-user epsilon | wall s (mean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in summary.items():
        lines.append(
            f"| {name} | {s['accuracy_mean']:.4f} +- {s['accuracy_sd']:.4f} | {s['noise_free_mean']:.4f} | "
            f"{s['public_only_mean']:.4f} | "
            f"{s['gain_mean']:+.4f} +- {s['gain_sd']:.4f} (p = {s['p_one_sided']:.3g}) | {s['epsilon']:g} | "
            f"{s['wall_mean']:.1f} |"
        )
    (folder / "results.md").write_text(f"Command: `{command}`\n\n" + "\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = list(summary)
    means = [summary[n]["accuracy_mean"] for n in names]
    sds = [summary[n]["accuracy_sd"] for n in names]
    ax.bar(range(len(names)), means, yerr=sds, capsize=4, color="tab:blue", alpha=0.8)
    public = statistics.fmean(summary[n]["public_only_mean"] for n in names)
    ax.axhline(public, color="tab:orange", ls="--", label=f"public-only line ({public:.3f})")
    majority = statistics.fmean(r["majority_rate"] for r in rows if r["majority_rate"] is not None)
    ax.axhline(majority, color="grey", ls=":", label=f"majority class ({majority:.3f})")
    ax.set_xticks(range(len(names)), names, rotation=15, fontsize=8)
    ax.set_ylabel("test accuracy (sanitized inputs)")
    low = min(min(means) - max(sds) - 0.02, majority - 0.02)
    ax.set_ylim(low, max(means) + max(sds) + 0.02)
    ax.set_title(
        f"SST-2, 200 public texts, same per-user epsilon: server vs nodes ({len(rows) // len(names)} seeds)", fontsize=9
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "accuracy_by_strategy.png", dpi=130)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work", default="/tmp/bench_strategies")
    parser.add_argument("--out", default="")
    parser.add_argument("--docs", default="")
    parser.add_argument("--no-ceilings", action="store_true", help="skip the noise-free runs")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    work = Path(args.work)
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        for name, keys in VARIANTS.items():
            run_name = f"{name.replace(', ', '-')}-seed{seed}"
            row = {"variant": name, "seed": seed, **one_run(keys, seed, args.rounds, work, run_name)}
            print(
                f"{name:24s} seed {seed}: accuracy {row['accuracy']:.4f} (public-only "
                f"{row['public_only_accuracy']}) in {row['wall_seconds']} s",
                flush=True,
            )
            if not args.no_ceilings:  # the same variant without noise: what this recipe can reach at all
                clear = {**keys, "sentence-mechanism": "none", "label-mechanism": "none", "sentence-options": ""}
                row["noise_free_accuracy"] = one_run(clear, seed, args.rounds, work, run_name + "-clear")["accuracy"]
            rows.append(row)
    summary: dict[str, dict[str, Any]] = {}
    for name in VARIANTS:
        mine = [r for r in rows if r["variant"] == name]
        acc = [r["accuracy"] for r in mine]
        gains = [r["accuracy"] - r["public_only_accuracy"] for r in mine]
        summary[name] = {
            "accuracy_mean": statistics.fmean(acc),
            "accuracy_sd": statistics.stdev(acc) if len(acc) > 1 else float("nan"),
            "public_only_mean": statistics.fmean(r["public_only_accuracy"] for r in mine),
            "noise_free_mean": statistics.fmean(r.get("noise_free_accuracy", float("nan")) for r in mine),
            **paired(gains),
            "epsilon": mine[0]["epsilon_per_user"],
            "same_epsilon_every_seed": len({r["epsilon_per_user"] for r in mine}) == 1,
            "wall_mean": statistics.fmean(r["wall_seconds"] for r in mine),
        }
    script = "SANITAS_DATA_DIR=../shared/data python benchmarks/bench_strategies.py"
    command = f"{script} --seeds {args.seeds} --rounds {args.rounds}"
    result = {"benchmark": "strategies", **run_header(), "command": command, "runs": rows, "summary": summary}
    if args.docs:
        write_docs(Path(args.docs), rows, summary, command + f" --docs {args.docs}")
    emit(result, args.out)
    if any(math.isnan(s["accuracy_sd"]) for s in summary.values()):
        print("(one seed: no error bars)")


if __name__ == "__main__":
    main()
