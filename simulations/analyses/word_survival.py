"""How large a per-word epsilon keeps words: ``sanitas word-survival CONFIG``.

For each word mechanism and per-word epsilon, rewrites ``--docs`` test documents
of CONFIG's dataset once (``fl.levels.word.quality.rewrite_quality``: the driver's
diagnostic, noise independent of any run) and records N_w (the fraction of word
tokens left unchanged), ROUGE-1 F1 and the per-word guarantee. No model is
trained, so the grid can reach epsilons far past a reproduction's (where the
downstream accuracy is already at chance) and show where words start to survive.
Writes ``word_survival.csv`` and ``word_survival.md`` into ``--out``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fl import config

MECHANISMS = ("trlaplace", "word_laplace", "word_gaussian")
EPSILONS = (1.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0)
COLUMNS = ("word-mechanism", "word-epsilon", "N_w", "rouge1_f", "word_delta", "documents", "words", "seed")


def rows(
    base: dict[str, Any],
    mechanisms: Sequence[str] = MECHANISMS,
    epsilons: Sequence[float] = EPSILONS,
    docs: int = 200,
    seed: int = 1,
) -> list[dict[str, Any]]:
    """One row per (mechanism, epsilon): N_w and ROUGE-1 of one rewrite of ``docs`` test documents."""
    from tqdm import tqdm  # the rewriting stack is imported here: the command line's help reads the constants

    from fl.levels.spec import LevelSpec
    from fl.levels.word.quality import rewrite_quality
    from fl.levels.word.rewrite import word_mechanism

    out = []
    grid = [(m, e) for m in mechanisms for e in epsilons]
    for mech, eps in tqdm(grid, desc="word survival", unit="setting"):
        cfg = config.resolve(
            {
                **base,
                "word-mechanism": mech,
                "word-epsilon": float(eps),
                "word-quality-docs": docs,
                "word-support-words": 0,
                "seed": seed,
            }
        )
        q = rewrite_quality(LevelSpec.from_config(cfg))
        delta = word_mechanism(cfg.release).guarantee.delta  # cached: built once by rewrite_quality
        out.append(
            {
                "word-mechanism": mech,
                "word-epsilon": eps,
                "N_w": round(q["N_w"], 4),
                "rouge1_f": round(q["rouge1_f"], 4),
                "word_delta": float(f"{delta:.3g}"),
                "documents": q["documents"],
                "words": q["words"],
                "seed": seed,
            }
        )
    return out


#: Printed under the table.
NOTES = (
    "",
    "N_w: fraction of word tokens left unchanged by one rewrite (out-of-vocabulary words never count as "
    "unchanged); word_delta: the per-word delta the mechanism attains (0 for pure Laplace). A diagnostic on "
    "raw test text, not a release.",
)
