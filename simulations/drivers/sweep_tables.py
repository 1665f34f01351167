"""What a sweep writes and prints: one row per run (``sweep.csv`` / ``.jsonl``), one per grid point with mean
and sd over seeds (``sweep_summary``), the accuracy-vs-epsilon plot and the final table of findings. Part of
:mod:`simulations.drivers.sweep`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulations.drivers.grid import EPSILON_KEYS, SEED_KEYS, Run, format_value, grid_keys, point_keys
from simulations.outputs import aggregate as agg
from simulations.outputs.writers import columns_of, pyplot, read_json, save_figure, text_cell, write_csv, write_jsonl

#: Metric columns of ``sweep.csv`` / ``sweep.jsonl``, after the grid keys.
#: ``epsilon`` is the mechanism's own per-unit epsilon (per release, per word or per sentence in a
#: document); ``max_user_pure_epsilon_embedding`` the ledger's largest per-user pure-LDP total over
#: every embedding release a user made (re-draws, test releases and every word or sentence included),
#: ``max_user_pure_epsilon_total`` the same with the label channel added (empty when labels are
#: released in the clear), ``delta_total`` the ledger's composed per-user delta beside them (0 for
#: pure mechanisms; 1 means the (epsilon, delta) figure is vacuous). All are empty when
#: ``ldp_guarantee_holds`` is false: such a run has no guarantee to report. ``evaluation_covered``
#: is false for every run (``fl.accounting.scope``).
METRIC_COLUMNS: tuple[str, ...] = (
    "status",
    "accuracy",
    "macro_f1",
    "best_accuracy",
    "clean_accuracy",
    "public_only_accuracy",
    "public_only_models",
    "gain_over_public",
    "public_only_clean_accuracy",
    "public_only_clean_models",
    "gain_over_public_clean",
    "test_inputs",
    "public_documents",
    "level",
    "epsilon",
    "sentence_epsilon",
    "max_user_pure_epsilon_embedding",
    "max_user_pure_epsilon_total",
    "delta_total",
    "label_protected",
    "random_guess_f1",
    "ldp_guarantee_holds",
    "evaluation_covered",
    "majority_class_rate",
    "training_moved",
    "wall_seconds",
    "process_seconds",
    "point",
    "run_name",
    "results_folder",
    "error",
)
# Word-level runs: the per-document guarantee (median-length document) and the rewrite's quality.
WORD_COLUMNS: tuple[str, ...] = (
    "pure_ldp_per_word",
    "word_delta",
    "words_median",
    "document_epsilon_median",
    "document_delta_median",
    "document_epsilon_longest",
    "document_delta_longest",
    "N_w",
    "S_w_median",
    "rouge1_f",
    "bleu",
)
#: Columns of ``sweep_summary.csv`` averaged over seeds (``<column>_mean``, ``<column>_sd``).
STAT_COLUMNS = (
    "accuracy",
    "macro_f1",
    "clean_accuracy",
    "best_accuracy",
    "N_w",
    "public_only_accuracy",
    "gain_over_public",
    "public_only_clean_accuracy",
    "gain_over_public_clean",
)
#: Privacy columns, the same for every seed of a point: recorded once (the largest when seeds disagree).
SEED_FREE_COLUMNS = (
    "epsilon",
    "sentence_epsilon",
    "max_user_pure_epsilon_embedding",
    "max_user_pure_epsilon_total",
    "delta_total",
    "pure_ldp_per_word",
    "word_delta",
    "document_epsilon_median",
    "document_delta_median",
    "document_epsilon_longest",
    "document_delta_longest",
)
#: Descriptive columns of a point, from its first finished run (checked equal across seeds).
POINT_COLUMNS = ("level", "label_protected", "ldp_guarantee_holds", "evaluation_covered")


def collect_row(run: Run, sweep_dir: Path, keys: Sequence[str]) -> dict[str, Any]:
    """One table row from ``<sweep_dir>/<run>/summary.json`` and ``logs/<run>.status.json``.

    ``status`` is ``ok`` (summary present), ``failed`` (the status file says so) or ``pending``.
    """
    row: dict[str, Any] = {k: run.values.get(k) for k in keys}
    row.update(dict.fromkeys(METRIC_COLUMNS))
    folder = sweep_dir / run.name
    status = read_json(sweep_dir / "logs" / f"{run.name}.status.json") or {}
    summary = read_json(folder / "summary.json")
    row.update(
        point=run.point, run_name=run.name, results_folder=str(folder), process_seconds=status.get("process_seconds")
    )
    if summary is None:
        row["status"] = "failed" if status.get("status") == "failed" else "pending"
        row["error"] = status.get("error")
        return row
    final = summary.get("final") or {}
    guarantee = summary.get("guarantee") or {}
    sentence = guarantee.get("sentence") or {}
    word = guarantee.get("word")
    document = guarantee.get("document")
    holds = summary.get("ldp_guarantee_holds") is True  # leaky and central runs have no local guarantee
    scored = summary.get("outcome") or {}
    on_device = scored.get("on_device") or {}
    privacy = (summary.get("privacy") or {}) if holds else {}
    row.update(
        status="ok",
        accuracy=final.get("accuracy"),
        macro_f1=final.get("macro_f1"),
        best_accuracy=summary.get("best_accuracy"),
        clean_accuracy=final.get("clean_accuracy"),
        # The strongest model fitted on the public data alone, on the same test inputs, and every one scored
        # there by name (fl.reporting.outcome.against_public).
        public_only_accuracy=scored.get("public_only_accuracy"),
        public_only_models=scored.get("public_only_models") or None,
        gain_over_public=scored.get("gain_over_public"),
        public_only_clean_accuracy=on_device.get("public_only_accuracy"),
        public_only_clean_models=on_device.get("public_only_models") or None,
        gain_over_public_clean=on_device.get("gain_over_public"),
        test_inputs=scored.get("test_inputs"),
        public_documents=((summary.get("data") or {}).get("public") or {}).get("documents"),
        level="word" if word else "document" if document else "sentence",
        epsilon=(word or document or sentence).get("epsilon") if holds else None,
        sentence_epsilon=None if word or document or not holds else sentence.get("epsilon"),
        max_user_pure_epsilon_embedding=privacy.get("epsilon_ldp"),
        max_user_pure_epsilon_total=privacy.get("epsilon_total") if privacy.get("label_protected") else None,
        delta_total=privacy.get("delta_total"),
        label_protected=(summary.get("privacy") or {}).get("label_protected"),
        random_guess_f1=final.get("random_guess_f1"),
        dataset=row.get("dataset") or summary.get("dataset"),
        ldp_guarantee_holds=summary.get("ldp_guarantee_holds"),
        evaluation_covered=summary.get("evaluation_covered", False),
        majority_class_rate=(summary.get("outcome") or {}).get("majority_class_rate"),
        training_moved=(summary.get("outcome") or {}).get("training_moved"),
        wall_seconds=summary.get("wall_seconds"),
        results_folder=summary.get("results_folder", str(folder)),
    )
    if word and holds:
        row.update(_word_columns(summary))
    if document and holds:
        level = ((summary.get("privacy") or {}).get("document_level")) or {}
        row.update(
            document_mechanism=level.get("mechanism"),
            num_projections=level.get("num_projections"),
            sentences_median=level.get("median_sentences_per_document"),
            document_epsilon_median=(level.get("per_document_median") or {}).get("epsilon"),
            document_epsilon_longest=(level.get("per_document_longest") or {}).get("epsilon"),
        )
    return row


def _word_columns(summary: Mapping[str, Any]) -> dict[str, Any]:
    level = ((summary.get("privacy") or {}).get("word_level")) or {}
    quality = summary.get("rewrite_quality") or {}
    median, longest = level.get("per_document_median") or {}, level.get("per_document_longest") or {}
    return {
        "pure_ldp_per_word": (level.get("per_word") or {}).get("pure_ldp"),
        "word_delta": (level.get("per_word") or {}).get("delta"),
        "words_median": level.get("median_words_per_document"),
        "document_epsilon_median": median.get("pure_ldp"),
        "document_delta_median": median.get("delta"),
        "document_epsilon_longest": longest.get("pure_ldp"),
        "document_delta_longest": longest.get("delta"),
        "N_w": quality.get("N_w"),
        "S_w_median": (quality.get("support") or {}).get("S_w_median"),
        "rouge1_f": quality.get("rouge1_f"),
        "bleu": quality.get("bleu"),
    }


def write_tables(rows: Sequence[Mapping[str, Any]], sweep_dir: Path, stem: str = "sweep") -> tuple[Path, Path]:
    """Write ``<stem>.csv`` and ``<stem>.jsonl`` (``None`` is an empty cell / ``null``)."""
    fields = columns_of(rows) or list(METRIC_COLUMNS)
    csv_path, jsonl_path = sweep_dir / f"{stem}.csv", sweep_dir / f"{stem}.jsonl"
    write_csv(csv_path, rows, fields, cell=text_cell)
    write_jsonl(jsonl_path, rows)
    return csv_path, jsonl_path


def _adds(done: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``adds_over_public`` (and ``_clean``): whether the point's paired gains over the public-only line (per
    seed, over the strongest public-only model) beat it beyond seed noise, and ``gain_over_public_p`` (and
    ``gain_over_public_clean_p``) the one-sided paired t-test's p-value that says so (``None`` with one seed:
    the binomial rule; :func:`fl.reporting.outcome.adds_over_public`)."""
    from fl.reporting.outcome import adds_over_public

    out = {}
    for suffix, acc in (("", "accuracy"), ("_clean", "clean_accuracy")):
        mean, _, _ = agg.mean_sd(m.get(acc) for m in done)
        adds, p = adds_over_public([m.get(f"gain_over_public{suffix}") for m in done], mean, None)
        out[f"adds_over_public{suffix}"], out[f"gain_over_public{suffix}_p"] = adds, p
    return out


def summarize(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """One row per grid point (the rows' ``point``, else their run name), in first-seen order.

    ``keys`` are the point's grid keys (:func:`point_keys`). Over the point's finished runs
    (status ``ok``): ``n``, ``seeds``, ``one_seed`` (n == 1), ``<column>_mean`` and ``<column>_sd``
    (sample sd, ddof = 1; ``None`` when n < 2) of :data:`STAT_COLUMNS` and of ``wall_seconds``;
    :data:`SEED_FREE_COLUMNS` and :data:`POINT_COLUMNS` once, from the first finished run. When
    the seeds disagree on a privacy column (e.g. a seeded subsample with longer documents), the
    point gets ``epsilons_differ`` true and that column the largest value (the guarantee every
    seed's run meets); ``differs_across_seeds`` names the columns that disagree. ``status``: ``ok``
    (every planned run finished), ``partial``, ``failed`` (none finished, one failed) or ``pending``.
    """
    points = []
    for point, members in agg.group(rows, lambda r: r.get("point") or r.get("run_name")).items():
        done = [m for m in members if m.get("status") == "ok"]
        first = (done or members)[0]
        failed = any(m.get("status") == "failed" for m in members)
        status = "ok" if len(done) == len(members) else "partial" if done else "failed" if failed else "pending"
        present = [c for c in SEED_FREE_COLUMNS if any(m.get(c) is not None for m in done)]
        differ = agg.differing(done, [*present, *POINT_COLUMNS]) if done else []
        privacy = {c: first.get(c) for c in SEED_FREE_COLUMNS if c in present or c in METRIC_COLUMNS}
        majorities = agg.finite(m.get("majority_class_rate") for m in done)
        moved = [m.get("training_moved") for m in done if m.get("training_moved") is not None]
        for c in differ:
            if c in privacy:
                values = agg.finite(m.get(c) for m in done)
                privacy[c] = max(values) if values else None
        points.append(
            {
                **{k: first.get(k) for k in keys},
                "point": point,
                "status": status,
                "n": len(done),
                "planned": len(members),
                "one_seed": len(done) == 1,
                "seeds": " ".join(str(m["seed"]) for m in done if m.get("seed") is not None),
                **agg.stat_columns(done, STAT_COLUMNS),
                **privacy,
                "epsilons_differ": any(c in SEED_FREE_COLUMNS for c in differ),
                "differs_across_seeds": " ".join(differ),
                **{c: first.get(c) for c in POINT_COLUMNS},
                # The test split's majority-class rate (the largest over the seeds' splits) and whether
                # every run's scores moved over its rounds: what "learned nothing" is judged by.
                "majority_class_rate": max(majorities) if majorities else None,
                "training_moved": all(moved) if moved else None,
                **_adds(done),
                **agg.stat_columns(done, ["wall_seconds"]),
                "runs": " ".join(str(m.get("run_name")) for m in members),
            }
        )
    return points


def plot_groups(
    points: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> tuple[dict[str, list[Mapping[str, Any]]], list[Mapping[str, Any]]]:
    """Points (:func:`summarize`) with a finished run, split for the plot: lines on the epsilon
    axis (one per combination of the grid keys other than the epsilons) and the points whose LDP
    guarantee does not hold, which never enter the epsilon axis."""
    others = [k for k in keys if k not in EPSILON_KEYS and k not in SEED_KEYS]
    finished = [p for p in points if p.get("n") and p.get("accuracy_mean") is not None]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for point in finished:
        if point.get("ldp_guarantee_holds") is not False:
            label = ", ".join(f"{k}={format_value(point[k])}" for k in others if point.get(k) is not None) or "runs"
            groups.setdefault(label, []).append(point)
    return groups, [p for p in finished if p.get("ldp_guarantee_holds") is False]


def _annotate_n(ax: Any, xs: Sequence[float], points: Sequence[Mapping[str, Any]]) -> None:
    """``n=k`` beside each point, when the points of one line have different n."""
    if len({p["n"] for p in points}) > 1:
        for x, p in zip(xs, points, strict=True):
            ax.annotate(f"n={p['n']}", (x, p["accuracy_mean"]), xytext=(4, 4), textcoords="offset points", fontsize=6)


def plot_accuracy(points: Sequence[Mapping[str, Any]], keys: Sequence[str], path: Path, title: str = "") -> Path:
    """Final accuracy (mean +- sd over seeds, :func:`summarize`'s points) against epsilon (per
    release, or per word at the word level): one line per combination of the grid keys other than
    the epsilons, n in its legend entry (and beside each point when it varies along the line);
    a point that only one seed reached has a hollow marker and no error bar. Points without a
    finite epsilon (mechanism ``none``) are horizontal dashed lines with a shaded sd band. Points
    whose LDP guarantee does not hold (``map-in = "leaky"``) are never drawn on the epsilon axis:
    they go to a separate panel labelled "not LDP", against their mechanism setting."""
    plt = pyplot()

    groups, not_ldp = plot_groups(points, keys)
    done = [p for group in groups.values() for p in group]
    colors = plt.get_cmap("tab10").colors
    if not_ldp:
        fig, (ax, ax_leak) = plt.subplots(1, 2, figsize=(13, 6.0), gridspec_kw={"width_ratios": [2, 1]}, sharey=True)
        _plot_not_ldp(ax_leak, not_ldp, keys)
    else:
        fig, ax = plt.subplots(figsize=(10, 4.8))
    for i, (label, group) in enumerate(groups.items()):
        color = colors[i % len(colors)]
        private = sorted((p for p in group if p.get("epsilon") is not None), key=lambda p: p["epsilon"])
        if private:
            xs = [p["epsilon"] for p in private]
            agg.draw_errorbars(
                ax,
                xs,
                [p["accuracy_mean"] for p in private],
                [p.get("accuracy_sd") for p in private],
                [p["n"] for p in private],
                color=color,
                label=f"{label} ({agg.n_label(p['n'] for p in private)})",
            )
            _annotate_n(ax, xs, private)
            _draw_public_only(ax, private, color)
        for p in group:
            if p.get("epsilon") is None:
                mean, sd = p["accuracy_mean"], p.get("accuracy_sd")
                spread = f" +- {sd:.3f}" if sd is not None else ", one seed"
                ax.axhline(
                    mean, linestyle="--", color=color, label=f"{label} (no privacy: {mean:.3f}{spread}, n={p['n']})"
                )
                if sd is not None:
                    ax.axhspan(mean - sd, mean + sd, color=color, alpha=0.12, linewidth=0)
    majority = agg.finite(p.get("majority_class_rate") for p in done)
    if majority:  # what a model that learned nothing scores (above 1 / classes where classes are imbalanced)
        from simulations.drivers.findings import mark_not_learned, not_learned

        flat = [p for p in not_learned(done, max(majority)) if p.get("epsilon") is not None]
        mark_not_learned(ax, [p["epsilon"] for p in flat], [p["accuracy_mean"] for p in flat])
        ax.axhline(
            max(majority), color="crimson", linestyle="-.", alpha=0.6, label=f"majority class {max(majority):.3f}"
        )
    if any(p["n"] == 1 for p in done if p.get("epsilon") is not None) or any(p["n"] == 1 for p in not_ldp):
        agg.add_one_seed_note(ax)
    if not done:
        ax.text(
            0.5,
            0.5,
            "no finished LDP runs" if not_ldp else "no finished runs",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
    ax.set_xlabel("epsilon per release (sentence level) or per word (word level), mechanism's own metric")
    ax.set_ylabel("final accuracy (sanitized test), mean +- sd over seeds")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        if not_ldp:  # below the axes: the "not LDP" panel sits on the right
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18))
        else:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: no line hidden
    fig.tight_layout()
    save_figure(fig, path)
    return path


def _draw_public_only(ax: Any, points: Sequence[Mapping[str, Any]], color: Any) -> None:
    """Beside a line of points, the model fitted on the public data alone on the same test inputs (dotted),
    and a ring around each point that does not beat it beyond seed noise (``adds_over_public``)."""
    public = [(p["epsilon"], p["public_only_accuracy_mean"]) for p in points if p.get("public_only_accuracy_mean")]
    if public:
        ax.plot(*zip(*public, strict=True), ":", color=color, alpha=0.7, marker=".", label="public-only, same inputs")
    flat = [(p["epsilon"], p["accuracy_mean"]) for p in points if p.get("adds_over_public") is False]
    if flat:
        ax.scatter(
            *zip(*flat, strict=True), s=150, facecolors="none", edgecolors="darkorange", linewidths=1.5, zorder=6
        )


def _plot_not_ldp(ax: Any, points: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> None:
    """Points without an LDP guarantee, apart: x is the mechanism's epsilon *setting* (a config
    value, not a guarantee), each line labelled by its grid keys; mean +- sd, hollow for one seed."""
    setting = [k for k in EPSILON_KEYS if k in keys]
    groups: dict[str, list[tuple[float, Mapping[str, Any]]]] = {}
    for i, point in enumerate(points):
        x = next((point[k] for k in setting if point.get(k) is not None), i)
        label = (
            ", ".join(
                f"{k}={format_value(point[k])}"
                for k in keys
                if k not in EPSILON_KEYS and k not in SEED_KEYS and point.get(k) is not None
            )
            or "runs"
        )
        groups.setdefault(label, []).append((x, point))
    for marker, (label, members) in zip("xP*Dv^<>", groups.items(), strict=False):
        members.sort(key=lambda m: m[0])
        xs = [x for x, _ in members]
        ps = [p for _, p in members]
        agg.draw_errorbars(
            ax,
            xs,
            [p["accuracy_mean"] for p in ps],
            [p.get("accuracy_sd") for p in ps],
            [p["n"] for p in ps],
            marker=marker,
            linestyle=":",
            markersize=8,
            label=f"{label} ({agg.n_label(p['n'] for p in ps)})",
        )
        _annotate_n(ax, xs, ps)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    ax.set_title(
        "not LDP: no guarantee holds\n(e.g. leaky M1 trained on unsanitized gradients)", fontsize=8, color="crimson"
    )
    ax.set_xlabel("mechanism epsilon setting (not a guarantee)")
    ax.grid(alpha=0.3)


def findings_points(points: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """:func:`summarize`'s finished points as :mod:`simulations.drivers.findings` rows: ``series`` the grid values
    other than the epsilons, ``value`` the epsilon setting (or the mechanism when there is none)."""
    out = []
    for p in points:
        if not p.get("n"):
            continue
        series = ", ".join(
            f"{k}={format_value(p[k])}"
            for k in keys
            if k not in EPSILON_KEYS and k not in SEED_KEYS and p.get(k) is not None
        )
        value = next((format_value(p[k]) for k in EPSILON_KEYS if p.get(k) is not None), "")
        public = {
            "public_only_accuracy": p.get("public_only_accuracy_mean"),
            "gain_over_public": p.get("gain_over_public_mean"),
            "gain_over_public_sd": p.get("gain_over_public_sd"),
            "gain_over_public_p": p.get("gain_over_public_p"),
        }
        out.append({**p, **public, "series": series, "value": value, "name": p.get("point", "")})
    return out


def print_findings(runs: Sequence[Run], sweep_dir: Path) -> None:
    """The sweep's final table (:mod:`simulations.drivers.findings`), from ``sweep_summary.jsonl``'s points."""
    from simulations.drivers.findings import print_findings as show

    keys = point_keys(runs)
    points = findings_points(summarize([collect_row(r, sweep_dir, grid_keys(runs)) for r in runs], keys), keys)
    majority = agg.finite(p.get("majority_class_rate") for p in points)
    show(points, max(majority) if majority else None, f"sweep {sweep_dir.name}", label="point")


def write_outputs(runs: Sequence[Run], sweep_dir: Path, plot: bool = True) -> list[dict[str, Any]]:
    """Collect every run's row; write ``sweep.csv``/``.jsonl``, the per-point summary
    ``sweep_summary.csv``/``.jsonl`` (and the plot); returns the run rows."""
    keys = grid_keys(runs)
    rows = [collect_row(r, sweep_dir, keys) for r in runs]
    write_tables(rows, sweep_dir)
    points = summarize(rows, point_keys(runs))
    write_tables(points, sweep_dir, stem="sweep_summary")
    if plot:
        plot_accuracy(points, point_keys(runs), sweep_dir / "accuracy_vs_epsilon.png", title=f"sweep {sweep_dir.name}")
    return rows
