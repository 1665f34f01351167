"""The tables of docs/results/every-level/README.md, from the comparisons ``run.sh`` wrote.

    python docs/results/every-level/tables.py [RESULTS] --out docs/results/every-level

For each comparison of ``run.sh`` finished in RESULTS (default results/every-level), copies its compare.csv,
compare.json, compare.png and gain_over_public.md under the comparison's name into --out; a comparison RESULTS lacks
is read from its copy in --out (the committed one). Then writes ``levels.md`` and ``levels.csv``: one row per level
and local point (the sentence level's from docs/results/federation-gain/sst2-public200), with the guarantee per unit,
per user (maximum over the users, and whether it is vacuous), the on-device accuracy, the public-only line, the
paired gain and its test, the noise-free ceiling, and central DP at the same per-user epsilon where one ran (and the
best central point of the grid). A comparison found in neither place is listed as not run.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SENTENCE = HERE.parent / "federation-gain" / "sst2-public200"
#: (folder, level, what it is), in the order of the README.
COMPARISONS = (
    ("sst2-words", "word", "SST-2 phrases, CMP word rewrite (GloVe 6B 50d), 200 public texts"),
    ("imdb-documents", "document", "IMDB reviews, DeepCandidate (SentDP), half the reviews public"),
    ("newsgroups-documents", "document", "20 Newsgroups (9 categories), DeepCandidate (SentDP), half public"),
    ("sst2-labels", "label", "SST-2, the quickstart's recipe, labels alone under randomized response"),
)
FILES = ("compare.csv", "compare.json", "compare.png", "gain_over_public.md")
COLUMNS = (
    "comparison",
    "level",
    "unit_epsilon",
    "guarantee_per_unit",
    "per_user_epsilon",
    "per_user_vacuous",
    "labels",
    "accuracy",
    "accuracy_sd",
    "public_only",
    "gain",
    "gain_p",
    "beats_public_only",
    "noise_free_ceiling",
    "central_same_per_user",
    "central_same_per_user_gain",
    "central_best",
)


def _read(folder: Path) -> list[dict[str, str]]:
    with (folder / "compare.csv").open() as f:
        return list(csv.DictReader(f))


def _num(text: str | None) -> float | None:
    return None if text in (None, "") else float(text)


def _central(rows: list[dict[str, str]], per_user: float | None) -> tuple[str, str, str]:
    """Central DP at ``per_user`` (its accuracy and gain, where it ran) and the best central point of the grid."""
    central = [r for r in rows if r["series"] == "central-user"]
    same = next(
        (r for r in central if per_user is not None and abs(float(r["value"]) - float(f"{per_user:.6g}")) < 1e-3), None
    )
    best = max(central, key=lambda r: float(r["accuracy_mean"] or 0), default=None)
    at = f"{float(same['accuracy_mean']):.3f} at {float(same['value']):.3g}" if same else ""
    gain = f"{float(same['gain_over_public']):+.3f}" if same and same.get("gain_over_public") else ""
    top = f"{float(best['accuracy_mean']):.3f} at {float(best['value']):g}" if best else ""
    return at, gain, top


def level_rows(name: str, level: str, rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """One row per local point with the labels protected, on-device inference: both units, beside central DP."""
    out = []
    for r in rows:
        if r["series"] != "local-ldp-on-device":
            continue
        per_user = _num(r.get("per_user_epsilon")) if level != "sentence" else _num(r["epsilon"])
        at, gain, top = _central(rows, per_user)
        out.append(
            {
                "comparison": name,
                "level": level,
                "unit_epsilon": r.get("unit_epsilon") or r["value"],
                "guarantee_per_unit": r.get("unit_guarantee") or "pure LDP per user (one sentence and its label)",
                "per_user_epsilon": f"{per_user:.4g}" if per_user is not None else "",
                "per_user_vacuous": r.get("per_user_vacuous") or "false",
                "labels": r.get("labels") or "randomized response (share chosen on public data)",
                "accuracy": f"{float(r['accuracy_mean']):.3f}",
                "accuracy_sd": f"{float(r['accuracy_sd'] or 0):.3f}",
                "public_only": f"{float(r['public_only_accuracy']):.3f}" if r["public_only_accuracy"] else "",
                "gain": f"{float(r['gain_over_public']):+.3f}" if r["gain_over_public"] else "",
                "gain_p": f"{float(r['gain_over_public_p']):.3f}" if r["gain_over_public_p"] else "",
                "beats_public_only": {"true": "yes", "false": "no"}.get(r["adds_over_public"], ""),
                "noise_free_ceiling": f"{float(r['noise_free_ceiling_accuracy']):.3f}"
                if r["noise_free_ceiling_accuracy"]
                else "",
                "central_same_per_user": at,
                "central_same_per_user_gain": gain,
                "central_best": top,
            }
        )
    return out


def markdown(rows: list[dict[str, str]]) -> str:
    head = (
        "| comparison | level | epsilon per unit | guarantee per unit | per-user epsilon (max over users) | labels | "
        "accuracy (on device) | public-only | gain (p) | beats public-only | noise-free ceiling | central DP at the "
        "same per-user epsilon (gain) | best central point of the grid |"
    )
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        vacuous = " **vacuous**" if r["per_user_vacuous"] == "true" else ""
        lines.append(
            f"| {r['comparison']} | {r['level']} | {r['unit_epsilon']} | {r['guarantee_per_unit']} | "
            f"{r['per_user_epsilon']}{vacuous} | {r['labels']} | {r['accuracy']} +- {r['accuracy_sd']} | "
            f"{r['public_only']} | {r['gain']} ({r['gain_p']}) | {r['beats_public_only']} | {r['noise_free_ceiling']} "
            f"| {r['central_same_per_user'] or ('none (vacuous, above 64)' if vacuous else 'no central run there')}"
            f"{' (' + r['central_same_per_user_gain'] + ')' if r['central_same_per_user_gain'] else ''} | "
            f"{r['central_best']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", default="results/every-level")
    parser.add_argument("--out", default=str(HERE))
    args = parser.parse_args()
    results, out = Path(args.results), Path(args.out)
    found = {}
    for name, _, _ in COMPARISONS:
        folder = next((f for f in (results / name, out / name) if (f / "compare.csv").is_file()), None)
        if folder is None:  # listed as not run in levels.md, never drawn as a result
            print(f"tables.py: no compare.csv for {name} in {results} nor in {out}: listed as not run", file=sys.stderr)
            continue
        found[name] = folder
    if not found:
        sys.exit(f"tables.py: no comparison of run.sh in {results} nor in {out}: nothing written (run run.sh)")
    rows = level_rows("sst2-public200 (federation-gain)", "sentence", _read(SENTENCE))
    missing = [name for name, _, _ in COMPARISONS if name not in found]
    for name, level, _ in COMPARISONS:
        if name not in found:
            continue
        target = out / name
        if found[name].resolve() != target.resolve():
            target.mkdir(parents=True, exist_ok=True)
            for file in FILES:
                shutil.copy2(found[name] / file, target / file)
        rows += level_rows(name, level, _read(target))
        units = json.loads((target / "compare.json").read_text())["level"]["units_by_seed"]
        print(f"{name}: units per user by seed {units}")
    with (out / "levels.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    note = f"\nNot run yet: {', '.join(missing)} (see README.md).\n" if missing else ""
    (out / "levels.md").write_text(markdown(rows) + note)
    print(f"wrote {out / 'levels.md'} and {out / 'levels.csv'} ({len(rows)} points)")


if __name__ == "__main__":
    main()
