"""DeepCandidate's public side: the sentence recoder H, the candidate pool F, the choice of p.

Everything here is trained or chosen on **public** documents only (Meehan et
al. 2022, §4.3 and §5.2; docs/SPEC.md §8.2), so H, F and p are public and their
release costs no privacy; had any of them seen a private document, SentDP would
not cover it.

* H (:class:`Recoder`): an MLP on top of the frozen encoder G,
  d -> 2d -> 2d -> d with ReLU and dropout 0.5 (the paper's "4-layer MLP";
  widths as in the third-party reimplementation, docs/SPEC.md §8.2).
* Training (:func:`train_recoder`): k-means with n_c clusters on the public
  document embeddings t_i = mean_j G(s_ij); H and a linear head L predict each
  document's cluster from z = mean_j H(G(s_ij)) (cross-entropy, Adam); in
  parallel, with its own Adam, a task classifier C_dc learns the labels from
  the detached z. The epoch with the lowest validation cluster loss is kept.
* Candidates (:func:`select_candidates`): up to m public documents with at
  least 8 sentences, f_i = mean_j H(G(s_ij)).
* p (:func:`tune_projections`): for each p in a grid, sanitize public
  validation documents with DeepCandidate at the run's epsilon and score
  C_dc on the chosen candidates; the best macro-F1 wins (the paper tunes p
  in 10..100 on validation data).

k-means is scikit-learn's; the rest is a few lines of torch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from fl.encoding.documents import SentenceDocs
from fl.maps.pipeline import confusion_matrix, scores

log = logging.getLogger(__name__)

PROJECTION_GRID = (10, 25, 50, 100)


class Recoder(nn.Module):
    """H: the cluster-preserving sentence recoder (d -> 2d -> 2d -> d MLP)."""

    def __init__(self, d: int, dropout: float = 0.5) -> None:
        super().__init__()
        self.dim = d
        self.net = nn.Sequential(
            nn.Linear(d, 2 * d),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(2 * d, 2 * d),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(2 * d, d),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@torch.no_grad()
def recode(recoder: Recoder, emb: torch.Tensor, batch_size: int = 8192) -> torch.Tensor:
    """H(G(s)) for every sentence row (eval mode, float32, on CPU)."""
    recoder.eval()
    device = next(recoder.parameters()).device
    out = [recoder(emb[i : i + batch_size].to(device, torch.float32)).cpu() for i in range(0, emb.shape[0], batch_size)]
    return torch.cat(out) if out else torch.zeros(0, recoder.dim)


@dataclass
class RecoderTraining:
    """A trained recoder and task classifier, with what happened during training."""

    recoder: Recoder
    classifier: nn.Module  # C_dc: task labels from mean recoded sentence embeddings
    info: dict[str, Any] = field(default_factory=dict)


def _segment_mean(flat: torch.Tensor, owners: torch.Tensor, n: int) -> torch.Tensor:
    sums = torch.zeros(n, flat.shape[1], dtype=flat.dtype, device=flat.device).index_add_(0, owners, flat)
    counts = torch.bincount(owners, minlength=n).clamp_min(1).to(flat.dtype).unsqueeze(1)
    return sums / counts


def _batch_rows(docs: SentenceDocs, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Sentence rows of the documents ``rows`` and, for each, its position in ``rows``."""
    k = docs.num_sentences[rows]
    index = np.concatenate([np.arange(docs.offsets[i], docs.offsets[i + 1]) for i in rows])
    return torch.as_tensor(index), torch.repeat_interleave(torch.arange(len(rows)), torch.as_tensor(k))


def train_recoder(
    public: SentenceDocs,
    labels: torch.Tensor,
    num_classes: int,
    *,
    clusters: int = 50,
    epochs: int = 20,
    batch_size: int = 64,
    lr: float = 1e-3,
    hidden: int = 256,
    validation_fraction: float = 0.1,
    seed: int = 0,
    device: str | torch.device = "cpu",
    progress: bool = True,
) -> RecoderTraining:
    """Train H (cluster preservation) and C_dc (task) on public documents; keep the best epoch.

    Guarantees: only ``public`` and ``labels`` (public) are read; deterministic
    for a given seed on CPU.
    """
    from sklearn.cluster import KMeans

    from fl.reporting.progress import bar as progress_bar

    n = len(public)
    if n < max(clusters, 10):
        raise ValueError(f"need at least {max(clusters, 10)} public documents to train the recoder, got {n}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    num_val = max(1, int(round(validation_fraction * n)))
    val, train = np.sort(order[:num_val]), np.sort(order[num_val:])
    means = public.means()
    kmeans = KMeans(n_clusters=clusters, random_state=seed, n_init=4).fit(means[train].numpy())
    cluster = torch.as_tensor(kmeans.predict(means.numpy()), dtype=torch.int64)

    torch.manual_seed(seed)
    d = public.dim
    recoder = Recoder(d).to(device)
    head = nn.Linear(d, clusters).to(device)
    classifier = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, num_classes)).to(device)
    opt_h = torch.optim.Adam([*recoder.parameters(), *head.parameters()], lr=lr)
    opt_c = torch.optim.Adam(classifier.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(seed)
    best: tuple[float, int, dict, dict] | None = None
    history = []
    bar = progress_bar(iterable=range(epochs), desc="recoder (public)", disable=not progress)
    for epoch in bar:
        recoder.train()
        perm = train[torch.randperm(len(train), generator=gen).numpy()]
        for start in range(0, len(perm), batch_size):
            rows = perm[start : start + batch_size]
            index, owners = _batch_rows(public, rows)
            z = _segment_mean(recoder(public.emb[index].to(device)), owners.to(device), len(rows))
            loss = loss_fn(head(z), cluster[rows].to(device))
            opt_h.zero_grad(set_to_none=True)
            loss.backward()
            opt_h.step()
            task = loss_fn(classifier(z.detach()), labels[rows].to(device))
            opt_c.zero_grad(set_to_none=True)
            task.backward()
            opt_c.step()
        val_loss, val_acc, val_f1 = _validate(recoder, head, classifier, public, val, cluster, labels, num_classes)
        history.append(
            {
                "epoch": epoch + 1,
                "val_cluster_loss": val_loss,
                "val_cluster_accuracy": val_acc,
                "val_task_macro_f1": val_f1,
            }
        )
        bar.set_postfix(cluster_loss=f"{val_loss:.3f}", task_f1=f"{val_f1:.3f}")
        if best is None or val_loss < best[0]:
            best = (val_loss, epoch + 1, _state(recoder), _state(classifier))
    assert best is not None
    recoder.load_state_dict(best[2])
    classifier.load_state_dict(best[3])
    recoder.eval()
    classifier.eval()
    info = {
        "public_documents": n,
        "validation_documents": int(num_val),
        "clusters": clusters,
        "best_epoch": best[1],
        "history": history,
        "validation_rows": val.tolist(),
    }
    return RecoderTraining(recoder, classifier, info)


def _state(module: nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@torch.no_grad()
def _validate(
    recoder: Recoder,
    head: nn.Module,
    classifier: nn.Module,
    docs: SentenceDocs,
    rows: np.ndarray,
    cluster: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
) -> tuple[float, float, float]:
    recoder.eval()
    device = next(recoder.parameters()).device
    sub = docs.select(rows)
    z = _segment_mean(recode(recoder, sub.emb).to(device), sub.owners().to(device), len(sub))
    logits = head(z)
    target = cluster[rows].to(device)
    loss = float(nn.functional.cross_entropy(logits, target))
    acc = float((logits.argmax(1) == target).double().mean())
    pred = classifier(z).argmax(1).cpu().numpy()
    f1 = scores(confusion_matrix(labels[rows].numpy(), pred, num_classes))["macro_f1"]
    return loss, acc, f1


def select_candidates(
    public: SentenceDocs,
    recoded: torch.Tensor,
    min_sentences: int,
    m: int,
    seed: int,
    exclude: Sequence[int] | np.ndarray = (),
) -> tuple[np.ndarray, torch.Tensor]:
    """Up to ``m`` public documents with >= ``min_sentences`` sentences (seeded choice, ``exclude``
    left out) and their embeddings mean_j H(G(s_ij)) (float32 [m', d])."""
    eligible = np.flatnonzero(public.num_sentences >= min_sentences)
    eligible = np.setdiff1d(eligible, np.asarray(exclude, dtype=np.int64))
    if eligible.size < 2:
        raise ValueError(
            f"only {eligible.size} public document(s) have >= {min_sentences} sentences: "
            "DeepCandidate needs at least 2 candidates (raise public-fraction or lower "
            "candidate-min-sentences)"
        )
    chosen = np.sort(np.random.default_rng(seed).permutation(eligible)[:m])
    return chosen, public.means(recoded)[torch.as_tensor(chosen)]


def tune_projections(
    make_mechanism: Any,
    candidates: torch.Tensor,
    classifier: nn.Module,
    docs: list[torch.Tensor],
    labels: np.ndarray,
    num_classes: int,
    grid: Sequence[int] = PROJECTION_GRID,
    seed: int = 0,
) -> tuple[int, dict[int, float]]:
    """The p in ``grid`` whose DeepCandidate releases of public validation ``docs`` (recoded) give
    C_dc the best macro-F1; ``make_mechanism(p)`` builds the mechanism. Public data only: no privacy cost."""
    if not docs:
        raise ValueError("need public validation documents to tune num-projections")
    device = next(classifier.parameters()).device
    results: dict[int, float] = {}
    for p in grid:
        chosen = make_mechanism(int(p)).sanitize(docs, generator=torch.Generator().manual_seed(seed + int(p)))
        with torch.no_grad():
            pred = classifier(candidates[chosen].to(device, torch.float32)).argmax(1).cpu().numpy()
        results[int(p)] = scores(confusion_matrix(np.asarray(labels), pred, num_classes))["macro_f1"]
    best = max(results, key=lambda p: (results[p], -p))  # ties: the smaller p (cheaper)
    return best, results


__all__ = [
    "PROJECTION_GRID",
    "Recoder",
    "RecoderTraining",
    "recode",
    "select_candidates",
    "train_recoder",
    "tune_projections",
]
