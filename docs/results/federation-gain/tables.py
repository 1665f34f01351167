"""The tables and the figure of docs/results/federation-gain/README.md, from the comparisons ``run.sh`` wrote.

    python docs/results/federation-gain/tables.py [RESULTS]   # RESULTS: the folder run.sh wrote into (results)

For each comparison of ``run.sh`` that has finished, copies its compare.csv and compare.json here under the
comparison's name, and writes ``tables.md`` (per point: the test inputs, accuracy, the model fitted on the
public data alone on the same inputs, the gain over it paired per seed, and whether it beats public-only
beyond seed noise) and ``gain_over_public.png`` (the gain against the per-user epsilon, one panel per
comparison, error bars the sd of the paired gains over the seeds).
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: (folder name, what it is), in the order of the README.
COMPARISONS = (
    ("sst2-public200", "SST-2, 200 public texts (whole source groups)"),
    ("sst2-public200-sentences", "SST-2, 200 public texts, one user per review sentence (user-unit = source)"),
    ("sst2-public2000", "SST-2, 2,000 public texts"),
    ("sst2-public25pct", "SST-2, 25% of the training split public (by source)"),
    ("sst2-imdb-public", "SST-2, IMDB sentences as public data"),
    ("agnews-public200", "AG News, 200 public items"),
    ("agnews-public25pct", "AG News, 25% public"),
    ("sst2-public200-lora", "SST-2, 200 public texts, LoRA encoder trained centrally"),
)
#: Series shown, in order, with their names in the tables.
SERIES = {
    "local-ldp-on-device": "local DP, on-device inference",
    "local-ldp": "local DP, server-side inference",
    "central-user": "central DP (user level), head",
    "central-user-encoder": "central DP (user level), LoRA encoder + head",
    "non-private": "non-private, same local pipeline",
}


def _f(value: Any, digits: int = 3, sign: bool = False) -> str:
    if value in ("", None):
        return ""
    return f"{float(value):+.{digits}f}" if sign else f"{float(value):.{digits}f}"


def _pm(mean: Any, sd: Any, sign: bool = False) -> str:
    if mean in ("", None):
        return ""
    return _f(mean, sign=sign) + (f" +- {float(sd):.3f}" if sd not in ("", None) else "")


def _verdict(row: dict[str, str]) -> str:
    adds = row.get("adds_over_public")
    return {"true": "yes", "false": "**no: adds nothing over the public data**"}.get(adds or "", "")


def table(name: str, title: str, rows: list[dict[str, str]], doc: dict[str, Any]) -> str:
    """One comparison's Markdown table."""
    public = next((r["public_documents"] for r in rows if r.get("public_documents")), "")
    users = doc.get("users_by_seed", {})
    out = [
        f"### {title} (`{name}`)\n",
        f"{public} public documents; {min(users.values()) if users else '?'}-{max(users.values()) if users else '?'} "
        f"private users per seed; central delta {doc.get('central_delta', 0):.3g}; label share and map-dim per "
        f"local epsilon (chosen on public data): {doc.get('label_share')}, {doc.get('map_dim')}.\n",
        "| series | per-user epsilon | test inputs | accuracy | public-only | gain over public (paired) | n | beats "
        "public-only beyond seed noise |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for series, label in SERIES.items():
        for r in sorted((r for r in rows if r["series"] == series), key=lambda r: float(r["epsilon"] or 0)):
            eps = "none" if series == "non-private" else f"{float(r['value']):g}"
            if series.startswith("central") and r["epsilon"]:
                eps += f" ({float(r['epsilon']):.3g}, {float(r['delta']):.2g})"
            out.append(
                f"| {label} | {eps} | {r['test_inputs']} | {_pm(r['accuracy_mean'], r['accuracy_sd'])} | "
                f"{_f(r['public_only_accuracy'])} | {_pm(r['gain_over_public'], r['gain_over_public_sd'], sign=True)} "
                f"| {r['n']} | {_verdict(r)} |"
            )
    return "\n".join(out) + "\n"


def plot(found: list[tuple[str, str, list[dict[str, str]]]], path: Path) -> None:
    """The gain over public-only against the per-user epsilon, one panel per comparison."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = 3
    rows_n = (len(found) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(5 * cols, 3.6 * rows_n), squeeze=False)
    styles = {
        "local-ldp-on-device": ("P", "tab:blue"),
        "local-ldp": ("o", "tab:cyan"),
        "central-user": ("^", "tab:red"),
        "central-user-encoder": ("D", "tab:purple"),
    }
    for ax, (_, title, rows) in zip(axes.flat, found, strict=False):
        for series, (marker, color) in styles.items():
            pts = sorted(
                (float(r["epsilon"]), float(r["gain_over_public"]), float(r["gain_over_public_sd"] or 0), r)
                for r in rows
                if r["series"] == series and r["epsilon"] and r["gain_over_public"]
            )
            if not pts:
                continue
            x, y, sd, rs = zip(*pts, strict=True)
            ax.errorbar(x, y, yerr=sd, marker=marker, color=color, capsize=3, label=SERIES[series])
            flat = [(xi, yi) for xi, yi, r in zip(x, y, rs, strict=True) if r.get("adds_over_public") == "false"]
            if flat:
                fx, fy = zip(*flat, strict=True)
                ax.scatter(fx, fy, s=140, facecolors="none", edgecolors="darkorange", linewidths=1.5, zorder=5)
        ax.axhline(0.0, color="darkorange", linestyle="--", linewidth=1)
        ax.set_xscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("per-user epsilon (log)")
        ax.set_ylabel("gain over public-only")
        ax.grid(alpha=0.3, which="both")
    for ax in list(axes.flat)[len(found) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.suptitle(
        "What the private users add over the model fitted on the public data alone (3 seeds, mean +- sd of the "
        "paired gains; orange ring: within seed noise)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    results = Path(sys.argv[1] if len(sys.argv) > 1 else "results")
    parts = ["Written by `python docs/results/federation-gain/tables.py` from the comparisons of `run.sh`.\n"]
    found = []
    for name, title in COMPARISONS:
        folder = results / name
        if not (folder / "compare.csv").is_file():
            parts.append(f"### {title} (`{name}`)\n\nNot run.\n")
            continue
        target = HERE / name
        target.mkdir(exist_ok=True)
        for file in ("compare.csv", "compare.json", "compare.png"):
            shutil.copyfile(folder / file, target / file)
        rows = list(csv.DictReader((folder / "compare.csv").open()))
        doc = json.loads((folder / "compare.json").read_text())
        parts.append(table(name, title, rows, doc))
        found.append((name, title, rows))
    (HERE / "tables.md").write_text("\n".join(parts))
    if found:
        plot(found, HERE / "gain_over_public.png")
    print(f"wrote {HERE / 'tables.md'}" + (f" and {HERE / 'gain_over_public.png'}" if found else ""))


if __name__ == "__main__":
    main()
