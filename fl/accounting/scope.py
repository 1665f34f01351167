"""What a run's privacy figures cover, stated once for every results file.

A run's guarantee (local or central) is about what the nodes *release*:
sanitized rows in local mode, noised model updates in central mode. Evaluation
is outside it: each node scores the model on its test users' true labels
(and, with ``clean-evaluation``, on their unsanitized embeddings) and returns
aggregate confusion counts. Those counts are simulation diagnostics; with few
test users per node they nearly reveal individual labels. Every round's
privacy block, ``summary.json``, ``rounds.csv``, ``sweep.csv`` and
``compare.csv`` say so with ``evaluation_covered = false``.
"""

from __future__ import annotations

GUARANTEE_COVERS = {
    "local": "the sanitized releases only (training releases and the test users' evaluation releases)",
    "central": "the noised global models only (and everything computed from them)",
}

EVALUATION_NOT_COVERED = (
    "evaluation is not covered by any DP guarantee: each node returns confusion counts computed from its "
    "test users' true labels (and, with clean-evaluation = true, from their unsanitized embeddings); "
    "with few test users per node these counts nearly reveal individual labels"
)


def scope_fields(mode: str) -> dict[str, object]:
    """``guarantee_covers``, ``evaluation_covered = False`` and the reason, for a privacy block or a summary."""
    return {
        "guarantee_covers": GUARANTEE_COVERS[mode],
        "evaluation_covered": False,
        "evaluation_not_covered_because": EVALUATION_NOT_COVERED,
    }
