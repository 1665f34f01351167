"""Evaluation in the local mode: the nodes' confusion counts, summed into the run's scores.

Every node scores the server model (and the models of the public data alone, the public-only line) on its
test users and replies with confusion counts only; :func:`evaluation_scores` sums them into the round's
evaluation (what ``ReleaseTraining.evaluation`` holds and the accounting wrapper records): accuracy and
macro-F1 on the sanitized releases and on clean inputs, the public-only accuracies, the random-guess line
(:func:`random_guess`) and, for document tasks, the scores by number of sentences (:func:`by_sentences`).
The counts use true labels and are not covered by any DP guarantee (simulation diagnostics).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from flwr.app import Message

from fl import wire
from fl.levels.document import setup as document_level
from fl.maps.pipeline import scores


def evaluation_scores(replies: Iterable[Message], num_classes: int) -> dict[str, Any]:
    """The run's evaluation of one round from the nodes' evaluate replies (local mode): the summed confusion
    counts' scores, sanitized and clean, the public-only models' accuracies, the random-guess line, the
    numbers of test releases and, for document tasks, the scores by number of sentences."""
    k = num_classes
    conf = np.zeros((k, k), dtype=np.int64)
    clean = np.zeros((k, k), dtype=np.int64)
    # The public-only models' confusion counts and the evaluation key of each one's accuracy: the server
    # model fitted on public data alone on the sanitized test releases, the public logistic regression and
    # that server model on the clean test inputs (fl.reporting.outcome.PUBLIC_ONLY_MODELS names them).
    public_only = {
        "public-confusion": "public_only_accuracy",
        "public-clean-confusion": "public_only_clean_accuracy",
        "public-head-clean-confusion": "public_only_head_clean_accuracy",
    }
    public = {name: np.zeros((k, k), dtype=np.int64) for name in public_only}
    by_k: dict[str, Any] = {}
    fresh_total = refused = 0
    for reply in replies:
        metrics = wire.metric_record(reply.content, wire.METRICS)
        refused += wire.read_int(metrics, "refused-releases", 0)
        fresh_total += wire.read_int(metrics, "fresh-releases", 0)
        conf += np.asarray(metrics["confusion"], dtype=np.int64).reshape(k, k)
        if "clean-confusion" in metrics:  # absent when releases are not in M1's output space
            clean += np.asarray(metrics["clean-confusion"], dtype=np.int64).reshape(k, k)
        for name in public:
            if name in metrics:
                public[name] += np.asarray(metrics[name], dtype=np.int64).reshape(k, k)
        for name in ("confusion-by-k", "clean-confusion-by-k"):
            if name in metrics:
                counts = np.asarray(metrics[name], dtype=np.int64).reshape(-1, k, k)
                by_k[name] = by_k.get(name, 0) + counts
    sanitized, clean_scores = scores(conf), scores(clean)
    evaluation: dict[str, Any] = {
        "accuracy": sanitized["accuracy"],
        "macro_f1": sanitized["macro_f1"],
        "clean_accuracy": clean_scores["accuracy"],
        "clean_macro_f1": clean_scores["macro_f1"],
        # The models fitted on the public data alone, on the same test inputs (None: not scored).
        **{key: scores(public[name])["accuracy"] if public[name].sum() else None for name, key in public_only.items()},
        "test_users": int(conf.sum()),
        "random_guess_f1": random_guess(conf),
        "fresh_test_releases": fresh_total,
        "refused_test_releases": refused,
    }
    if "confusion-by-k" in by_k:
        evaluation["by_sentences"] = by_sentences(by_k["confusion-by-k"], by_k.get("clean-confusion-by-k"))
    return evaluation


def random_guess(confusion: np.ndarray) -> float | None:
    """sum_i q_i^2 over the test label frequencies q: the score of guessing labels at random with
    those frequencies (the paper's random-guess line)."""
    total = confusion.sum()
    return float(((confusion.sum(axis=1) / total) ** 2).sum()) if total else None


def by_sentences(conf: np.ndarray, clean: np.ndarray | None) -> list[dict[str, Any]]:
    """Scores per bucket of the number of sentences k (empty buckets left out)."""
    out = []
    for b in range(conf.shape[0]):
        if conf[b].sum() == 0:
            continue
        s = scores(conf[b])
        row = {
            "k": document_level.bucket_label(b),
            "k_min": document_level.K_EDGES[b],
            "documents": int(conf[b].sum()),
            "accuracy": s["accuracy"],
            "macro_f1": s["macro_f1"],
            "random_guess_f1": random_guess(conf[b]),
        }
        if clean is not None:
            row["clean_macro_f1"] = scores(clean[b])["macro_f1"]
        out.append(row)
    return out
