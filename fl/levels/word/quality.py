"""How much a word-level rewrite changes the text: N_w, S_w, ROUGE-1 and BLEU on a sample.

A simulation diagnostic computed by the driver (it reads raw test documents,
which a real server never sees), not a release and not covered by any
guarantee. The sample is ``word-quality-docs`` test documents drawn with the
run's ``seed``, rewritten once with noise independent of the clients' noise.

* N_w: fraction of word tokens left unchanged (out-of-vocabulary words never
  count as unchanged), docs/SPEC.md §5.1.
* S_w: for the ``word-support-words`` most frequent in-vocabulary words of the
  sample, the number of distinct outputs over 1000 draws each
  (docs/SPEC.md §5.1).
* ROUGE-1 F1 (mean over documents, Google's ``rouge-score``) and corpus BLEU
  (``sacrebleu``, default 13a tokenization) of the rewrites against the
  originals; maintained implementations, not ours.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from typing import Any

import numpy as np
import torch

from fl.config import UsersConfig
from fl.data import datasets as data
from fl.levels.spec import LevelSpec
from fl.levels.word.rewrite import word_mechanism
from mechanisms.words import unchanged_fraction, word_statistics

SUPPORT_DRAWS = 1000


def _seed(users: UsersConfig, purpose: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{users.seed}|{purpose}".encode()).digest()[:8], "little") >> 1


def text_similarity(originals: list[str], rewrites: list[str]) -> dict[str, float]:
    """Mean ROUGE-1 F1 and corpus BLEU (0-100) of ``rewrites`` against ``originals``."""
    import sacrebleu
    from rouge_score import rouge_scorer

    if len(originals) != len(rewrites):
        raise ValueError(f"{len(originals)} originals but {len(rewrites)} rewrites")
    if not originals:
        raise ValueError("need at least one text")
    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=False)
    rouge = [scorer.score(o, r)["rouge1"].fmeasure for o, r in zip(originals, rewrites, strict=True)]
    return {"rouge1_f": float(np.mean(rouge)), "bleu": float(sacrebleu.corpus_bleu(rewrites, [originals]).score)}


def rewrite_quality(spec: LevelSpec) -> dict[str, Any]:
    """N_w, S_w, ROUGE-1 and BLEU of the configured word mechanism on a sample of test documents."""
    mech = word_mechanism(spec.release)
    ds = data.load(spec.data, spec.users, spec.level)
    if not isinstance(ds, data.TextDataset):
        raise ValueError("dataset = 'synthetic' has no texts to rewrite")
    test = ds.test
    n = min(int(spec.release.word_quality_docs), len(test))
    out: dict[str, Any] = {
        "mechanism": mech.name,
        "epsilon_per_word": mech.epsilon,
        "diagnostic": "computed by the simulation driver on raw test documents; not a release",
    }
    if n == 0:
        return out
    start = time.perf_counter()
    rows = np.random.default_rng(_seed(spec.users, "word-quality-sample")).choice(len(test), size=n, replace=False)
    texts = list(test.select(np.sort(rows))["text"][:])
    gen = torch.Generator().manual_seed(_seed(spec.users, "word-quality-noise"))
    r = mech.rewrite(texts, gen)
    out.update(
        {
            "documents": n,
            "words": int(r.input_ids.numel()),
            "oov_fraction": float((r.input_ids == r.unk).double().mean()) if r.input_ids.numel() else 0.0,
            "N_w": unchanged_fraction(r.input_ids, r.output_ids, unk=r.unk),
            **text_similarity(texts, r.texts),
            "examples": [{"original": o, "rewrite": w} for o, w in zip(texts[:3], r.texts[:3], strict=True)],
        }
    )
    k = int(spec.release.word_support_words)
    if k > 0:
        frequent = [i for i, _ in Counter(r.input_ids[r.input_ids != r.unk].tolist()).most_common(k)]
        if frequent:
            stats = word_statistics(mech, torch.tensor(frequent), SUPPORT_DRAWS, gen)
            words = mech.space.decode(stats["ids"])
            out["support"] = {
                "draws": SUPPORT_DRAWS,
                "per_word": {
                    w: {"N_w": float(p), "S_w": int(s)}
                    for w, p, s in zip(words, stats["N_w"].tolist(), stats["S_w"].tolist(), strict=True)
                },
                "S_w_median": float(stats["S_w"].double().median()),
            }
    out["seconds"] = round(time.perf_counter() - start, 2)
    return out


__all__ = ["rewrite_quality", "text_similarity"]
