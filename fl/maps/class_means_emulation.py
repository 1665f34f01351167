"""A ``class-means`` run emulated on public documents only, for ``sanitas tune`` (``fl.maps.recipes``): what the
recipe (map-dim, the budget's split, with cohorts the earlier cohorts' map-dim and the covariance) would give on a
public hold-out, and what the public-only model it falls back to gives there, costing no privacy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from fl.config import ReleaseConfig, ServerConfig
from fl.maps import input_map as maps
from fl.maps.class_means import Fit, fit, label_transition, public_statistics
from fl.maps.cohorts import discriminant_directions, next_projection
from fl.maps.input_map import apply_input_map
from fl.maps.public_model import PublicModel, projection_map


class Parts(NamedTuple):
    """The public documents of one emulated class-means run, as sorted row indices: the stand-in for the run's
    public split (``public``: its public model, projection and class statistics), the stand-in for its private
    users (``private``) and the hold-out, the stand-in for its test users (``held``)."""

    public: np.ndarray
    private: np.ndarray
    held: np.ndarray


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


def emulate(*args: Any, **kwargs: Any) -> float:
    """On-device accuracy of a ``class-means`` run emulated on public documents only: the mean of
    :func:`emulate_rows` (same arguments)."""
    return float(emulate_rows(*args, **kwargs).mean())


def emulate_rows(
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
) -> np.ndarray:
    """Which of the held-out rows a ``class-means`` run emulated on public documents only classifies right (bool
    [len(held)], on-device: their clean rows; ``sanitas tune``).

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
    return np.asarray(pred == np.asarray(y_held))


def plan_for(release: ReleaseConfig, server: ServerConfig, num_classes: int) -> CohortPlan | None:
    """The :class:`CohortPlan` of the run whose release and server sections these are (``cohorts``,
    ``cohort-map-dim``, ``class-means-covariance``); ``None`` for one cohort with the public covariance."""
    if server.cohorts == 1 and server.class_means_covariance != "releases":
        return None

    def moments(dim: int) -> tuple[Any, float]:
        other = release.mechanism("sentence", input_dim=dim, num_classes=num_classes)
        return (lambda rows, gen: other.sanitize(rows, generator=gen)), float(other.unbiased_moments(dim))

    def covariance_law(dim: int) -> tuple[float, float] | None:
        return release.mechanism("sentence", input_dim=dim, num_classes=num_classes).second_moment_law(dim)

    releases = server.class_means_covariance == "releases"
    return CohortPlan(server.cohorts, server.cohort_map_dim, covariance_law if releases else None, moments)


def emulate_recipe(
    release: ReleaseConfig,
    server: ServerConfig,
    x: torch.Tensor,
    y: torch.Tensor,
    parts: Parts,
    model: PublicModel,
    num_classes: int,
    num_users: int,
    generator: torch.Generator,
) -> np.ndarray:
    """Which hold-out rows (bool [len(parts.held)], their clean rows) the ``class-means`` run whose release and
    server sections these are classifies right, emulated on public documents ``x``, ``y`` (:func:`emulate_rows`):
    ``parts`` cuts them in three, ``model`` is the public model
    of ``parts.public``, ``num_users`` rows resampled from ``parts.private`` are released.

    ``release``: ``map-in``, ``map-dim``, the sentence mechanism (which must release without bias) and the label
    mechanism (``rr`` or ``none``); ``server``: ``cohorts``, ``cohort-map-dim`` and ``class-means-covariance``
    (:func:`plan_for`); ``generator``: every draw."""
    m_prime = maps.map_dim(release, x.shape[1])
    mech = release.mechanism("sentence", input_dim=m_prime, num_classes=num_classes)
    second = mech.unbiased_moments(m_prime)
    if second is None:
        raise ValueError(f"server-model = 'class-means' needs unbiased releases; {release.sentence_mechanism!r} is not")
    law, label_sanitize = None, None
    if release.label_mechanism == "rr":
        label = release.mechanism("label")
        law = label.log_transition_matrix(num_classes)

        def label_sanitize(labels: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
            return label.sanitize(labels, num_classes, generator=gen)

    elif release.label_mechanism != "none":
        raise ValueError("sanitas tune emulates label-mechanism 'rr' or 'none'")
    xn, yn = x.cpu().numpy(), y.cpu().numpy()
    return emulate_rows(
        model,
        (xn[parts.public], yn[parts.public]),
        (xn[parts.private], yn[parts.private]),
        (xn[parts.held], yn[parts.held]),
        num_classes,
        m_prime,
        lambda rows, gen: mech.sanitize(rows, generator=gen),
        second,
        law,
        label_sanitize,
        int(num_users),
        generator,
        plan_for(release, server, num_classes),
    )


def public_only(
    model: PublicModel,
    public: tuple[np.ndarray, np.ndarray],
    held: tuple[np.ndarray, np.ndarray],
    num_classes: int,
    m_prime: int,
    cohorts: int = 1,
    first_dim: int = 0,
) -> np.ndarray:
    """Which of ``held``'s clean rows (bool [len(held)]) are classified right by the model a ``class-means`` run
    ships when its server sets every release aside (the public-only fallback of ``sanitas compare``,
    ``simulations.drivers.compare_fallback``): the discriminant of the public class statistics of ``public``
    (whose public model is ``model``) in the projection of ``m_prime`` columns; with ``cohorts`` > 1 the earlier
    cohorts' projection has ``first_dim`` columns (0: ``m_prime``) and each later one is refitted from the fit
    before it, as the run refits it, from public data alone here."""
    (x_pub, y_pub), (x_held, y_held) = public, held
    matrix = projection_map(x_pub, model, (first_dim or m_prime) if cohorts > 1 else m_prime)
    fitted: Fit | None = None
    for index in range(cohorts):
        if fitted is not None:
            width = m_prime if index == cohorts - 1 else (first_dim or m_prime)
            matrix = next_projection(discriminant_directions(matrix, fitted.weight), x_pub, model.weight, width)
        stats = public_statistics(apply_input_map(x_pub, matrix).numpy(), y_pub, num_classes)
        fitted = fit(np.zeros((0, int(matrix.shape[1]))), np.zeros(0, np.int64), np.eye(num_classes), 1.0, stats)
    assert fitted is not None
    pred = (apply_input_map(x_held, matrix).numpy() @ fitted.weight.T + fitted.bias).argmax(axis=1)
    return np.asarray(pred == np.asarray(y_held))
