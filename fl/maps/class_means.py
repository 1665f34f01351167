"""The ``class-means`` server model: debiased class means of local-DP releases, combined with the
public class means, scored as a linear discriminant.

What a node releases (sentence level): z = M(u), an unbiased estimate of its unit row u = n(x M1 + b)
(PrivUnit with ``unbiased = true``: E[z | u] = u, ||z||^2 = 1 / m^2), and its label through K-ary
randomized response (or in the clear). The server knows both noise laws, so it can undo them on
averages (post-processing: no privacy cost):

* the released labels: with R[j, k] = P(released k | true j), the sums over users with *released*
  label k satisfy E[T_k] = sum_j R[j, k] S_j, where S_j is the sum of the rows of true class j; so
  S = (R^T)^-1 T and the class counts n = (R^T)^-1 c (c: released-label counts) are unbiased;
* the embedding noise averages out: mu_j = S_j / n_j estimates class j's mean row, with variance
  per coordinate about sum_k ((R^T)^-1)[j, k]^2 c_k E||z||^2 / (m' n_j^2).

The public documents give their own class means (variance: their within-class variance over their
count). The two are combined per class by inverse variance (:func:`combine`): with few private users
or a small epsilon the public means dominate and the model is the public model in this space; with
many the private means take over. The classifier is the linear discriminant of the combined means
under the public documents' pooled within-class covariance (Ledoit-Wolf shrinkage, scikit-learn):
logits = u Sigma^-1 mu_j^T - mu_j Sigma^-1 mu_j^T / 2 + log pi_j. It scores a clean row u on the device
(on-device inference) or a release z on the server (server-side inference: E[logits(z)] = logits(u)).

Written by hand: no maintained library debiases randomized-response labels and unbiased sphere
releases together; the shrinkage is scikit-learn's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


class LinearHead(nn.Module):
    """logits = x W^T + b: the ``class-means`` server model (m' -> K), loaded like the MLP's state dict."""

    def __init__(self, m_prime: int, num_classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(m_prime, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


@dataclass(frozen=True)
class PublicStatistics:
    """What the public documents give, in the release space: class means [K, m'], the variance per
    coordinate of each mean [K], the pooled within-class covariance [m', m'] and the class priors [K]."""

    means: np.ndarray
    mean_variance: np.ndarray
    covariance: np.ndarray
    priors: np.ndarray


@dataclass(frozen=True)
class Fit:
    """A fitted ``class-means`` model and how it was obtained: the combined means, the private share
    of each (its inverse-variance weight), the debiased private counts and means, and the model."""

    means: np.ndarray
    private_weight: np.ndarray
    private_counts: np.ndarray
    private_means: np.ndarray | None
    weight: np.ndarray  # [K, m']
    bias: np.ndarray  # [K]

    def head(self) -> LinearHead:
        """The fit as a :class:`LinearHead` (float32)."""
        k, m = self.weight.shape
        head = LinearHead(m, k)
        with torch.no_grad():
            head.linear.weight.copy_(torch.as_tensor(self.weight, dtype=torch.float32))
            head.linear.bias.copy_(torch.as_tensor(self.bias, dtype=torch.float32))
        return head.eval()

    def describe(self) -> dict[str, object]:
        """The fit's figures for the round record."""
        return {
            "private_weight": [round(float(w), 4) for w in self.private_weight],
            "private_counts_debiased": [round(float(c), 1) for c in self.private_counts],
        }


def public_statistics(u: np.ndarray, y: np.ndarray, num_classes: int) -> PublicStatistics:
    """Class means, their variances, the Ledoit-Wolf pooled covariance and the priors of public rows ``u``
    [n, m'] (the public documents mapped and normalised as the nodes map theirs) with labels ``y``."""
    from sklearn.covariance import ledoit_wolf

    u = np.asarray(u, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    counts = np.bincount(y, minlength=num_classes)
    if (counts == 0).any():
        raise ValueError(f"class-means needs public documents of every class, got counts {counts.tolist()}")
    means = np.stack([u[y == j].mean(axis=0) for j in range(num_classes)])
    centred = u - means[y]
    per_coordinate = np.array([float((centred[y == j] ** 2).mean()) for j in range(num_classes)])
    covariance = ledoit_wolf(centred, assume_centered=True)[0]
    return PublicStatistics(means, per_coordinate / counts, covariance, counts / counts.sum())


def label_transition(log_transition: torch.Tensor | None, num_classes: int) -> np.ndarray:
    """R[j, k] = P(released label k | true label j): ``exp`` of the label mechanism's log transition
    matrix, or the identity for labels in the clear (``None``)."""
    if log_transition is None:
        return np.eye(num_classes)
    r = np.exp(np.asarray(log_transition.detach().cpu(), dtype=np.float64))
    if r.shape != (num_classes, num_classes):
        raise ValueError(f"the label mechanism's transition matrix is {r.shape}, expected {(num_classes,) * 2}")
    return r


def debiased_sums(z: np.ndarray, released: np.ndarray, transition: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unbiased class sums [K, m'] and class counts [K] of the true labels, from releases ``z`` [N, m']
    (unbiased for their rows) with released labels ``released`` [N] drawn through ``transition``."""
    k = transition.shape[0]
    released = np.asarray(released, dtype=np.int64)
    t = np.zeros((k, z.shape[1]))
    np.add.at(t, released, np.asarray(z, dtype=np.float64))
    c = np.bincount(released, minlength=k).astype(np.float64)
    inverse = np.linalg.inv(transition.T)
    return inverse @ t, inverse @ c


def private_mean_variance(
    released_counts: np.ndarray, transition: np.ndarray, second_moment: float, counts: np.ndarray, m_prime: int
) -> np.ndarray:
    """Variance per coordinate of each debiased class mean S_j / n_j: sum_k ((R^T)^-1)[j, k]^2 c_k E||z||^2
    / (m' n_j^2) (the releases' spread split evenly over the coordinates; the count's own noise is left
    out, second order). Infinite for a class whose debiased count is not positive."""
    inverse = np.linalg.inv(transition.T)
    spread = (inverse**2) @ np.asarray(released_counts, dtype=np.float64) * float(second_moment) / m_prime
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(counts > 0, spread / np.maximum(counts, 1e-300) ** 2, np.inf)


def combine(
    private_means: np.ndarray, private_variance: np.ndarray, public: PublicStatistics
) -> tuple[np.ndarray, np.ndarray]:
    """Per class, the inverse-variance combination of the private and public means: (means [K, m'],
    private weight [K] = v_pub / (v_pub + v_priv), 0 where the private mean is undefined)."""
    finite = np.isfinite(private_variance)
    weight = np.where(
        finite, public.mean_variance / (public.mean_variance + np.where(finite, private_variance, 1.0)), 0.0
    )
    safe = np.where(finite[:, None], private_means, 0.0)
    return weight[:, None] * safe + (1 - weight[:, None]) * public.means, weight


def discriminant(means: np.ndarray, covariance: np.ndarray, priors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The linear discriminant of class means [K, m'] under a shared covariance: (W [K, m'], b [K]),
    logits = u W^T + b."""
    w = np.linalg.solve(covariance, means.T).T
    b = -0.5 * np.einsum("jk,jk->j", w, means) + np.log(priors)
    return w, b


#: Smallest eigenvalue kept in a covariance debiased from releases, relative to its largest (the debiased
#: estimate is not positive definite by construction; its noise lives mostly in the small eigenvalues).
EIGENVALUE_FLOOR = 1e-4


def release_covariance(
    z: np.ndarray,
    law: tuple[float, float],
    counts: np.ndarray,
    means: np.ndarray,
    target: np.ndarray | None = None,
    second_moment: float | None = None,
) -> np.ndarray:
    """The within-class covariance [m', m'] of the users' rows, debiased from their releases ``z`` [N, m'].

    ``law`` = (a, b) with E[z z^T | u] = a u u^T + b I (the mechanism's ``second_moment_law``), so
    (mean z z^T - b I) / a estimates the rows' mean u u^T without bias; the debiased class means ``means``
    [K, m'] weighted by the debiased class shares ``counts`` [K] remove the between-class part. The result is
    projected onto the positive definite matrices (eigenvalues floored at :data:`EIGENVALUE_FLOOR` times the
    largest). Post-processing of the releases: no privacy cost. Its noise grows with m'^2 / N: accurate
    where the releases are few-dimensional (``cohorts``' last cohort, a small ``map-dim``)."""
    a, b = law
    z = np.asarray(z, dtype=np.float64)
    d = z.shape[1]
    second = (z.T @ z / len(z) - b * np.eye(d)) / a
    share = np.maximum(np.asarray(counts, dtype=np.float64), 1.0)
    share = share / share.sum()
    within = second - np.einsum("j,ja,jb->ab", share, means, means)
    if target is not None and second_moment is not None:
        # Shrink toward the public covariance by the known noise (Ledoit-Wolf's rule with the noise known, not
        # estimated): the entries' total noise variance is about E||z||^4 / (N a^2) = second_moment^2 / (N a^2).
        noise = float(second_moment) ** 2 / (len(z) * a**2)
        gap = float(((within - target) ** 2).sum())
        weight = max(gap - noise, 0.0) / gap if gap > 0 else 0.0
        within = weight * within + (1 - weight) * target
    values, vectors = np.linalg.eigh((within + within.T) / 2)
    floor = EIGENVALUE_FLOOR * max(float(values.max()), 1e-12)
    return (vectors * np.maximum(values, floor)) @ vectors.T


def fit(
    z: np.ndarray,
    released: np.ndarray,
    transition: np.ndarray,
    second_moment: float,
    public: PublicStatistics,
    covariance_law: tuple[float, float] | None = None,
) -> Fit:
    """The ``class-means`` model from releases ``z`` [N, m'] (unbiased, E||z||^2 = ``second_moment``) with
    released labels (``transition``: their law) and the public statistics; with no releases, the public
    model in this space (every weight 0). With ``covariance_law`` (the mechanism's (a, b), see
    :func:`release_covariance`) the discriminant uses the within-class covariance debiased from the releases
    instead of the public one (``class-means-covariance = "releases"``)."""
    k, m_prime = public.means.shape
    if len(z) == 0:
        w, b = discriminant(public.means, public.covariance, public.priors)
        return Fit(public.means, np.zeros(k), np.zeros(k), None, w, b)
    sums, counts = debiased_sums(z, released, transition)
    with np.errstate(divide="ignore", invalid="ignore"):
        private_means = np.where(counts[:, None] > 0, sums / np.where(counts > 0, counts, 1.0)[:, None], 0.0)
    variance = private_mean_variance(
        np.bincount(np.asarray(released, dtype=np.int64), minlength=k), transition, second_moment, counts, m_prime
    )
    means, weight = combine(private_means, variance, public)
    priors = np.maximum(counts, 1.0) / np.maximum(counts, 1.0).sum()  # the private users' class balance
    covariance = public.covariance
    if covariance_law is not None:
        covariance = release_covariance(z, covariance_law, counts, private_means, public.covariance, second_moment)
    w, b = discriminant(means, covariance, priors)
    return Fit(means, weight, counts, private_means, w, b)
