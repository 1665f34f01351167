"""What the private users add at the word, document and label levels, per unit and per user, as Markdown.

``sanitas compare`` writes ``gain_over_public.md`` with :func:`table` instead of
:func:`simulations.outputs.gain_tables.table` when its config releases at one of those levels
(:mod:`simulations.drivers.compare_levels`): every local point at its mechanism's own unit and at the per-user
whole-record figure that unit implies, beside central DP at per-user epsilons. Rows are ``compare.csv``'s, read as
text; ``doc`` is compare.json.
"""

from __future__ import annotations

from typing import Any

from simulations.outputs.gain_tables import _f, _pm, _verdict

#: Series shown, in order, with their names in the table.
SERIES = {
    "local-ldp-on-device": "local DP, on-device inference",
    "local-ldp": "local DP, server-side inference",
    "local-ldp-labels-clear-on-device": "local DP, labels in the clear, on-device inference",
    "local-ldp-labels-clear": "local DP, labels in the clear, server-side inference",
    "local-shuffled-on-device": "local DP + shuffler, on-device inference (central epsilon, what-if)",
    "central-user": "central DP (user level), head",
    "central-user-encoder": "central DP (user level), LoRA encoder + head",
    "non-private": "non-private, same local pipeline",
}


def _per_user(series: str, r: dict[str, str], cap: float) -> str:
    """The per-user cell: the maximum over the users (median, p90), vacuous above ``cap``; a central point's target
    and its accounted (epsilon, delta); none for the references."""
    if series == "non-private":
        return "none"
    if series.startswith("central"):
        eps = f"{float(r['value']):g}"
        return eps + (f" ({float(r['epsilon']):.3g}, {float(r['delta']):.2g})" if r.get("epsilon") else "")
    if series == "local-shuffled-on-device":
        if not r.get("epsilon"):
            return "none (no amplification)"
        return f"({float(r['epsilon']):.3g}, {float(r['delta']):.2g})"
    if not r.get("per_user_epsilon") or r["per_user_epsilon"] == "inf":
        return "unbounded (" + ("labels" if "clear" in r.get("labels", "") else "embedding") + " in the clear)"
    eps = float(r["per_user_epsilon"])
    cell = f"{eps:.4g} (median {float(r['per_user_epsilon_median']):.4g}, p90 {float(r['per_user_epsilon_p90']):.4g})"
    return cell + (f" **vacuous (> {cap:g})**" if eps > cap else "")


def _per_unit(series: str, r: dict[str, str]) -> str:
    if not series.startswith("local") or not r.get("unit_guarantee"):
        return ""
    return str(r["unit_guarantee"])


def _units_line(doc: dict[str, Any]) -> str:
    """Each seed's units per user: median, p90 and maximum over the users who release."""
    level = doc["level"]
    cells = [
        f"seed {s}: median {d['median']:g}, p90 {d['p90']:g}, max {d['max']} over {d['users']} users"
        for s, d in level["units_by_seed"].items()
    ]
    return f"{level['unit']}s per user ({'; '.join(cells)})"


def table(name: str, title: str, rows: list[dict[str, str]], doc: dict[str, Any]) -> str:
    """One comparison's Markdown table at its level: per series and point, the guarantee per unit, per user, the
    accuracy, the public-only line, the paired gain and its test, and the noise-free ceiling."""
    level = doc["level"]
    cap = float(level["per_user_cap"])
    users = doc.get("users_by_seed", {})
    public = next((r["public_documents"] for r in rows if r.get("public_documents")), "")
    central_at = level.get("central_at_per_user") or []
    central = (
        f"central points at the per-user figures {', '.join(f'{t:g}' for t in central_at)} and the grid"
        if central_at
        else f"no local point's per-user figure is at most {cap:g}, so central points are at the grid only"
    )
    out = [
        f"### {title} (`{name}`)\n",
        f"{level['level']} level: the mechanism's guarantee per {level['unit']}; the per-user figure is group "
        f"privacy over the {_units_line(doc)}, plus the label's epsilon, at the maximum over the users. "
        f"It covers {level['per_user_covers']}. "
        f"{public} public documents; {min(users.values()) if users else '?'}-{max(users.values()) if users else '?'} "
        f"private users per seed; central delta {doc.get('central_delta', 0):.3g}; {central}.\n",
        "| series | labels | guarantee per unit | per-user epsilon: max over users (median, p90) | test inputs | "
        "accuracy | public-only | gain over public (paired) | n | beats public-only (one-sided paired t-test, "
        "p < 0.05) | noise-free ceiling (its gain over public) | per-user figure checked |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for series, label in SERIES.items():
        for r in sorted((r for r in rows if r["series"] == series), key=lambda r: float(r["value"] or 0)):
            labels = r.get("labels", "") if series.startswith("local") else ""
            gain = _f(r.get("noise_free_ceiling_gain_over_public"), sign=True)
            ceiling = f"{_f(r.get('noise_free_ceiling_accuracy'))}{f' ({gain})' if gain else ''}"
            out.append(
                f"| {label} | {labels} | {_per_unit(series, r)} | {_per_user(series, r, cap)} | {r['test_inputs']} | "
                f"{_pm(r['accuracy_mean'], r['accuracy_sd'])} | {_f(r['public_only_accuracy'])} | "
                f"{_pm(r['gain_over_public'], r['gain_over_public_sd'], sign=True)} | {r['n']} | {_verdict(r)} | "
                f"{ceiling} | {r.get('per_user_check', '')} |"
            )
    return "\n".join(out) + "\n"
