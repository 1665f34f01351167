"""A ``class-means`` run emulated on public documents only, for ``sanitas tune`` (``fl.maps.recipes``): what the
recipe (map-dim, the budget's split) would give on a public hold-out, costing no privacy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from fl.maps.class_means import Fit, fit, label_transition, public_statistics
from fl.maps.cohorts import discriminant_directions, next_projection
from fl.maps.input_map import apply_input_map
from fl.maps.public_model import PublicModel, projection_map


@dataclass(frozen=True)
class CohortPlan:
    """The interactive protocol an emulation follows (``cohorts``, fl.maps.cohorts): the number of disjoint
    cohorts, the earlier cohorts' m' (``cohort-map-dim``; the last releases at the run's ``map-dim``), and the
    last cohort's covariance law (the mechanism's (a, b) with ``class-means-covariance = "releases"``, else
    ``None``)."""

    cohorts: int = 1
    first_dim: int = 0
    covariance_law: Callable[[int], tuple[float, float] | None] | None = None
    moments: Callable[[int], tuple[Callable[[torch.Tensor, torch.Generator], torch.Tensor], float]] | None = None


def emulate(
    model: PublicModel,
    public: tuple[np.ndarray, np.ndarray],
    private: tuple[np.ndarray, np.ndarray],
    held: tuple[np.ndarray, np.ndarray],
    num_classes: int,
    m_prime: int,
    sanitize: Callable[[torch.Tensor, torch.Generator], torch.Tensor],
    second_moment: float,
    label_law: torch.Tensor | None,
    label_sanitize: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None,
    num_users: int,
    generator: torch.Generator,
    plan: CohortPlan | None = None,
) -> float:
    """On-device accuracy of a ``class-means`` run emulated on public documents only (``sanitas tune``).

    The public documents are cut in three: ``public`` stands in for the run's public split (the public
    model ``model`` was fitted on it; the projection M1 and the public class statistics come from it),
    ``private`` for the private users (``num_users`` rows resampled from it, each released through
    ``sanitize``, the sentence mechanism, and ``label_sanitize``, the label mechanism whose law is
    ``label_law``; ``None``: labels in the clear), ``held`` for the test users, scored on their clean rows
    (on-device inference). The private stand-in holds documents the public stand-in does not, as the run's
    private users do: resampling the public documents themselves would make every private mean one the
    public statistics already hold, and the emulation would never prefer a larger projection.

    With a ``plan`` of several cohorts the resampled users are split in as many equal cohorts, released in turn:
    the earlier ones in the public projection of ``plan.first_dim`` (``plan.moments(dim)`` gives that
    dimension's sanitizer and second moment), each later one along :func:`fl.maps.cohorts.next_projection` of the
    fit before it, the last one at ``m_prime`` with its covariance from its releases where ``plan`` says so, as
    the run's server does."""
    (x_pub, y_pub), (x_priv, y_priv), (x_held, y_held) = public, private, held
    plan = plan or CohortPlan()
    rows = torch.randint(len(y_priv), (int(num_users),), generator=generator)
    labels = torch.as_tensor(np.asarray(y_priv), dtype=torch.int64)[rows]
    transition = label_transition(label_law, num_classes)
    parts = np.array_split(np.arange(int(num_users)), plan.cohorts)
    matrix = projection_map(x_pub, model, (plan.first_dim or m_prime) if plan.cohorts > 1 else m_prime)
    fitted: Fit | None = None
    for index, part in enumerate(parts):
        last = index == plan.cohorts - 1
        if fitted is not None:
            directions = discriminant_directions(matrix, fitted.weight)
            width = m_prime if last else (plan.first_dim or m_prime)
            matrix = next_projection(directions, x_pub, model.weight, width)
        dim = int(matrix.shape[1])
        draw, second = (sanitize, second_moment) if dim == m_prime or plan.moments is None else plan.moments(dim)
        stats = public_statistics(apply_input_map(x_pub, matrix).numpy(), y_pub, num_classes)
        z = draw(apply_input_map(x_priv, matrix)[rows[part]], generator).to(torch.float64).numpy()
        released = labels[part] if label_sanitize is None else label_sanitize(labels[part], generator)
        law = plan.covariance_law(dim) if last and plan.covariance_law is not None else None
        fitted = fit(z, released.numpy(), transition, second, stats, covariance_law=law)
    assert fitted is not None
    u_held = apply_input_map(x_held, matrix).numpy()
    pred = (u_held @ fitted.weight.T + fitted.bias).argmax(axis=1)
    return float((pred == np.asarray(y_held)).mean())
