"""The input map M1 (d -> m') of Du et al. (2023), in the six ``map-in`` modes.

Only a map that does not depend on private data keeps the sanitizer's local-DP
guarantee meaningful for the released vector (docs/SPEC.md §3.2-3.3):

* ``identity``: no map (m' = d).
* ``random``: a Gaussian (JL) projection from the public ``map-seed``; every
  client derives it itself.
* ``public``: trained by the server together with M2 and the classifier on the
  *public* split only, then frozen and sent to the clients.
* ``supervised``: an *affine* map computed by the server from the public
  split's labelled embeddings only (:func:`supervised_map`): the public
  logistic regression's logit coordinates and a constant coordinate (the
  ``map-scale``), so that n(M1 x + b) places a document on the sphere by how
  confidently the public classifier labels it. Frozen and sent to the clients.
* ``projection``: an *affine* map from the public split only
  (:func:`fl.maps.public_model.projection_map`): centred on the public mean, the public model's
  logit directions, then the top principal directions of what they leave; frozen and sent to the
  clients. The release space of the ``class-means`` server model (``fl.maps.class_means``).
* ``leaky``: the behaviour of Du et al.'s Sentence-LDP code (docs/SPEC.md §3.1,
  §13.1). Clients send the gradient of the loss with respect to M1, computed
  from their raw embeddings and true labels through the noise. Those gradients
  are not sanitized, so **no local-DP guarantee holds**; allowed only with
  ``allow-unaccounted-leakage = true``.

In the first four modes the mechanism input is computed under ``no_grad`` from
a detached tensor (:func:`apply_input_map`), so no gradient path reaches M1 or
the encoder (docs/SPEC.md §11.6).

An affine map x -> x M1 + b travels as one [d + 1, m'] matrix whose last row is
the offset b (homogeneous coordinates), so the wire, the map fingerprint and the
release caches treat it like a linear M1. Whatever public map is used, the
mechanism only ever sees the unit vector n(x M1 + b): a release is
epsilon * d_angular-LDP in that vector (the metric pulled back through the public
map) and pure pi * epsilon-LDP (Purkayastha) or 2 * epsilon-LDP (planar Laplace)
per document, exactly as with a linear map (docs/SPEC.md §3.3).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from fl.config import ReleaseConfig
from fl.maps.pipeline import train_epochs
from fl.threads import blas_threads_for
from mechanisms.base import SentenceMechanism, normalize_rows, straight_through
from mechanisms.class_rr import sum_zero_basis
from mechanisms.identity import NoPrivacy

#: What trains M1 through its noise: a sentence mechanism, or ``"none"`` (``NoPrivacy``) standing in for one.
SentenceRelease = SentenceMechanism | NoPrivacy

MODES: tuple[str, ...] = ("identity", "random", "public", "supervised", "projection", "leaky")
FROM_SERVER: tuple[str, ...] = ("public", "supervised", "projection", "leaky")  # modes where the clients receive M1
#: map-scale candidates tried on the public validation split when map-scale = 0 (units: the RMS
#: of the public logit coordinates; small = nearly a sign, large = nearly constant).
SCALE_CANDIDATES: tuple[float, ...] = (0.03125, 0.0625, 0.125, 0.25, 0.5, 1.0, 2.0)


def map_dim(release: ReleaseConfig, d: int) -> int:
    """m', the dimension of M1's output (the mechanism's input)."""
    return d if release.map_in == "identity" else int(release.map_dim)


def release_dim(release: ReleaseConfig, d: int, num_classes: int | None = None) -> int:
    """Columns of a released vector: the sentence mechanism's output on m' = map_dim inputs.

    Parameters
    ----------
    release : ReleaseConfig
        The run's release section: ``map-in`` and ``map-dim`` (m') and the sentence mechanism
        (``sentence-mechanism``, ``sentence-epsilon``, ``sentence-options``).
    d : int
        The encoder's embedding dimension (M1's input).
    num_classes : int or None
        The run's classes, for a task-aware mechanism whose release is one row over the classes.
    """
    m_prime = map_dim(release, d)
    mech = release.mechanism("sentence", input_dim=m_prime, num_classes=num_classes)
    return int(mech.output_dim(m_prime))


def input_map(kind: str, d: int, m_prime: int, seed: int) -> torch.Tensor | None:
    """M1 as a [d, m'] matrix derived from public values (``None`` for the identity).

    ``"random"`` (and the starting point of ``"public"``/``"leaky"``): entries
    i.i.d. N(0, 1/m') from ``torch.Generator(seed)``, so the server and every
    client derive the same matrix from the public seed.
    """
    if kind not in MODES:
        raise ValueError(f"unknown map-in {kind!r}; use one of {MODES}")
    if kind == "identity":
        return None
    if kind in ("supervised", "projection"):
        raise ValueError(f"map-in = {kind!r} is computed from the public split (fl.maps.public_start)")
    gen = torch.Generator().manual_seed(int(seed))
    return torch.randn(d, m_prime, generator=gen, dtype=torch.float64) / math.sqrt(m_prime)


def map_version(matrix: torch.Tensor | None) -> str:
    """A short fingerprint of M1: releases made under another M1 are stale."""
    if matrix is None:
        return "identity"
    return hashlib.sha256(matrix.detach().cpu().to(torch.float64).numpy().tobytes()).hexdigest()[:16]


def check_map_shape(matrix: torch.Tensor, d: int, m_prime: int) -> None:
    """Raise unless ``matrix`` is a linear [d, m'] or an affine [d + 1, m'] (last row: offset) M1."""
    if tuple(matrix.shape) not in ((d, m_prime), (d + 1, m_prime)):
        raise ValueError(
            f"the server's input map has shape {tuple(matrix.shape)}, expected {(d, m_prime)} (linear) or "
            f"{(d + 1, m_prime)} (affine: last row the offset)"
        )


@torch.no_grad()
def apply_input_map(emb: np.ndarray | torch.Tensor, matrix: torch.Tensor | None) -> torch.Tensor:
    """n(x M1) (or n(x M1 + b) for an affine [d + 1, m'] map) for each row: float64, unit rows,
    and no gradient path to ``emb`` or M1."""
    x = torch.as_tensor(emb).detach().to(torch.float64)
    if matrix is not None:
        m = matrix.detach().to(device=x.device, dtype=torch.float64)  # M1 may live elsewhere (a CPU map, CUDA rows)
        if x.shape[1] == m.shape[0] - 1:  # affine, homogeneous form
            x = x @ m[:-1] + m[-1]
        elif x.shape[1] == m.shape[0]:
            x = x @ m
        else:
            raise ValueError(f"embedding dimension {x.shape[1]} does not match the input map's {m.shape[0]}")
    return normalize_rows(x)


def logistic_directions(
    x: np.ndarray | torch.Tensor, y: np.ndarray | torch.Tensor, num_classes: int, l2: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """The public logistic regression's logit coordinates as an affine map: (A [d, k], a [k]).

    Binary: k = 1, the logit of class 1 minus class 0. K > 2 classes: the K multinomial logits
    expressed in the Helmert basis of the sum-zero subspace (``mechanisms.class_rr.sum_zero_basis``;
    k = K - 1: the softmax ignores a common shift). L2-regularised (scikit-learn's ``C = l2``), lbfgs: deterministic.
    """
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(torch.as_tensor(x).detach().cpu(), dtype=np.float64)
    y = np.asarray(torch.as_tensor(y).detach().cpu(), dtype=np.int64)
    present = np.unique(y)
    if present.size < num_classes:
        raise ValueError(
            f"a supervised map needs public documents of every class: the public split has "
            f"{present.size} of {num_classes} (raise public-fraction)"
        )
    with blas_threads_for(float(x.size)):  # matrix-vector products: one thread (fl.threads)
        clf = LogisticRegression(C=float(l2), max_iter=5000).fit(x, y)
    coef, intercept = clf.coef_.astype(np.float64), clf.intercept_.astype(np.float64)
    if num_classes == 2:
        return coef[0][:, None], intercept[:1]
    basis = sum_zero_basis(num_classes).numpy()  # the layout a node's class_rr reads the logits back from
    return coef.T @ basis, intercept @ basis


def supervised_map(
    x: np.ndarray | torch.Tensor,
    y: np.ndarray | torch.Tensor,
    num_classes: int,
    m_prime: int,
    scale: float,
    l2: float = 1.0,
) -> torch.Tensor:
    """The affine M1 of ``map-in = "supervised"``, from *public* embeddings ``x`` and labels ``y`` only.

    Coordinates of x M1 + b (then normalised by the client, n(.)):

    1. the public logistic regression's k logit coordinates (:func:`logistic_directions`; k = 1 for
       two classes), divided by their RMS over the public documents;
    2. m' - k - 1 top principal directions of the centred public embeddings with the logit
       directions projected out, each scaled to unit public standard deviation (none when
       m' = k + 1, the smallest map);
    3. the constant ``scale`` (> 0): n([s, scale]) places a document at an angle that grows with
       the public classifier's confidence, so the classes sit near opposite poles and a release
       costs little accuracy where the sphere is small (m' = 2 is a circle).

    Returned in homogeneous form, [d + 1, m'] float64 (last row: the offset). It is a function
    of public documents only: the released n(x M1 + b) keeps the mechanism's guarantee.
    """
    if not scale > 0:
        raise ValueError(f"the supervised map's scale must be > 0, got {scale}")
    xn = np.asarray(torch.as_tensor(x).detach().cpu(), dtype=np.float64)
    a, b = logistic_directions(xn, y, num_classes, l2)
    k = a.shape[1]
    if m_prime < k + 1:
        raise ValueError(
            f"map-in = 'supervised' needs map-dim >= {k + 1} for {num_classes} classes ({k} logit "
            f"coordinate{'s' if k > 1 else ''} and a constant), got {m_prime}"
        )
    d = xn.shape[1]
    out = np.zeros((d + 1, m_prime))
    logits = xn @ a + b
    rms = float(np.sqrt(np.mean(logits**2))) or 1.0
    out[:d, :k], out[d, :k] = a / rms, b / rms
    extra = m_prime - k - 1
    if extra:
        mu = xn.mean(axis=0)
        q = np.linalg.qr(a)[0]  # orthonormal basis of the logit directions
        centred = xn - mu
        centred = centred - (centred @ q) @ q.T
        _, sv, vt = np.linalg.svd(centred, full_matrices=False)
        if vt.shape[0] < extra:
            raise ValueError(f"map-dim {m_prime} exceeds what {xn.shape[0]} public documents span")
        std = sv[:extra] / math.sqrt(max(xn.shape[0] - 1, 1))
        v = vt[:extra].T / np.where(std > 0, std, 1.0)
        out[:d, k : k + extra], out[d, k : k + extra] = v, -(mu @ v)
    out[d, -1] = float(scale)
    return torch.as_tensor(out, dtype=torch.float64)


def _mapped(emb: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """n(x M1) with gradients (float32), for training M1."""
    return torch.nn.functional.normalize(emb @ weight, dim=1)


def train_public_map(
    weight: torch.Tensor,
    model: nn.Module,
    emb: torch.Tensor,
    labels: torch.Tensor,
    mech: SentenceRelease,
    epochs: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator,
    progress: Callable[[], None] | None = None,
) -> tuple[torch.Tensor, float]:
    """Train M1 (``weight``, [d, m']) with ``model`` (M2 + classifier) on *public* data.

    The mechanism's noise is in the loop (straight-through), so M1, M2 and the
    classifier learn to cope with it, as in the paper, but only public documents
    are used, so the result is public. Returns the frozen M1 (float64, detached)
    and the last epoch's loss; ``model`` is trained in place.
    """
    w = nn.Parameter(weight.detach().to(emb.device, torch.float32).clone())
    optimizer = torch.optim.Adam([w, *model.parameters()], lr=lr)

    def forward(batch: torch.Tensor) -> torch.Tensor:
        return model(straight_through(mech, _mapped(batch, w), generator))

    last = train_epochs(model, optimizer, emb, labels, epochs, batch_size, generator, progress, forward=forward)
    return w.detach().to("cpu", torch.float64), last


def leaky_map_gradient(
    matrix: torch.Tensor,
    model: nn.Module,
    emb: torch.Tensor,
    labels: torch.Tensor,
    mech: SentenceRelease,
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The Sentence-LDP code's client step (docs/SPEC.md §3.1): (released rows, summed dLoss/dM1).

    The release is the sanitized n(x M1); the gradient is computed from the raw
    embeddings and true labels through the same noise draw. **The gradient is
    not private** (for one example it is a rank-one outer product that reveals
    the embedding up to scale, docs/SPEC.md §3.2).
    """
    w = matrix.detach().to(torch.float32).clone().requires_grad_(True)
    x = torch.as_tensor(emb, dtype=torch.float32)
    released = straight_through(mech, _mapped(x, w), generator)
    model.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(released.to(torch.float32)), labels, reduction="sum")
    (grad,) = torch.autograd.grad(loss, w)
    return released.detach(), grad.detach()
