"""Re-derive a finished comparison's figures from the per-run rows its ``compare.json`` keeps, without running
anything: the shuffled what-ifs at n = the training reports only, and one public-only line per seed for every
clean-input point (:func:`simulations.drivers.compare_outputs.share_public_line`).

    python -m simulations.drivers.compare_rederive FOLDER [FOLDER ...]

Comparisons written before these two rules counted the test users' sanitized inputs among the shuffled reports
and held central points against their own logistic regression. Every shuffled figure is recomputed only where
the run's recorded figure is reproduced exactly by the bound at n = its private users + its test users (each
user released once, in one round: then the training reports are the private users, ``users_by_seed``); one that
is not (several rounds of fresh noise, a run that recorded no test-user count) is withdrawn (``null``, and
``shuffled_withdrawn`` says why), never guessed. compare.csv, compare.json and compare.png are rewritten in
place; the runs themselves are not needed. Running it twice changes nothing the second time.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simulations.drivers.compare_lines import public_line_fields, share_public_line
from simulations.drivers.compare_outputs import (
    add_noise_free_ceilings,
    aggregate,
    write,
)

#: Why a shuffled figure was withdrawn rather than recomputed.
WITHDRAWN = (
    "the run's shuffled figure is not reproduced by the bound at n = its private users + test users (several "
    "rounds of fresh noise, or no test-user count recorded): its training-report count is not in compare.json, "
    "so the corrected figure is not derived; rerun the comparison for it"
)


def _bound(eps0: float, n: int, delta: float) -> float:
    from fl.accounting import shuffle_amplification

    return float(shuffle_amplification(eps0, n, delta).epsilon)


def _rederive_shuffled(doc: Mapping[str, Any], rows: list[dict[str, Any]]) -> tuple[int, int]:
    """Each shuffled row's figures at n = the training reports (see the module docstring); returns (recomputed,
    withdrawn). A row already marked ``shuffled_over = "training"`` is left as it is."""
    by_seed = {str(k): int(v) for k, v in (doc.get("users_by_seed") or {}).items()}
    ldp = {r["run_name"]: r for r in rows if r["series"].startswith("local-ldp") and not r["series"].endswith("device")}
    done = withdrawn = 0
    for row in rows:
        if not row["series"].startswith("local-shuffled") or row.get("shuffled_over") == "training":
            continue
        source = ldp.get(row["run_name"])
        users = by_seed.get(str(row.get("seed")), doc.get("users"))
        test = row.get("test_users")
        pairs = [("epsilon", "epsilon"), ("epsilon_embedding_only", "epsilon_embedding_only")]
        recorded = [(key, row.get(key), (source or {}).get(src)) for key, src in pairs]
        recorded = [(key, old, eps0) for key, old, eps0 in recorded if old is not None]
        if not recorded:
            continue
        delta = row.get("delta")
        reproduced = (
            source is not None
            and users is not None
            and test is not None
            and delta
            and all(
                eps0 is not None
                and math.isclose(_bound(float(eps0), int(users) + int(test), float(delta)), old, rel_tol=1e-6)
                for _, old, eps0 in recorded
            )
        )
        if reproduced:
            for key, _, eps0 in recorded:
                row[key] = _bound(float(eps0), int(users), float(delta))
            row["shuffled_over"] = "training"
            done += 1
        else:
            for key, _, _ in recorded:
                row[key] = None
            row["shuffled_withdrawn"] = WITHDRAWN
            withdrawn += 1
    return done, withdrawn


def _name_noise_free_models(rows: list[dict[str, Any]]) -> None:
    """A non-private row written before its on-device public-only models were recorded: its recorded line is
    the stronger of the public logistic regression and its server model at its map-dim with no private
    release; where it is not a value another clean row of the seed already names, it is the server model's."""
    named: dict[Any, set[float]] = {}
    for row in rows:
        if row.get("test_inputs") == "clean":
            named.setdefault(row.get("seed"), set()).update((row.get("public_only_models") or {}).values())
    for row in rows:  # a run written before public-only models were named: its one recorded line
        if row.get("test_inputs") == "clean" and not row.get("public_only_models"):
            if row.get("public_only_accuracy") is not None:
                row["public_only_models"] = {"public-only model (not named by this run)": row["public_only_accuracy"]}
    for row in rows:
        if row["series"] == "non-private" and not row.get("on_device_public_only_models"):
            value = row.get("on_device_public_only_accuracy")
            if value is not None and value not in named.get(row.get("seed"), set()):
                row["on_device_public_only_models"] = {"server_model": value}


def borrowed_line(doc: Mapping[str, Any], other: Path) -> dict[str, dict[str, float]]:
    """The public-only models ``other``'s comparison scored per seed, for a comparison ``doc`` on the same public
    draws and test users: checked by the public logistic regression, which both score on each seed (same draw,
    same test users: the same accuracy); ``ValueError`` naming the seed where they differ."""
    theirs = json.loads((other / "compare.json").read_text()).get("public_only_line_by_seed") or {}
    ours: dict[str, float] = {}
    for row in doc.get("runs") or []:
        value = (row.get("public_only_models") or {}).get("logistic_regression")
        if value is not None:
            ours[str(row.get("seed"))] = value
    out = {}
    for seed, line in theirs.items():
        if seed not in ours:
            continue
        if not math.isclose(line["models"].get("logistic_regression", -1.0), ours[seed], abs_tol=1e-9):
            raise ValueError(f"--line-from {other}: seed {seed}'s public logistic regression differs: another draw")
        out[seed] = dict(line["models"])
    return out


def rederive(folder: Path, line_from: Path | None = None) -> str:
    """Rewrite ``folder``'s compare.csv, compare.json and compare.png (see the module docstring); returns a
    one-line account of what changed. ``line_from``: another comparison of the same public draws and test users
    whose public-only models join the line (:func:`borrowed_line`)."""
    path = folder / "compare.json"
    doc = json.loads(path.read_text())
    rows: list[dict[str, Any]] = list(doc.get("runs") or [])
    if not rows:
        raise ValueError(f"{path}: no per-run rows to re-derive from")
    done, withdrawn = _rederive_shuffled(doc, rows)
    _name_noise_free_models(rows)
    line = share_public_line(rows, borrowed_line(doc, line_from) if line_from else None)
    add_noise_free_ceilings(rows)
    extra = {k: v for k, v in doc.items() if k not in ("points", "runs", "random_guess_accuracy")}
    extra.update(public_line_fields(line))
    if line_from:
        extra["public_only_line_from"] = str(line_from)
    extra["rederived"] = (
        "figures re-derived from the runs' rows by python -m simulations.drivers.compare_rederive: shuffled "
        "what-ifs at n = the training reports, one public-only line per seed"
    )
    priors = doc.get("test_class_priors") or []
    majority = max(priors) if priors else doc.get("random_guess_accuracy")
    baseline = "majority class" if priors else "random guess"
    title = f"{Path(str(doc.get('config', folder.name))).stem}: local vs central DP per user (whole record)"
    write(aggregate(rows), folder, title, majority, extra, rows, baseline)
    return f"{folder}: {done} shuffled row(s) recomputed, {withdrawn} withdrawn; public-only line by seed " + ", ".join(
        f"{s} {v['accuracy']:.3f} ({v['model']})" for s, v in line.items()
    )


def main(argv: list[str] | None = None) -> int:
    """The command (see the module docstring; ``--line-from OTHER``: pool OTHER's public-only models of the same
    draws into the line): exit 2 with one line when a folder has no compare.json."""
    args = list(sys.argv[1:] if argv is None else argv)
    line_from = None
    if "--line-from" in args:
        at = args.index("--line-from")
        if at + 1 >= len(args):
            print("compare_rederive: --line-from needs a folder that sanitas compare wrote", file=sys.stderr)
            return 2
        line_from = Path(args[at + 1])
        del args[at : at + 2]
    folders = [Path(a) for a in args]
    missing = [f for f in folders + ([line_from] if line_from else []) if not (f / "compare.json").is_file()]
    if not folders or missing:
        what = f"no compare.json in {str(missing[0])[:120]!r}" if missing else "no folder given"
        print(f"compare_rederive: {what}: give folders that sanitas compare wrote", file=sys.stderr)
        return 2
    for folder in folders:
        try:
            print(rederive(folder, line_from), flush=True)
        except ValueError as err:
            print(f"compare_rederive: {str(err)[:180]}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
