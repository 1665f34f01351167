"""Document level plumbing: the recoder learns public clusters, candidates and p come from public data,
the setup survives the wire, and scores are bucketed by k."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mechanisms
from fl import config
from fl.encoding.documents import SentenceDocs
from fl.levels.document.recoder import recode, select_candidates, train_recoder, tune_projections
from fl.levels.document.setup import K_EDGES, DocumentSetup, bucket_index, bucket_label, confusion_by_k


def _synthetic(n: int = 240, d: int = 16, classes: int = 3, seed: int = 0) -> tuple[SentenceDocs, torch.Tensor]:
    """Documents whose sentences scatter around one of ``classes`` well-separated centres."""
    gen = torch.Generator().manual_seed(seed)
    k = torch.randint(2, 14, (n,), generator=gen)
    labels = torch.randint(0, classes, (n,), generator=gen)
    centres = 3.0 * torch.randn(classes, d, generator=gen)
    emb = centres[labels.repeat_interleave(k)] + torch.randn(int(k.sum()), d, generator=gen)
    return SentenceDocs(emb.float(), np.concatenate([[0], np.cumsum(k.numpy())]).astype(np.int64)), labels


@pytest.fixture(scope="module")
def trained() -> tuple:
    docs, labels = _synthetic()
    return docs, labels, train_recoder(docs, labels, 3, clusters=6, epochs=4, seed=0, progress=False)


def test_recoder_preserves_clusters_and_keeps_the_best_epoch(trained: tuple) -> None:
    _, _, training = trained
    history = training.info["history"]
    assert len(history) == 4 and 1 <= training.info["best_epoch"] <= 4
    best = min(h["val_cluster_loss"] for h in history)
    assert history[training.info["best_epoch"] - 1]["val_cluster_loss"] == best
    assert max(h["val_cluster_accuracy"] for h in history) > 0.5  # chance is 1/6
    assert history[-1]["val_task_macro_f1"] > 0.9  # C_dc learns the (easy) task from recoded means
    assert not training.recoder.training and not training.classifier.training


def test_candidates_are_long_public_documents_and_validation_is_excluded(trained: tuple) -> None:
    docs, _, training = trained
    recoded = recode(training.recoder, docs.emb)
    chosen, f = select_candidates(docs, recoded, min_sentences=8, m=30, seed=0, exclude=[0, 1, 2, 3])
    assert len(chosen) == 30 and (docs.num_sentences[chosen] >= 8).all() and not np.isin(chosen, [0, 1, 2, 3]).any()
    assert torch.allclose(f, docs.means(recoded)[torch.as_tensor(chosen)])
    with pytest.raises(ValueError, match="at least 2 candidates"):
        select_candidates(docs, recoded, min_sentences=1000, m=30, seed=0)


def test_projection_tuning_prefers_what_scores_best(trained: tuple) -> None:
    docs, labels, training = trained
    recoded = recode(training.recoder, docs.emb)
    chosen, f = select_candidates(docs, recoded, 8, 40, seed=0)
    blocks = docs.docs(range(60), emb=recoded)

    def make(p: int) -> mechanisms.Mechanism:
        return mechanisms.create(
            "deepcandidate", epsilon=50.0, candidates=f.double(), num_projections=p, projection_seed=0
        )

    best, f1 = tune_projections(make, f, training.classifier, blocks, labels[:60].numpy(), 3, grid=(1, 20))
    assert set(f1) == {1, 20} and f1[best] == max(f1.values())


def test_setup_round_trips_through_the_wire_format(trained: tuple) -> None:
    docs, _, training = trained
    cfg = config.resolve(
        {
            "document-mechanism": "deepcandidate",
            "sentence-mechanism": "none",
            "map-in": "identity",
            "public-fraction": 0.5,
            "document-epsilon": 3.0,
        }
    )
    f = select_candidates(docs, recode(training.recoder, docs.emb), 8, 20, seed=0)[1]
    setup = DocumentSetup("deepcandidate", 3.0, training.recoder, f, 25, 7)
    back = DocumentSetup.from_record(setup.to_record(), cfg.release)
    assert back.version() == setup.version() and back.num_projections == 25 and back.projection_seed == 7
    assert torch.allclose(back.recode(docs), setup.recode(docs))
    emb, ids = back.release(cfg.release, docs.select(range(10)), torch.Generator().manual_seed(0))
    assert ids is not None and ids.shape == (10,) and torch.equal(emb, f[ids])
    assert back.mechanism(cfg.release).document_guarantee(6).epsilon == pytest.approx(9.0)  # eps k / 2


def test_k_buckets_and_confusion_by_k() -> None:
    assert bucket_index(np.array([1, 2, 3, 4, 9, 10, 14, 49, 50, 500])).tolist() == [0, 1, 1, 2, 4, 5, 5, 8, 9, 9]
    assert bucket_label(0) == "1" and bucket_label(1) == "2-3" and bucket_label(len(K_EDGES) - 1) == "50+"
    truth, pred, k = np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0]), np.array([2, 2, 12, 60])
    by_k = confusion_by_k(truth, pred, k, 2)
    assert by_k.shape == (len(K_EDGES), 2, 2) and by_k.sum() == 4
    assert by_k[1].tolist() == [[1, 0], [0, 1]] and by_k[5].tolist() == [[0, 0], [1, 0]] and by_k[9].sum() == 1
