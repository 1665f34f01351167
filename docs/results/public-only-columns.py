"""The public-only columns of the comparisons committed under docs/results/ before the public-only line.

    python docs/results/public-only-columns.py            # every folder below, as Markdown
    python docs/results/public-only-columns.py FOLDER...  # only these (e.g. encoder-compare-sst2)

Reads each folder's committed ``compare.json`` alone (no reruns) and holds every point against the
model fitted on the public data alone ("public-only"), paired per seed on the same test users:

* central points and the non-private reference (clean test inputs): public-only is the public logistic
  regression's accuracy on the clean test inputs of the row's seed (``public_model_accuracy``);
* local points (sanitized test inputs, server-side inference): public-only is the row's
  ``ceiling_public_rr``, the public classifier's class sent through K-ary randomized response at the
  row's test-release epsilon. In the ``class_rr`` recipe that is what the public model alone achieves
  on the same sanitized inputs (its expected accuracy over the randomized-response draw);
* a comparison that recorded neither says "public-only not recorded (run before the public-only line)".

The gain is the mean +- sample sd over the seeds of (accuracy - public-only) per seed; a point beats
public-only beyond seed noise when a one-sided paired t-test over the seeds' gains (H0: mean gain <= 0)
gives p < 0.05 (with one seed: the gain is > one binomial standard error of its accuracy on the test
users), ``fl.reporting.outcome.adds_over_public``. As a local point's public-only is an expectation over
the randomized-response draw, its mean gain must also exceed that draw's sd on the test users
(``rr_draw_sd``; shown as "RR draw sd"): otherwise a gain of a test user or less (+0.000 +- 0.000 at
12.6) would pass the rule. Prints, per folder,
the table its README quotes; ``docs/results/fair-compare/tables.py`` uses the same functions for tables.md.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from fl.reporting.outcome import adds_over_public

HERE = Path(__file__).resolve().parent
NOT_RECORDED = "public-only not recorded (run before the public-only line)"
#: Test users per dataset, for the one-seed rule (the compare.json files of that time do not record it).
TEST_USERS = {"sst2": 872, "agnews": 1520}


def _value_key(value: Any) -> tuple[int, float]:
    try:
        return (0, float(value))
    except (TypeError, ValueError):
        return (1, 0.0)


def test_users(doc: dict[str, Any]) -> int | None:
    if doc.get("test_users"):
        return int(doc["test_users"])
    config = Path(str(doc.get("config", ""))).stem
    return next((n for name, n in TEST_USERS.items() if config.startswith(name)), None)


def public_only(run: dict[str, Any], doc: dict[str, Any]) -> float | None:
    """The public-only accuracy on the run's own test inputs, or None where the comparison did not record it."""
    if run["series"].startswith("local-"):
        value = run.get("ceiling_public_rr")
    else:
        value = (doc.get("public_model_accuracy") or {}).get(str(run["seed"]))
    return None if value is None or not math.isfinite(float(value)) else float(value)


def rr_draw_sd(run: dict[str, Any], doc: dict[str, Any]) -> float | None:
    """The sd over the randomized-response draw of the public class + RR accuracy on the test users.

    ``ceiling_public_rr`` is that accuracy's expectation, not its value on the run's own draw: a local point
    whose mean gain over it does not exceed this sd (the draw's luck can make it) is not counted as beating
    public-only. A user the public model gets right stays right with probability ``keep``; one it gets
    wrong turns right with probability ``(1 - keep) / (K - 1)``."""
    eps, priors = run.get("test_release_epsilon"), doc.get("test_class_priors")
    acc = (doc.get("public_model_accuracy") or {}).get(str(run["seed"]))
    n = test_users(doc)
    if eps is None or not priors or acc is None or not n or not math.isfinite(float(eps)):
        return None
    k = len(priors)
    keep = 1.0 / (1.0 + (k - 1) * math.exp(-float(eps)))
    turn = (1.0 - keep) / (k - 1)
    return math.sqrt((acc * keep * (1 - keep) + (1 - acc) * turn * (1 - turn)) / n)


def points(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (series, value): accuracy over the seeds, public-only, the paired gain and the flag."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in doc["runs"]:
        if run.get("accuracy") is None:
            continue
        groups.setdefault((run["series"], str(run["value"])), []).append(run)
    out = {}
    for key, runs in sorted(groups.items(), key=lambda kv: (kv[0][0], _value_key(kv[0][1]))):
        runs = sorted(runs, key=lambda r: int(r["seed"]))
        accs = [float(r["accuracy"]) for r in runs]
        pubs = [public_only(r, doc) for r in runs]
        n = len(runs)
        point: dict[str, Any] = {
            "series": key[0],
            "value": runs[0]["value"],
            "epsilon": runs[0].get("epsilon"),
            "delta": runs[0].get("delta"),
            "epsilon_embedding_only": runs[0].get("epsilon_embedding_only"),
            "test_inputs": "sanitized" if key[0].startswith("local-") else "clean",
            "n": n,
            "accuracy_mean": statistics.fmean(accs),
            "accuracy_sd": statistics.stdev(accs) if n > 1 else None,
            "public_only": None,
            "gain": None,
            "gain_sd": None,
            "adds": None,
            "p": None,
            "draw_sd": None,
            "majority": max(doc["test_class_priors"]) if doc.get("test_class_priors") else None,
        }
        if all(p is not None for p in pubs):
            gains = [a - p for a, p in zip(accs, pubs, strict=True)]  # type: ignore[operator]
            point["public_only"] = statistics.fmean(pubs)  # type: ignore[arg-type]
            point["gain"] = statistics.fmean(gains)
            point["gain_sd"] = statistics.stdev(gains) if n > 1 else None
            point["adds"], point["p"] = adds_over_public(gains, point["accuracy_mean"], test_users(doc))
            draws = [rr_draw_sd(r, doc) for r in runs] if key[0].startswith("local-") else []
            if draws and all(d is not None for d in draws):
                point["draw_sd"] = max(draws)  # type: ignore[type-var]
                point["adds"] = bool(point["adds"] and point["gain"] > point["draw_sd"])
        out[key] = point
    return out


def accuracy_cell(p: dict[str, Any]) -> str:
    """Mean +- sd; a point within 0.005 of the majority-class rate is flagged (it learned nothing)."""
    sd = f" +- {p['accuracy_sd']:.3f}" if p["accuracy_sd"] is not None else ""
    majority = p.get("majority")
    flag = ", the majority class: did not learn" if majority and p["accuracy_mean"] <= majority + 0.005 else ""
    return f"{p['accuracy_mean']:.3f}{sd}{flag}"


def public_cells(p: dict[str, Any]) -> tuple[str, str, str]:
    """The public-only, gain and flag cells of a point."""
    if p["public_only"] is None:
        return NOT_RECORDED, "not measured", "not measured"
    sd = f" +- {p['gain_sd']:.3f}" if p["gain_sd"] is not None else ""
    if p["draw_sd"] is not None:
        sd += f" (RR draw sd {p['draw_sd']:.3f})"
    flag = "yes" if p["adds"] else "**no: adds nothing over the public data**"
    return f"{p['public_only']:.3f}", f"{p['gain']:+.3f}{sd}", flag


HEADER = (
    "test inputs | accuracy (mean +- sd over seeds) | public-only on the same inputs | gain over public-only "
    "(paired per seed, mean +- sd) | beats public-only beyond seed noise |"
)


def _row(p: dict[str, Any]) -> str:
    public, gain, flag = public_cells(p)
    return f"{p['test_inputs']} | {accuracy_cell(p)} | {public} | {gain} | {flag} |"


# --- fair-compare: every local point at a whole-record pure epsilon per user -------------------------------

FAIR_SERIES = {
    "local-ldp": "local DP, server-side inference",
    "local-ldp-labels-clear": "local DP, labels in the clear (embedding-only epsilon)",
    "central-user": "central DP, user level",
    "non-private": "non-private, same local pipeline",
}


def fair_table(folder: Path) -> str:
    """A fair-compare comparison's README table: one row per point."""
    doc = json.loads((folder / "compare.json").read_text())
    pts = points(doc)
    shares = doc.get("label_share", {})
    out = [
        "| series | per-user epsilon | " + HEADER,
        "|---|---|---|---|---|---|---|",
    ]
    for series, label in FAIR_SERIES.items():
        for (s, _), p in pts.items():
            if s != series:
                continue
            if series == "non-private":
                eps = "none"
            elif series == "central-user":
                delta = f"{float(p['delta']):.3g}".replace("e-0", "e-")
                eps = f"{float(p['value']):g} ({float(p['epsilon']):.3f}, {delta})"
            elif series == "local-ldp":
                share = shares.get(f"{float(p['value']):g}", "?")
                eps = f"{float(p['value']):g} whole record (label share {share})"
            else:
                eps = f"{float(p['value']):g}"
            out.append(f"| {label} | {eps} | {_row(p)}")
    return "\n".join(out) + "\n"


# --- encoder-compare: the README's settings, with the public-only columns ----------------------------------

ENCODER_LABELS = {
    "encoder-compare-sst2": {
        "local-ldp": "local DP, Purkayastha epsilon1 = {v}, supervised public map m' = 2, labels in the clear",
        "central-user": "central DP, user level, head only (FedAdam, 50 rounds, ~1,000 users a round)",
        "central-user-encoder": "central DP, user level, head + LoRA adapters of the top 2 layers",
        "non-private": "non-private: the local pipeline without noise on the public-tuned encoder",
    },
    "encoder-compare-sst2-frozen": {
        "local-ldp": "local DP, Purkayastha epsilon1 = {v}, supervised public map m' = 2, labels in the clear",
        "central-user": "central DP, user level, head only (FedAdam, 50 rounds, ~1,000 users a round, z = 0.824)",
        "central-user-encoder": "central DP, user level, head + LoRA adapters (rank 8) of the top 2 layers, same noise",
        "non-private": "non-private: the local pipeline without noise on the frozen encoder",
    },
    "encoder-compare-agnews": {
        "local-ldp": "local DP, Purkayastha epsilon1 = {v}, supervised public map m' = 4, labels in the clear",
        "central-user": "central DP, user level, head only (FedAdam, 50 rounds, ~500 users a round, q = 0.11)",
        "non-private": "non-private: the same local pipeline without noise",
    },
    "user-central-sst2/compare": {
        "local-ldp": "local DP, epsilon1 = {v}",
        "central-user": "central DP, user level (no public data: public-fraction = 0)",
        "non-private": "non-private: the local pipeline without noise",
    },
}


def _delta(value: Any) -> str:
    return f"{float(value):.0e}".replace("e-0", "e-")


def encoder_table(folder: Path, labels: dict[str, str]) -> str:
    """An encoder-compare README table: setting, per-user privacy, then the public-only columns."""
    doc = json.loads((folder / "compare.json").read_text())
    pts = points(doc)
    out = [
        "| setting | per-user privacy | " + HEADER,
        "|---|---|---|---|---|---|---|",
    ]
    for series, label in labels.items():
        first = True
        for (s, _), p in pts.items():
            if s != series:
                continue
            if series == "local-ldp":
                v = f"{float(p['value']):g}"
                text = label.format(v=v) if first else f"local DP, epsilon1 = {v}"
                privacy = f"pure {float(p['epsilon_embedding_only']):.2f} (embedding)"
            elif series == "non-private":
                text, privacy = label, "none"
            else:
                text = label if first else "same"
                privacy = f"({float(p['epsilon']):.2f}, {_delta(p['delta'])})"
            first = False
            out.append(f"| {text} | {privacy} | {_row(p)}")
    return "\n".join(out) + "\n"


FAIR = ("fair-compare/fair-sst2", "fair-compare/fair-sst2-imdb-public", "fair-compare/fair-agnews")


def main() -> None:
    wanted = sys.argv[1:] or [*FAIR, *ENCODER_LABELS]
    for name in wanted:
        folder = HERE / name
        print(f"### {name}\n")
        if name in ENCODER_LABELS:
            print(encoder_table(folder, ENCODER_LABELS[name]))
        else:
            print(fair_table(folder))


if __name__ == "__main__":
    main()
