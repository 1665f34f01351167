"""The model fitted on the public data alone, and the public projection M1 built from it.

Every run is held against this model (ARCHITECTURE.md, "Public data and fair comparisons"):
federation exists to add what the private users know, so a point that does not beat the model
that never saw a private user adds nothing, however close it sits to the non-private figure.

* :func:`fit_public_model`: a logistic regression on the encoder's embeddings of the public
  documents, its L2 strength chosen by cross-validation on the public documents alone, folds
  grouped by source (a text and the texts that contain it stay in one fold), so near-duplicate
  phrases do not leak across folds. scikit-learn fits it (lbfgs, deterministic).
* :func:`projection_map`: the affine M1 of ``map-in = "projection"``: centred on the public mean,
  the public model's logit directions (orthonormalised), then the top principal directions of the
  centred public embeddings with those directions projected out. The released vector is
  n((x - c) P): a point of the unit sphere of dimension m' whose first coordinates carry what the
  public classifier reads and the rest what the public documents vary in most.

Both read public documents only, so they are public: they cost no privacy and travel in the clear.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fl.threads import blas_threads_for

#: L2 strengths (scikit-learn's C) tried by the cross-validation.
C_GRID: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
#: Folds of the cross-validation (fewer when a class has fewer source groups).
FOLDS = 5


@dataclass(frozen=True)
class PublicModel:
    """The public logistic regression as an affine map to K logits: ``logits = x @ weight + bias``.

    ``weight`` [d, K] and ``bias`` [K] (float64); ``l2`` is the C chosen, ``cv_accuracy`` its mean
    cross-validated accuracy on the public documents (``None`` when too few to cross-validate).
    """

    weight: np.ndarray
    bias: np.ndarray
    l2: float
    cv_accuracy: float | None

    def as_matrix(self) -> torch.Tensor:
        """The homogeneous [d + 1, K] float64 form (last row: the bias) that travels to the nodes."""
        return torch.as_tensor(np.vstack([self.weight, self.bias[None, :]]), dtype=torch.float64)

    def predict(self, x: np.ndarray | torch.Tensor) -> np.ndarray:
        """Argmax class of each row of ``x`` [n, d]."""
        return predict_affine(self.as_matrix().numpy(), x)


def predict_affine(matrix: np.ndarray, x: np.ndarray | torch.Tensor) -> np.ndarray:
    """Argmax class of each row of ``x`` [n, d] under the homogeneous [d + 1, K] logits ``matrix``
    (:meth:`PublicModel.as_matrix`, the form that travels), int64 [n]."""
    xn = np.asarray(torch.as_tensor(x).detach().cpu(), dtype=np.float64)
    return np.asarray((xn @ matrix[:-1] + matrix[-1]).argmax(axis=1), dtype=np.int64)


def _logistic(c: float):  # -> sklearn LogisticRegression
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=float(c), max_iter=5000)


def fit_public_model(
    x: np.ndarray | torch.Tensor, y: np.ndarray | torch.Tensor, num_classes: int, groups: np.ndarray | None = None
) -> PublicModel:
    """The logistic regression on public embeddings ``x`` [n, d] with labels ``y``, C from :data:`C_GRID`
    by grouped cross-validation (``groups``: each document's source group; ``None`` = every document its
    own group). Ties go to the smaller C (stronger regularisation). Deterministic.

    Raises ``ValueError`` unless every class has a public document."""
    from sklearn.model_selection import GroupKFold

    xn = np.asarray(torch.as_tensor(x).detach().cpu(), dtype=np.float64)
    yn = np.asarray(torch.as_tensor(y).detach().cpu(), dtype=np.int64)
    if np.unique(yn).size < num_classes:
        raise ValueError(
            f"the public model needs public documents of every class: the public split has "
            f"{np.unique(yn).size} of {num_classes}"
        )
    g = np.arange(yn.size) if groups is None else np.asarray(groups)
    folds = min(FOLDS, np.unique(g).size, int(np.bincount(yn, minlength=num_classes).min()))
    best_c, best_acc = 1.0, None
    with blas_threads_for(float(xn.size)):
        if folds >= 2:
            splits = list(GroupKFold(n_splits=folds).split(xn, yn, g))
            for c in C_GRID:
                accs = []
                for fit, held in splits:
                    if np.unique(yn[fit]).size < 2:
                        continue
                    accs.append(float((_logistic(c).fit(xn[fit], yn[fit]).predict(xn[held]) == yn[held]).mean()))
                acc = float(np.mean(accs)) if accs else None
                if acc is not None and (best_acc is None or acc > best_acc + 1e-12):
                    best_c, best_acc = c, acc
        clf = _logistic(best_c).fit(xn, yn)
    coef, intercept = clf.coef_.astype(np.float64), clf.intercept_.astype(np.float64)
    if num_classes == 2:  # one logit for class 1 against 0: as two logits (0 for class 0)
        weight = np.hstack([np.zeros((xn.shape[1], 1)), coef.T])
        bias = np.array([0.0, intercept[0]])
    else:
        weight, bias = coef.T, intercept
    return PublicModel(weight=weight, bias=bias, l2=best_c, cv_accuracy=best_acc)


def check_projection_size(m_prime: int, num_public: int, num_classes: int) -> None:
    """Refuse, before a run starts, a ``map-dim`` that the public documents cannot span: the projection
    takes the public model's k logit directions (k = 1 for two classes, K - 1 for K) and at most one
    principal direction per public document (``ConfigError``, one line naming both numbers)."""
    from fl.config import ConfigError

    k = 1 if num_classes == 2 else num_classes - 1
    if m_prime > num_public + k:
        raise ConfigError(
            f"map-in = 'projection' with map-dim = {m_prime}: {num_public} public documents span at most "
            f"{num_public + k} dimensions; lower map-dim or add public data (public-size, public-fraction)"
        )


def projection_map(x: np.ndarray | torch.Tensor, model: PublicModel, m_prime: int) -> torch.Tensor:
    """The affine M1 of ``map-in = "projection"`` from public embeddings ``x`` and the public model.

    Columns of P: an orthonormal basis of the public model's logit directions (k = 1 for two
    classes, K - 1 for K: the directions of the logit differences), then the top m' - k principal
    directions of the centred public embeddings with those directions projected out. Returned in
    homogeneous form [d + 1, m'] float64: P above the offset row -c P (c the public mean), so a node
    computes x M1 + b = (x - c) P and releases its normalised value."""
    xn = np.asarray(torch.as_tensor(x).detach().cpu(), dtype=np.float64)
    n, d = xn.shape
    diffs = model.weight[:, 1:] - model.weight[:, :1]  # logit differences: the softmax ignores a common shift
    q, r = np.linalg.qr(diffs)
    q = q[:, np.abs(np.diag(r)) > 1e-12 * max(1.0, float(np.abs(r).max()))]
    k = q.shape[1]
    if not k < m_prime <= d:
        raise ValueError(f"map-in = 'projection' needs {k} < map-dim <= {d}, got {m_prime}")
    centre = xn.mean(axis=0)
    rest = (xn - centre) - ((xn - centre) @ q) @ q.T
    _, _, vt = np.linalg.svd(rest, full_matrices=False)
    if vt.shape[0] < m_prime - k:
        raise ValueError(f"map-dim {m_prime} exceeds what {n} public documents span (at most {vt.shape[0] + k})")
    p = np.hstack([q, vt[: m_prime - k].T])
    return torch.as_tensor(np.vstack([p, -(centre @ p)[None, :]]), dtype=torch.float64)
