"""Interaction across disjoint cohorts (``cohorts`` > 1): later cohorts release along a map that the server
fitted on earlier cohorts' releases.

A non-interactive protocol fixes the release space before any user speaks: with a little public data that is
a public projection M1 of a few dimensions, and the class-means model is held back by it (its noise-free
ceiling, docs/results/local-recipe-ceilings). Interaction lifts that limit without spending more per user
(Smith, Thakurta and Upadhyay, S&P 2017, on what non-interactive local protocols cannot do):

1. the private users are split, seeded, into ``cohorts`` disjoint cohorts of (nearly) equal size
   (:func:`cohort_users`); cohort r releases in round r, once, under the whole-record budget, so each user's
   record is still released once and the ledger charges it once;
2. after each round the server fits the class-means model on that cohort's releases and builds the next
   cohort's M1 from it (:func:`next_projection`): the fit's discriminant directions carried back to the
   encoder's space, the public logistic regression's logit directions, then the top principal directions of
   the public embeddings, orthonormalised, centred on the public mean (the form of ``map-in = "projection"``);
3. the last cohort's releases give the class means and, with ``class-means-covariance = "releases"``, the
   within-class covariance, both debiased (:func:`fl.maps.class_means.release_covariance`): the map puts the
   discriminant in a few dimensions, where the debiased covariance is accurate.

Everything the server sends is a function of public data and of earlier releases (post-processing): the maps
cost no privacy. Written by hand: no library runs multi-round local-DP protocols over Flower.
"""

from __future__ import annotations

import numpy as np
import torch


def cohort_users(num_users: int, cohorts: int, seed: int) -> list[np.ndarray]:
    """The training users [0, num_users) split into ``cohorts`` disjoint, sorted cohorts of nearly equal size,
    by a permutation seeded with ``seed`` (every user in exactly one cohort)."""
    order = np.random.default_rng([int(seed), 7_411]).permutation(int(num_users))
    return [np.sort(part) for part in np.array_split(order, int(cohorts))]


def discriminant_directions(matrix: torch.Tensor | np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The class-means model's logit-difference directions [d, K - 1] in the encoder's space: the linear part
    of the affine M1 [d + 1, m'] times the weight differences W[k] - W[0] ([K, m'] weights)."""
    m = np.asarray(torch.as_tensor(matrix).detach().cpu(), dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    return m[:-1] @ (w[1:] - w[:1]).T


def next_projection(
    directions: np.ndarray, public_x: np.ndarray | torch.Tensor, public_weight: np.ndarray, m_prime: int
) -> torch.Tensor:
    """The next cohort's affine M1 [d + 1, m'] (float64): an orthonormal basis of the fitted ``directions``
    [d, K - 1], the public logistic regression's logit differences (``public_weight`` [d, K]) and the top
    principal directions of the centred public embeddings ``public_x`` [n, d], in that order, the first m'
    independent ones; the offset row centres on the public mean, as ``map-in = "projection"`` does."""
    x = np.asarray(torch.as_tensor(public_x).detach().cpu(), dtype=np.float64)
    centre = x.mean(axis=0)
    _, _, vt = np.linalg.svd(x - centre, full_matrices=False)
    logit = public_weight[:, 1:] - public_weight[:, :1]
    candidates = np.column_stack([directions, logit, vt.T])
    q, r = np.linalg.qr(candidates)
    keep = np.abs(np.diag(r)) > 1e-10 * max(1.0, float(np.abs(r).max()))
    basis = q[:, keep][:, :m_prime]
    if basis.shape[1] < m_prime:
        raise ValueError(f"cohorts: the public data spans {basis.shape[1]} directions, fewer than map-dim {m_prime}")
    return torch.as_tensor(np.vstack([basis, -(centre @ basis)[None, :]]), dtype=torch.float64)
