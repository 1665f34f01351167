"""Word level: the embedding of a word-level rewrite, released without further noise
(Feyisetan et al. 2020; Xu et al. 2020; Huang et al. 2024).

The node rewrites each document word by word (``fl.levels.word.rewrite``), the frozen
encoder embeds the rewrite, and M1 + the ``none`` sentence mechanism pass it on
(post-processing). One release composes the per-word guarantee over the
document's k words: its charge is ``Charge(per_word, units=k)``; k travels with
the release as ``num-words`` (it is not hidden).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from fl.accounting.charges import Charge
from fl.cohort import Cohort
from fl.config import ReleaseConfig
from fl.levels.base import MappedChannel, ReleaseInputs, described
from fl.levels.spec import LevelSpec
from fl.levels.word import rewrite as rewrite_mod
from mechanisms.guarantee import Guarantee


class WordChannel(MappedChannel):
    """Release G(rewrite(doc)) through M1; charge k per-word guarantees per document."""

    level = "word"
    channel = "word"
    unit_suffix = "-per-word"
    extra_keys = ("num-words",)

    def __init__(self, release: ReleaseConfig, input_dim: int, num_classes: int | None = None) -> None:
        super().__init__(release, input_dim, num_classes)  # the sentence mechanism is "none" (config check)
        self.word_mechanism = rewrite_mod.word_mechanism(release)

    @property
    def guarantee(self) -> Guarantee:
        return self.word_mechanism.guarantee

    def row_charges(self, n: int, extras: Mapping[str, np.ndarray]) -> list[Charge]:
        # the per-word guarantee carries its mechanism's accounting kind (its dp-accounting event)
        return [Charge(self.guarantee, int(k)) for k in extras["num-words"]]

    def extras(self, cohort: Cohort, purpose: str, rows: np.ndarray) -> dict[str, np.ndarray]:
        words = cohort.train_words if purpose == "train" else cohort.test_words
        assert words is not None, "the cohort counts words when a word mechanism is set"
        return {"num-words": np.asarray(words, dtype=np.int64)[rows]}

    def source(self, inputs: ReleaseInputs, rows: np.ndarray) -> torch.Tensor:
        if inputs.rewrite is None:
            raise ValueError("the word level needs the node's rewrite of the split")
        return inputs.rewrite().emb[rows]

    def statement(self) -> dict[str, Any]:
        g = self.guarantee
        return {"word": {**g.to_dict(), "pure_ldp_per_word": g.as_ldp()[0], "text": g.describe()}}

    def sentence_text(self, base: str) -> str:
        return (
            f"the embedding of the word-level rewrite, released without further noise: "
            f"{self.guarantee.describe()}, composed over the document's words (k words: see "
            "privacy.word_level); the number of words is not hidden"
        )

    @classmethod
    def early_warning(cls, release: ReleaseConfig, num_users: int) -> str | None:
        return rewrite_mod.delta_warning(rewrite_mod.word_mechanism(release).guarantee, num_users)

    @classmethod
    def diagnostics(cls, spec: LevelSpec) -> tuple[str, dict[str, Any]] | None:
        """N_w, S_w, ROUGE-1 and BLEU of the rewrite on sampled test documents (reads raw text: a
        diagnostic, not a release)."""
        if spec.release.word_quality_docs <= 0:
            return None
        from fl.levels.word.quality import rewrite_quality

        return "rewrite_quality", rewrite_quality(spec)

    def report(self, seen: Mapping[str, np.ndarray], warning: str | None = None) -> tuple[str, dict[str, Any]]:
        """The per-word guarantee and the document guarantee (the mechanism's own composition over
        words: TrLaplace's is tighter than basic) at the longest and the median released document."""
        words = np.asarray(seen.get("num-words", np.zeros(0, dtype=np.int64)))
        longest = int(words.max()) if words.size else 0
        median = int(np.median(words)) if words.size else 0
        document = self.word_mechanism.document_guarantee
        return "word_level", {
            "per_word": described(self.guarantee),
            "max_words_per_document": longest,
            "median_words_per_document": median,
            "per_document_longest": described(document(longest)),
            "per_document_median": described(document(median)),
            "delta_warning": warning,
        }
