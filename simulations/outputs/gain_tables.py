"""What the private users add, as Markdown and a figure: one comparison's gain over the public-only line.

``sanitas compare`` writes ``gain_over_public.md`` and ``gain_over_public.png`` beside ``compare.csv`` from
these (every comparison, a user's own included); ``docs/results/federation-gain/tables.py`` builds the
committed tables of several comparisons from them. Rows are ``compare.csv``'s, read as text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Series shown, in order, with their names in the tables.
SERIES = {
    "local-ldp-on-device": "local DP, on-device inference",
    "local-ldp": "local DP, server-side inference",
    "local-shuffled-on-device": "local DP + shuffler, on-device inference (central epsilon, what-if)",
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
    p = row.get("gain_over_public_p")
    text = {"true": "yes", "false": "**no: adds nothing over the public data**"}.get(adds or "", "")
    return f"{text} (p {float(p):.3f})" if text and p not in ("", None) else text


def with_shuffled_on_device(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """``rows`` with the ``local-shuffled-on-device`` points of a comparison that did not write them: per
    whole-record epsilon, ``local-shuffled``'s epsilon and delta with ``local-ldp-on-device``'s accuracy and gains
    (the same runs; ``derived`` marks them). A comparison that wrote the series is returned as it is."""
    if any(r["series"] == "local-shuffled-on-device" for r in rows):
        return rows
    shuffled = {r["value"]: r for r in rows if r["series"] == "local-shuffled"}
    derived = []
    for r in rows:
        figure = shuffled.get(r["value"]) if r["series"] == "local-ldp-on-device" else None
        if figure and figure.get("epsilon"):
            derived.append(
                {**r, "series": "local-shuffled-on-device", "epsilon": figure["epsilon"], "delta": figure["delta"]}
                | {"derived": "true"}
            )
    return rows + derived


def _recipes(doc: dict[str, Any]) -> str:
    """The recipes compare chose on public data: per seed (``recipe_by_seed``), or one for every seed (the
    ``label_share`` and ``map_dim`` of comparisons that chose them on the config's seed)."""
    by_seed = doc.get("recipe_by_seed")
    if not by_seed:
        return (
            f"label share and map-dim per local epsilon (chosen on the config seed's public data): "
            f"{doc.get('label_share')}, {doc.get('map_dim')}"
        )

    def cell(t: str, r: dict[str, Any]) -> str:
        cohort = f" (cohorts: {r['cohort_map_dim']}, {r['class_means_covariance']})" if r.get("cohort_map_dim") else ""
        fallback = " PUBLIC-ONLY FALLBACK" if r.get("fallback") else ""
        return f"{t} -> {r['label_share']:g} / {r['map_dim']}{cohort}{fallback}"

    per_seed = "; ".join(
        f"seed {seed}: " + ", ".join(cell(t, r) for t, r in recipes.items()) for seed, recipes in by_seed.items()
    )
    return f"label share / map-dim per local epsilon, chosen on each seed's own public draw: {per_seed}"


def _epsilon(series: str, r: dict[str, str]) -> str:
    """The per-user epsilon cell: the planned value, and the (epsilon, delta) accounted where it is another."""
    if series == "non-private":
        return f"none (map-dim {r['value']})" if r.get("parameter") == "map-dim" else "none"
    eps = f"{float(r['value']):g}"
    if (series.startswith("central") or series == "local-shuffled-on-device") and r["epsilon"]:
        eps += f" ({float(r['epsilon']):.3g}, {float(r['delta']):.2g})"
    return eps + (" (derived)" if r.get("derived") else "")


def table(name: str, title: str, rows: list[dict[str, str]], doc: dict[str, Any]) -> str:
    """One comparison's Markdown table (with the noise-free ceiling column where the comparison recorded one)."""
    public = next((r["public_documents"] for r in rows if r.get("public_documents")), "")
    users = doc.get("users_by_seed", {})
    ceiling = any(r.get("noise_free_ceiling_accuracy") for r in rows)
    out = [
        f"### {title} (`{name}`)\n",
        f"{public} public documents; {min(users.values()) if users else '?'}-{max(users.values()) if users else '?'} "
        f"private users per seed; central delta {doc.get('central_delta', 0):.3g}; {_recipes(doc)}.\n",
        "| series | per-user epsilon | test inputs | accuracy | public-only | gain over public (paired) | n | beats "
        "public-only (one-sided paired t-test, p < 0.05) |"
        + (" noise-free ceiling (its gain over public) |" if ceiling else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|" if ceiling else ""),
    ]
    for series, label in SERIES.items():
        for r in sorted((r for r in rows if r["series"] == series), key=lambda r: float(r["epsilon"] or 0)):
            cell = ""
            if ceiling:
                gain = _f(r.get("noise_free_ceiling_gain_over_public"), sign=True)
                cell = f" {_f(r.get('noise_free_ceiling_accuracy'))}{f' ({gain})' if gain else ''} |"
            accuracy = _pm(r["accuracy_mean"], r["accuracy_sd"])
            out.append(
                f"| {label} | {_epsilon(series, r)} | {r['test_inputs']} | {accuracy} | "
                f"{_f(r['public_only_accuracy'])} | {_pm(r['gain_over_public'], r['gain_over_public_sd'], sign=True)} "
                f"| {r['n']} | {_verdict(r)} |{cell}"
            )
    return "\n".join(out) + "\n"


def plot(found: list[tuple[str, str, list[dict[str, str]]]], path: Path) -> None:
    """The gain over public-only against the per-user epsilon, one panel per comparison."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, max(1, len(found)))
    rows_n = (len(found) + cols - 1) // cols
    fig, axes = plt.subplots(
        rows_n, cols, figsize=(max(9.0, 5.0 * cols), 3.6 * rows_n + (1.0 if cols < 3 else 0.0)), squeeze=False
    )
    styles = {
        "local-ldp-on-device": ("P", "tab:blue"),
        "local-ldp": ("o", "tab:cyan"),
        "local-shuffled-on-device": ("X", "tab:green"),
        "central-user": ("^", "tab:red"),
        "central-user-encoder": ("D", "tab:purple"),
    }
    for ax, (_, title, rows) in zip(axes.flat, found, strict=False):
        seeds = max((int(r["n"]) for r in rows if r.get("n")), default=0)
        for series, (marker, color) in styles.items():
            pts = sorted(
                (
                    (float(r["epsilon"]), float(r["gain_over_public"]), float(r["gain_over_public_sd"] or 0), r)
                    for r in rows
                    if r["series"] == series and r["epsilon"] and r["gain_over_public"]
                ),
                key=lambda p: p[:3],  # two points may tie on all three numbers: never compare the rows
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
        ax.set_title(f"{title} ({seeds} seeds)", fontsize=8)
        ax.set_xlabel("per-user epsilon (log)")
        ax.set_ylabel("gain over public-only")
        ax.grid(alpha=0.3, which="both")
    for ax in list(axes.flat)[len(found) :]:
        ax.axis("off")
    legend: dict[str, Any] = {}  # every series drawn in some panel, once
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=3 if cols == 3 else 2, fontsize=8)
    fig.suptitle(
        "What the private users add over the strongest model fitted on the public data alone"
        + (" " if cols == 3 else "\n")
        + "(mean +- sd of the paired gains over the seeds; orange ring: not above it at one-sided p < 0.05)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.06 if cols == 3 else 0.16, 1, 0.95 if cols == 3 else 0.88))
    fig.savefig(path, dpi=110)
    plt.close(fig)
