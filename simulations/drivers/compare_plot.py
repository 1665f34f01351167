"""``compare.png``: accuracy against the per-user epsilon, every series of a comparison with its ceilings, the
non-private and public-only lines and the majority-class rate. Part of :mod:`simulations.drivers.compare`
(:func:`simulations.drivers.compare_outputs.write` draws it)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulations.outputs import aggregate as agg
from simulations.outputs.writers import pyplot, save_figure


def _points(points: Sequence[Mapping[str, Any]], series: str, key: str) -> list[tuple[float, float, float, int]]:
    """(x, mean accuracy, sd or 0, n) of one series, sorted by x; only finite positive x."""
    return sorted(
        (p[key], p["accuracy_mean"], p.get("accuracy_sd") or 0.0, int(p.get("n") or 1))
        for p in points
        if p["series"] == series
        and p.get(key) is not None
        and p.get("accuracy_mean") is not None
        and math.isfinite(p[key])
        and p[key] > 0
    )


STYLES = {
    "local-ldp": ("o", "-", "local DP: per-user pure epsilon0 (embedding + label)"),
    "local-ldp-on-device": ("P", "-", "local DP, on-device inference (clean test input; same epsilon0)"),
    "local-shuffled": ("s", "--", "local DP, shuffled: central epsilon (what-if, needs a shuffler)"),
    "local-shuffled-on-device": ("X", "--", "local DP + shuffler, on-device inference: central epsilon (what-if)"),
    "local-ldp-labels-clear": ("o", "-", "local DP, labels in the clear: embedding-only epsilon"),
    "local-shuffled-labels-clear": ("s", "--", "local DP, labels in the clear, shuffled (embedding only)"),
    "central-user": ("^", "-", "central DP, user level (DP-FedAvg, Poisson users)"),
    "central-user-encoder": ("D", "-", "central DP, user level, encoder trained too (LoRA + head)"),
    "central-node": ("v", ":", "central DP, node level (DP-FedAvg over nodes)"),
}


def _draw(ax: Any, points: Sequence[Mapping[str, Any]], key: str, gray: bool = False) -> None:
    for series, (marker, line, label) in STYLES.items():
        pts = _points(points, series, key)
        if not pts:
            continue
        x, y, sd, n = zip(*pts, strict=True)
        kwargs = {"color": "gray"} if gray else {}
        # a one-seed point: hollow marker, no error bar
        agg.draw_errorbars(ax, x, y, sd, n, marker=marker, linestyle=line, label=label, **kwargs)


def _draw_ceiling(ax: Any, points: Sequence[Mapping[str, Any]], series: str, key: str) -> None:
    """The ceiling beside a local series: the pure-LDP bound of its test release and the achievable public
    class + K-RR point, at the series' x."""
    rows = sorted(
        (p[key], p.get("ceiling_bound"), p.get("ceiling_public_rr"))
        for p in points
        if p["series"] == series and p.get(key) is not None and p.get("ceiling_bound") is not None
    )
    if not rows:
        return
    x, bound, public_rr = zip(*rows, strict=True)
    ax.plot(
        x,
        bound,
        color="black",
        linestyle=(0, (4, 2)),
        marker="_",
        linewidth=1,
        label="ceiling: best classifier of a sanitized input (pure-LDP bound)",
    )
    if all(v is not None for v in public_rr):
        ax.plot(
            x,
            public_rr,
            color="darkgreen",
            linestyle=":",
            marker="x",
            linewidth=1,
            label="achievable: public model's class + K-ary RR",
        )


def _draw_noise_free(ax: Any, points: Sequence[Mapping[str, Any]]) -> None:
    """Each on-device local point's noise-free ceiling (the same recipe at its map-dim, no noise), at its x."""
    rows = sorted(
        (p["epsilon"], p["noise_free_ceiling_accuracy"])
        for p in points
        if p["series"] == "local-ldp-on-device"
        and p.get("epsilon") is not None
        and p.get("noise_free_ceiling_accuracy") is not None
    )
    if rows:
        x, y = zip(*rows, strict=True)
        label = "noise-free ceiling of each on-device point (its recipe, no noise)"
        ax.plot(x, y, color="gray", linestyle="none", marker="_", markersize=12, mew=2, label=label)


def _draw_public_only(ax: Any, points: Sequence[Mapping[str, Any]]) -> None:
    """The model fitted on the public data alone: a line at its accuracy on clean test inputs (what central
    points and on-device inference are held against), its accuracy on the sanitized test inputs beside each
    local point, and a ring around every point that does not beat it beyond seed noise."""
    clean = agg.finite(p.get("public_only_accuracy") for p in points if p.get("test_inputs") == "clean")
    if clean:
        level = sum(clean) / len(clean)
        ax.axhline(
            level, color="darkorange", linestyle="--", linewidth=1.2, label=f"public-only, clean inputs {level:.3f}"
        )
    rows = sorted(
        (p["epsilon"], p["public_only_accuracy"])
        for p in points
        if p["series"] == "local-ldp" and p.get("epsilon") is not None and p.get("public_only_accuracy") is not None
    )
    if rows:
        x, y = zip(*rows, strict=True)
        ax.plot(x, y, color="darkorange", linestyle=":", marker=".", linewidth=1, label="public-only, sanitized inputs")
    flat = [
        (p["epsilon"], p["accuracy_mean"])
        for p in points
        if p.get("adds_over_public") is False and p.get("epsilon") is not None and p.get("accuracy_mean") is not None
    ]
    if flat:
        x, y = zip(*flat, strict=True)
        ax.scatter(
            x,
            y,
            s=160,
            facecolors="none",
            edgecolors="darkorange",
            linewidths=1.5,
            zorder=6,
            label="adds nothing over the public data (paired t-test over seeds: p >= 0.05)",
        )


def plot(
    points: Sequence[Mapping[str, Any]],
    path: Path,
    title: str,
    random_guess: float | None = None,
    baseline: str = "random guess",
) -> Path:
    """Accuracy (mean +- sd over seeds; hollow markers: one seed) against per-user epsilon (log x) for
    local DP (epsilon0 and shuffled) and central DP, with the non-private and baseline lines (the
    majority-class rate) and each local point's ceiling.

    Only whole-record epsilons share the axis; local runs with labels in the clear go to a second
    panel labelled "labels in the clear" (their figure protects the embedding only).
    """
    plt = pyplot()

    clear = [p for p in points if p.get("label_protected") is False and p.get("epsilon_embedding_only") is not None]
    key, what, axis = (
        "epsilon_embedding_only",
        "labels in the clear: embedding-only epsilon,\nnot a whole-record guarantee",
        "epsilon of the embedding alone (log scale)",
    )
    if not clear:  # the labels alone private (compare_levels): at their epsilon per label, no per-user bound
        clear = [p for p in points if p.get("unit") == "label" and p.get("unit_epsilon") is not None]
        key, what, axis = (
            "unit_epsilon",
            "labels alone private, the embedding in the clear:\nno per-user bound",
            "epsilon per label (log scale)",
        )
    if clear:
        fig, (ax, ax_clear) = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
        _draw(ax_clear, clear, key, gray=True)
        ax_clear.set_xscale("log")
        ax_clear.set_title(what, fontsize=8, color="crimson")
        ax_clear.set_xlabel(axis)
        ax_clear.grid(alpha=0.3, which="both")
    else:
        fig, ax = plt.subplots(figsize=(8, 5))
    _draw(ax, points, "epsilon")
    _draw_ceiling(ax, points, "local-ldp", "epsilon")
    if clear and key == "epsilon_embedding_only":
        _draw_ceiling(ax_clear, points, "local-ldp-labels-clear", "epsilon_embedding_only")
    reference = [p for p in points if p["series"] == "non-private" and p.get("accuracy_mean") is not None]
    for p in reference:
        sd = f" +- {p['accuracy_sd']:.3f}" if p.get("accuracy_sd") is not None else ""
        at = f" (map-dim {p['value']})" if p.get("parameter") == "map-dim" and len(reference) > 1 else ""
        ax.axhline(
            p["accuracy_mean"], color="gray", linestyle=":", label=f"non-private{at} {p['accuracy_mean']:.3f}{sd}"
        )
    _draw_noise_free(ax, points)
    _draw_public_only(ax, points)
    if random_guess is not None:
        ax.axhline(random_guess, color="crimson", linestyle="-.", alpha=0.6, label=f"{baseline} {random_guess:.3f}")
        if baseline == "majority class":
            from simulations.drivers.findings import mark_not_learned, not_learned

            flat = [p for p in not_learned(points, random_guess) if p.get("epsilon") is not None]
            mark_not_learned(ax, [p["epsilon"] for p in flat], [p["accuracy_mean"] for p in flat])
    ax.set_xscale("log")
    ax.set_xlabel("per-user epsilon (log scale; delta in compare.csv)")
    ax.set_ylabel("final test accuracy (mean +- sd over seeds)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    save_figure(fig, path)
    return path
