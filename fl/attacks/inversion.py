"""Embedding inversion: recover the words of a text from its release (Song & Raghunathan 2020).

Attacker knowledge (``KNOWLEDGE``): white-box, as in Song & Raghunathan's
white-box inversion: the encoder, the public M1 and the local mechanism, and
public text from the same distribution. Two attacks:

* **learned map** (their "inversion model" to a bag of words): a multi-label
  classifier from a release to the vocabulary of the public text's content
  words, trained on public texts released through the same pipeline by the
  attacker (noise included, so it learns to read through the noise). A word is
  predicted when its probability is at least the threshold, the attacker's
  choice: the one of ``THRESHOLDS`` with the best micro F1 on a held-out fifth
  of its own auxiliary releases. Reported: micro precision, recall and F1 of
  the predicted content words against each victim's true content words (stop
  words and non-alphabetic tokens excluded).
* **nearest neighbour**: the sentence of a public pool (which also holds every
  victim's true sentence, the attacker's best case) whose noise-free release-
  space vector is closest (cosine) to the release. Reported: the rate at which
  the victim's own sentence is recovered exactly, beside 1 / pool size.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from fl.attacks.common import Standardise

KNOWLEDGE = (
    "white-box: the encoder, the public M1 and the local mechanism; public same-distribution text released "
    "through the same pipeline by the attacker; for nearest neighbour a public sentence pool that contains the "
    "victims' true sentences"
)

# A small English stop list (function words carry no content; Song & Raghunathan evaluate content words too).
STOP_WORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as is are was were be been being it its
    this that these those there here i you he she we they me him her us them my your his our their what which who
    whom whose when where why how all any both each few more most other some such no nor not only own same so than
    too very can will just do does did doing have has had having would should could may might must s t don n't 's
    into over under again further once about above below up down out off through during before after between
    because until while against am""".split()
)
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")


def content_words(text: str) -> set[str]:
    """Lower-cased alphabetic tokens of ``text`` minus stop words."""
    return {w for w in _TOKEN.findall(text.lower()) if w not in STOP_WORDS and len(w) > 1}


THRESHOLDS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5)


@dataclass(frozen=True)
class InversionResult:
    precision: float
    recall: float
    f1: float
    threshold: float  # chosen on the attacker's held-out auxiliary releases
    vocabulary: int
    exact_recovery: float  # nearest neighbour: victims whose own sentence is the nearest pool entry
    pool_size: int
    chance_recovery: float  # 1 / pool size
    n_victims: int
    knowledge: str = KNOWLEDGE

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def vocabulary(texts: Sequence[str], size: int) -> list[str]:
    """The ``size`` most frequent content words of ``texts`` (ties broken alphabetically)."""
    counts = Counter(w for t in texts for w in content_words(t))
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: int(size)]]


def bag_of_words(texts: Sequence[str], vocab: Sequence[str]) -> np.ndarray:
    """Multi-hot [n, V] float32 of each text's content words in ``vocab``."""
    index = {w: i for i, w in enumerate(vocab)}
    out = np.zeros((len(texts), len(vocab)), dtype=np.float32)
    for r, t in enumerate(texts):
        cols = [index[w] for w in content_words(t) if w in index]
        out[r, cols] = 1.0
    return out


def fit_inversion(
    x: np.ndarray, bow: np.ndarray, seed: int, hidden: int = 512, epochs: int = 60, batch: int = 256
) -> torch.nn.Module:
    """MLP release -> per-word logits, trained with binary cross-entropy (seeded, CPU)."""
    gen = torch.Generator().manual_seed(int(seed))
    torch.manual_seed(int(seed))
    xt = torch.as_tensor(np.asarray(x), dtype=torch.float32)
    yt = torch.as_tensor(np.asarray(bow), dtype=torch.float32)
    scale = Standardise.fit(xt)
    net = torch.nn.Sequential(
        torch.nn.Linear(xt.shape[1], hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, yt.shape[1])
    )
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    # frequent words dominate the loss otherwise; a mild positive weight keeps rare words reachable
    pos_weight = ((yt.shape[0] - yt.sum(0)) / yt.sum(0).clamp_min(1.0)).clamp(1.0, 50.0).sqrt()
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    xs = scale(xt)
    for _ in range(int(epochs)):
        order = torch.randperm(xs.shape[0], generator=gen)
        for s in range(0, xs.shape[0], batch):
            idx = order[s : s + batch]
            opt.zero_grad()
            loss_fn(net(xs[idx]), yt[idx]).backward()
            opt.step()
    net.eval()
    return torch.nn.Sequential(scale, net).eval()


def word_scores(
    model: torch.nn.Module, x: np.ndarray, texts: Sequence[str], vocab: Sequence[str], threshold: float = 0.5
) -> tuple[float, float, float]:
    """Micro (precision, recall, F1) of the predicted content words against each text's true ones.

    Recall counts every true content word, also those outside the attacker's
    vocabulary (which it can never recover).
    """
    with torch.no_grad():
        probs = torch.sigmoid(model(torch.as_tensor(np.asarray(x), dtype=torch.float32))).numpy()
    tp = fp = fn = 0
    vocab_arr = np.asarray(vocab)
    for r, t in enumerate(texts):
        truth = content_words(t)
        pred = set(vocab_arr[probs[r] >= threshold].tolist())
        hit = len(truth & pred)
        tp, fp, fn = tp + hit, fp + len(pred) - hit, fn + len(truth) - hit
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def nearest_neighbour_recovery(releases: np.ndarray, pool_clean: np.ndarray, truth_index: np.ndarray) -> float:
    """Fraction of releases whose cosine-nearest pool row is their own sentence (``truth_index``)."""
    r = torch.nn.functional.normalize(torch.as_tensor(np.asarray(releases), dtype=torch.float32), dim=1)
    p = torch.nn.functional.normalize(torch.as_tensor(np.asarray(pool_clean), dtype=torch.float32), dim=1)
    hits = 0
    for s in range(0, r.shape[0], 1024):
        nearest = (r[s : s + 1024] @ p.T).argmax(dim=1).numpy()
        hits += int((nearest == np.asarray(truth_index)[s : s + 1024]).sum())
    return hits / max(1, r.shape[0])


def inversion_attack(
    aux_x: np.ndarray,
    aux_texts: Sequence[str],
    victim_x: np.ndarray,
    victim_texts: Sequence[str],
    pool_clean: np.ndarray,
    victim_pool_index: np.ndarray,
    vocab_size: int = 2000,
    seed: int = 0,
) -> InversionResult:
    """Both inversion attacks (module docstring) on the victims' releases ``victim_x``."""
    vocab = vocabulary(aux_texts, vocab_size)
    if not vocab:
        raise ValueError("the auxiliary texts have no content words to learn")
    aux_x = np.asarray(aux_x)
    order = np.random.default_rng(seed).permutation(len(aux_texts))
    cut = max(1, len(order) // 5)
    held, fit = order[:cut], order[cut:]
    model = fit_inversion(aux_x[fit], bag_of_words([aux_texts[i] for i in fit], vocab), seed)
    held_texts = [aux_texts[i] for i in held]
    threshold = max(THRESHOLDS, key=lambda t: word_scores(model, aux_x[held], held_texts, vocab, t)[2])
    precision, recall, f1 = word_scores(model, victim_x, victim_texts, vocab, threshold)
    exact = nearest_neighbour_recovery(victim_x, pool_clean, victim_pool_index)
    return InversionResult(
        precision=precision,
        recall=recall,
        f1=f1,
        threshold=float(threshold),
        vocabulary=len(vocab),
        exact_recovery=exact,
        pool_size=int(len(pool_clean)),
        chance_recovery=1.0 / max(1, len(pool_clean)),
        n_victims=int(len(victim_texts)),
    )
