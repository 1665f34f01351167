"""Membership inference against the trained server model.

Attacker knowledge (recorded with every result, ``KNOWLEDGE``): black-box
access to the final model's output probabilities; the candidate's text and
true label; the public M1, so it can form the model's noise-free input for the
text (the input the model would see without a sanitizer). For LiRA also the
training recipe, the local mechanism and public data from the same
distribution, to train shadow models.

Threshold attacks (Yeom et al. 2018; Song & Mittal 2021). A score per example
where members are expected higher: confidence in the true label, minus the
loss, minus the entropy, minus the modified entropy
``-(1 - p_y) log p_y - sum_{j != y} p_j log(1 - p_j)``. Protocol of Du et al.
(2023, §4.4): members and non-members are each split in two halves; the first
halves choose the threshold (best accuracy; for TPR at 1% FPR, the threshold
whose false-positive rate on the first halves' non-members is at most 1%), the
second halves measure it. Success rate = accuracy on the balanced second
halves (0.5 = chance).

LiRA, offline (Carlini et al. 2022, §VI "offline"): each shadow model is
trained like the target (same architecture, recipe and local mechanism) on
public data that contains none of the candidates, so every shadow is OUT for
every candidate. For candidate x the logit-scaled confidence
``phi = log(p_y / (1 - p_y))`` under the shadows is fitted by a Gaussian
N(mu_x, sigma_x^2) (per example; the global variance when shadows are few, as
the paper advises), and the score is the one-sided likelihood that the target's
phi is that high: ``log Pr[Z <= phi_target]`` for Z ~ N(mu_x, sigma_x^2). The same
half/half protocol turns scores into a success rate and TPR at 1% FPR.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy import stats

KNOWLEDGE = {
    "threshold": "black-box output probabilities of the final model; the candidate's text and label; the public M1",
    "lira": "as threshold, plus the training recipe, the local mechanism and public same-distribution data "
    "(shadow models trained on sanitized public releases)",
}
SCORES = ("confidence", "loss", "entropy", "modified_entropy")
TARGET_FPR = 0.01


@dataclass(frozen=True)
class MIAResult:
    """One attack's figures on the evaluation halves (``n_eval`` members and as many non-members)."""

    attack: str
    success: float  # balanced accuracy at the threshold chosen on the first halves
    tpr_at_1pct_fpr: float
    fpr_at_that_threshold: float  # measured on the evaluation halves (about 1% when the split is large)
    auc: float  # ROC AUC on the evaluation halves
    n_eval: int
    knowledge: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@torch.no_grad()
def probabilities(model: torch.nn.Module, x: torch.Tensor, batch: int = 8192) -> np.ndarray:
    """Softmax outputs of ``model`` on ``x`` (float64 [n, K])."""
    model.eval()
    outs = [torch.softmax(model(x[i : i + batch].float()).double(), dim=1) for i in range(0, x.shape[0], batch)]
    return torch.cat(outs).cpu().numpy() if outs else np.zeros((0, 0))


def scores(probs: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    """The four threshold scores per example (members expected higher); float64 [n] each."""
    tiny = 1e-30
    p = np.clip(np.asarray(probs, dtype=np.float64), tiny, 1.0)
    y = np.asarray(labels, dtype=np.int64)
    p_y = p[np.arange(y.size), y]
    entropy = -(p * np.log(p)).sum(axis=1)
    others = np.clip(1.0 - p, tiny, 1.0)
    mentr = -(1.0 - p_y) * np.log(p_y) - (p * np.log(others)).sum(axis=1) + p_y * np.log(np.clip(1.0 - p_y, tiny, 1))
    return {"confidence": p_y, "loss": np.log(p_y), "entropy": -entropy, "modified_entropy": -mentr}


def split_halves(n_members: int, n_nonmembers: int, seed: int) -> tuple[np.ndarray, ...]:
    """Balanced sample of min(n_members, n_nonmembers) of each, each split in two halves.

    Returns (members_A, members_B, nonmembers_A, nonmembers_B) index arrays.
    """
    rng = np.random.default_rng(seed)
    n = min(n_members, n_nonmembers)
    if n < 4:
        raise ValueError(f"membership inference needs at least 4 members and 4 non-members, got {n}")
    m = rng.permutation(n_members)[:n]
    o = rng.permutation(n_nonmembers)[:n]
    h = n // 2
    return m[:h], m[h : 2 * h], o[:h], o[h : 2 * h]


def _best_accuracy_threshold(pos: np.ndarray, neg: np.ndarray) -> float:
    """Threshold t maximising the balanced accuracy of ``score >= t`` => member."""
    cand = np.unique(np.concatenate([pos, neg]))
    pos_s, neg_s = np.sort(pos), np.sort(neg)
    tpr = 1.0 - np.searchsorted(pos_s, cand, side="left") / pos.size
    tnr = np.searchsorted(neg_s, cand, side="left") / neg.size
    return float(cand[int(np.argmax(tpr + tnr))])


def _fpr_threshold(neg: np.ndarray, fpr: float) -> float:
    """Smallest t with Pr[neg >= t] <= fpr on ``neg`` (an empty region when none qualifies)."""
    s = np.sort(neg)
    k = int(np.floor(fpr * s.size))  # at most k negatives may be >= t
    return float(np.nextafter(s[s.size - k - 1], np.inf)) if k < s.size else float(s[0])


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    ranks = stats.rankdata(np.concatenate([pos, neg]))
    return float((ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2) / (pos.size * neg.size))


def evaluate(
    name: str, member_scores: np.ndarray, nonmember_scores: np.ndarray, seed: int, knowledge: str
) -> MIAResult:
    """The half/half protocol on one score (module docstring)."""
    ma, mb, oa, ob = split_halves(member_scores.size, nonmember_scores.size, seed)
    pos_a, pos_b = member_scores[ma], member_scores[mb]
    neg_a, neg_b = nonmember_scores[oa], nonmember_scores[ob]
    t = _best_accuracy_threshold(pos_a, neg_a)
    success = 0.5 * (float((pos_b >= t).mean()) + float((neg_b < t).mean()))
    t1 = _fpr_threshold(neg_a, TARGET_FPR)
    return MIAResult(
        attack=name,
        success=success,
        tpr_at_1pct_fpr=float((pos_b >= t1).mean()),
        fpr_at_that_threshold=float((neg_b >= t1).mean()),
        auc=_auc(pos_b, neg_b),
        n_eval=int(pos_b.size),
        knowledge=knowledge,
    )


def threshold_attacks(
    member_probs: np.ndarray, member_y: np.ndarray, nonmember_probs: np.ndarray, nonmember_y: np.ndarray, seed: int
) -> list[MIAResult]:
    """Every threshold attack of ``SCORES`` on the same halves."""
    sm, so = scores(member_probs, member_y), scores(nonmember_probs, nonmember_y)
    return [evaluate(name, sm[name], so[name], seed, KNOWLEDGE["threshold"]) for name in SCORES]


def logit_confidence(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """phi = log(p_y / (1 - p_y)), computed stably (float64 [n])."""
    p = np.clip(np.asarray(probs, dtype=np.float64), 1e-300, 1.0)
    y = np.asarray(labels, dtype=np.int64)
    p_y = p[np.arange(y.size), y]
    rest = np.clip(p.sum(axis=1) - p_y, 1e-300, None)
    return np.log(p_y) - np.log(rest)


def lira_offline_scores(
    target_phi: np.ndarray, shadow_phi: np.ndarray, global_variance: bool | None = None
) -> np.ndarray:
    """Offline LiRA score per candidate: log Pr[Z <= phi_target], Z ~ N(mu_out, sigma_out^2).

    ``shadow_phi`` is [num_shadows, n] (every shadow OUT for every candidate).
    ``global_variance`` (default: when fewer than 16 shadows) uses one variance for all.
    """
    shadow_phi = np.asarray(shadow_phi, dtype=np.float64)
    if shadow_phi.ndim != 2 or shadow_phi.shape[0] < 2:
        raise ValueError("LiRA needs the confidences of at least 2 shadow models, shape [num_shadows, n]")
    mu = shadow_phi.mean(axis=0)
    use_global = shadow_phi.shape[0] < 16 if global_variance is None else global_variance
    sd = np.full_like(mu, shadow_phi.std(ddof=1)) if use_global else shadow_phi.std(axis=0, ddof=1)
    sd = np.maximum(sd, 1e-6)
    return stats.norm.logcdf(np.asarray(target_phi, dtype=np.float64), loc=mu, scale=sd)


def lira_offline(
    member_phi: np.ndarray,
    nonmember_phi: np.ndarray,
    member_shadow_phi: np.ndarray,
    nonmember_shadow_phi: np.ndarray,
    seed: int,
) -> MIAResult:
    """LiRA (offline) with the half/half protocol."""
    sm = lira_offline_scores(member_phi, member_shadow_phi)
    so = lira_offline_scores(nonmember_phi, nonmember_shadow_phi)
    return evaluate("lira_offline", sm, so, seed, KNOWLEDGE["lira"])
