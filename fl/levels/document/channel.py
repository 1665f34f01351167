"""Document level: sentence-level DP of whole documents (Meehan et al. 2022, SentDP).

A user's document is its k sentence embeddings; the node releases one document
embedding with DeepCandidate (the index of a public candidate, looked up by the
server) or the truncation baseline, using the public material the server built
(:class:`fl.levels.document.setup.DocumentSetup`). The mechanism's guarantee is per
sentence; a release is charged the whole document's guarantee for its k
(``document_guarantee(k)``: epsilon k / 2 or k epsilon), and k travels with it
as ``num-sentences`` (k is revealed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord

from fl.accounting.charges import Charge
from fl.cohort import Cohort
from fl.config import ReleaseConfig
from fl.levels.base import Drawn, EmbeddingChannel, Received, ReleaseInputs, described
from fl.levels.document.setup import DocumentSetup
from fl.levels.spec import LevelSpec
from mechanisms.guarantee import Guarantee


class DocumentChannel(EmbeddingChannel):
    """Release one SentDP document embedding per user; charge the whole document's guarantee."""

    level = "document"
    channel = "document"
    unit_suffix = "-per-sentence"
    needs_public_setup = True
    extra_keys = ("num-sentences",)

    def __init__(self, release: ReleaseConfig, input_dim: int, setup: DocumentSetup) -> None:
        super().__init__(release, input_dim)
        self.setup = setup
        self.mechanism = setup.mechanism(release)
        self._by_k: dict[int, Charge] = {}

    @property
    def guarantee(self) -> Guarantee:
        return self.mechanism.guarantee

    def charge(self, k: int) -> Charge:
        """The charge of one document of k sentences (cached: a handful of distinct k)."""
        if k not in self._by_k:
            self._by_k[k] = Charge(self.mechanism.document_guarantee(k))
        return self._by_k[k]

    def row_charges(self, n: int, extras: Mapping[str, np.ndarray]) -> list[Charge]:
        return [self.charge(int(k)) for k in extras["num-sentences"]]

    def extras(self, cohort: Cohort, purpose: str, rows: np.ndarray) -> dict[str, np.ndarray]:
        docs = cohort.train_docs if purpose == "train" else cohort.test_docs
        assert docs is not None, "the cohort embeds sentences when a document mechanism is set"
        return {"num-sentences": np.asarray(docs.num_sentences, dtype=np.int64)[rows]}

    def release(self, inputs: ReleaseInputs, rows: np.ndarray, generator: torch.Generator) -> Drawn:
        c = inputs.cohort
        docs = c.train_docs if inputs.purpose == "train" else c.test_docs
        assert docs is not None
        emb, chosen = self.setup.release(self.release_config, docs.select(rows), generator)
        return Drawn(emb, ids=None if chosen is None else chosen.numpy())

    def clean(self, inputs: ReleaseInputs, rows: np.ndarray) -> torch.Tensor | None:
        c = inputs.cohort
        docs = c.train_docs if inputs.purpose == "train" else c.test_docs
        assert docs is not None
        return self.setup.clean(docs.select(rows))

    def breakdown(self, extras: Mapping[str, np.ndarray]) -> np.ndarray | None:
        return extras["num-sentences"]

    @classmethod
    def public_setup(cls, spec: LevelSpec, device: Any) -> DocumentSetup:
        """Recoder, candidates and projections (DeepCandidate) or the box (truncation), from public
        documents only."""
        from fl.levels.document.setup import build_setup

        return build_setup(spec, device)

    def to_record(self, emb: np.ndarray, ids: np.ndarray | None, extras: Mapping[str, np.ndarray]) -> dict[str, Array]:
        """DeepCandidate sends the index of the chosen public candidate *instead of* a vector."""
        arrays = super().to_record(emb, ids, extras)
        if self.setup.kind == "deepcandidate":
            assert ids is not None
            arrays.pop("embeddings")
            arrays["candidate-ids"] = Array(np.asarray(ids, dtype=np.int64))
        return arrays

    def from_record(self, record: ArrayRecord) -> Received:
        if "candidate-ids" not in record:
            return super().from_record(record)
        assert self.setup.candidates is not None
        ids = torch.as_tensor(record["candidate-ids"].numpy(), dtype=torch.int64)
        return Received(self.setup.candidates[ids].numpy(), {k: record[k].numpy() for k in self.extra_keys})

    def statement(self) -> dict[str, Any]:
        g = self.guarantee
        return {"document": {**g.to_dict(), "pure_per_changed_sentence": g.as_ldp()[0], "text": g.describe()}}

    def sentence_text(self, base: str) -> str:
        whole = self.mechanism.whole_document
        return (
            f"a document embedding under sentence-level DP ({self.mechanism.name}): "
            f"{self.guarantee.describe()} of a document (any one sentence replaced); a whole document of k "
            f"sentences: pure {whole} (see privacy.document_level); the number of sentences k is revealed"
        )

    def report(self, seen: Mapping[str, np.ndarray], warning: str | None = None) -> tuple[str, dict[str, Any]]:
        """The per-sentence (SentDP) guarantee and the whole-document guarantee at the longest and the
        median released document."""
        ks = np.asarray(seen.get("num-sentences", np.zeros(0, dtype=np.int64)))
        longest, median = (int(ks.max()), int(np.median(ks))) if ks.size else (0, 0)
        g = self.guarantee
        return "document_level", {
            "mechanism": self.mechanism.name,
            "per_sentence": {
                **described(g),
                "text": f"{g.describe()} of a document (SentDP: neighbouring documents have the same "
                "number of sentences k and differ in one sentence; k is revealed)",
            },
            "max_sentences_per_document": longest,
            "median_sentences_per_document": median,
            "per_document_longest": described(self.mechanism.document_guarantee(longest)),
            "per_document_median": described(self.mechanism.document_guarantee(median)),
            "num_projections": self.setup.num_projections or None,
        }
