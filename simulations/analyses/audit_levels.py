"""The end-to-end audit at every level, as one table: ``sanitas audit-levels``.

Each row runs ``simulations.analyses.audit_run.audit_run`` (the node's real release code
for a canary user, every round of the config, fresh node secrets per batch) on
a small run config of one level, honest or with a power check, and records
(config, printed per-user epsilon, the pair's own epsilon, eps_LB, trials,
confidence, verdict). Writes ``audit_levels.csv`` and ``audit_levels.md`` under
``--out``. ``--quick`` divides the trials by 10 (a smoke run).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from simulations.analyses.audit_run import audit_run
from simulations.outputs.writers import write_table

SENTENCE = {
    "dataset": "sst2",
    "train-size": 400,
    "test-size": 100,
    "users-per-node": 400,
    "num-server-rounds": 3,
    "map-in": "random",
    "map-dim": 2,
    "sentence-mechanism": "purkayastha",
    "sentence-epsilon": 0.5,
    "label-mechanism": "none",
}
FRESH = {**SENTENCE, "fresh-noise-per-round": True}
LABEL = {**SENTENCE, "label-mechanism": "rr", "label-epsilon": 1.0}
WORD = {
    "dataset": "sst2",
    "train-size": 200,
    "test-size": 50,
    "users-per-node": 200,
    "num-server-rounds": 2,
    "map-in": "identity",
    "sentence-mechanism": "none",
    "word-mechanism": "cmp",
    "word-epsilon": 0.5,
    "word-options": "vocab_size = 2000",
    "word-quality-docs": 0,
    "word-support-words": 0,
    "label-mechanism": "none",
}
DOCUMENT = {
    "dataset": "agnews",
    "train-size": 100,
    "test-size": 30,
    "users-per-node": 400,
    "public-fraction": 0.7,
    "sentence-mechanism": "none",
    "map-in": "identity",
    "document-mechanism": "deepcandidate",
    "document-epsilon": 1.0,
    "recoder-clusters": 2,
    "recoder-epochs": 1,
    "num-candidates": 10,
    "candidate-min-sentences": 2,
    "num-projections": 10,
    "num-server-rounds": 1,
    "fraction-train": 1.0,
    "label-mechanism": "none",
}
TRUNCATION = {**DOCUMENT, "document-mechanism": "truncation"}

#: (row name, config, level, tamper, trials per input)
ROWS: tuple[tuple[str, dict[str, Any], str, str, int], ...] = (
    ("sentence: purkayastha eps1 0.5, m'=2, 3 rounds cached", SENTENCE, "sentence", "", 200_000),
    (
        "sentence: the same, fresh noise every round",
        {**SENTENCE, "fresh-noise-per-round": True},
        "sentence",
        "",
        200_000,
    ),
    ("sentence: 3x epsilon (power check)", SENTENCE, "sentence", "epsilon-3x", 200_000),
    ("sentence: re-draw uncharged (power check)", SENTENCE, "sentence", "redraw-uncharged", 200_000),
    ("sentence: leaky M1 (power check)", SENTENCE, "sentence", "leaky-map", 2_000),
    ("label: rr eps 1 (+ purkayastha)", LABEL, "label", "", 200_000),
    ("label: 3x epsilon (power check)", LABEL, "label", "epsilon-3x", 200_000),
    ("word: cmp eps 0.5, vocab 2000, 2 rounds", WORD, "word", "", 20_000),
    ("word: 3x epsilon (power check)", WORD, "word", "epsilon-3x", 20_000),
    ("word: unsanitized node (power check)", WORD, "word", "unsanitized", 20_000),
    ("document: deepcandidate eps 1", DOCUMENT, "document", "", 20_000),
    ("document: deepcandidate 3x epsilon (power check)", DOCUMENT, "document", "epsilon-3x", 20_000),
    ("document: deepcandidate unsanitized (power check)", DOCUMENT, "document", "unsanitized", 20_000),
    ("document: truncation eps 1", TRUNCATION, "document", "", 20_000),
    ("document: truncation 3x epsilon (power check)", TRUNCATION, "document", "epsilon-3x", 20_000),
    ("document: truncation unsanitized (power check)", TRUNCATION, "document", "unsanitized", 20_000),
)
COLUMNS = (
    "row",
    "level",
    "tamper",
    "printed_epsilon",
    "pair_epsilon",
    "epsilon_lb",
    "trials",
    "confidence",
    "verdict",
    "seconds",
    "pair",
)


def run_rows(quick: bool = False, seed: int = 0) -> list[dict[str, Any]]:
    """Audit every row of ``ROWS`` (``quick``: a tenth of the trials)."""
    out = []
    for name, cfg, level, tamper, trials in ROWS:
        n = max(1_000, trials // 10) if quick else trials
        start = time.perf_counter()
        r = audit_run(cfg, level=level, trials=n, seed=seed, tamper=tamper)
        caught = not r.passed
        verdict = ("caught" if caught else "NOT caught") if tamper else ("passes" if r.passed else "VIOLATION")
        out.append(
            {
                "row": name,
                "level": level,
                "tamper": tamper or "none",
                "printed_epsilon": round(r.printed_epsilon, 4),
                "pair_epsilon": None if r.pair_epsilon is None else round(r.pair_epsilon, 4),
                "epsilon_lb": round(r.epsilon_lb, 4),
                "trials": r.trials,
                "confidence": 1 - r.alpha,
                "verdict": verdict,
                "seconds": round(time.perf_counter() - start, 1),
                "pair": r.pair,
            }
        )
        print(f"{name}: printed {r.printed_epsilon:.4g}, eps_LB {r.epsilon_lb:.4g} ({verdict})", flush=True)
    return out


def write(rows: list[dict[str, Any]], out: Path, command: str) -> tuple[Path, Path]:
    notes = ["", "Pairs:", "", *(f"- {r['row']}: {r['pair']}" for r in rows)]
    return write_table(rows, out, "audit_levels", COLUMNS, command, md_columns=COLUMNS[:-2], notes=notes)
