"""A ``class-means`` run emulated on public documents only, for ``sanitas tune`` (``fl.maps.recipes``): what the
recipe (map-dim, the budget's split) would give on a public hold-out, costing no privacy."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from fl.maps.class_means import fit, label_transition, public_statistics
from fl.maps.input_map import apply_input_map
from fl.maps.public_model import PublicModel, projection_map


def emulate(
    model: PublicModel,
    x_fit: np.ndarray,
    y_fit: np.ndarray,
    x_held: np.ndarray,
    y_held: np.ndarray,
    num_classes: int,
    m_prime: int,
    sanitize: Callable[[torch.Tensor, torch.Generator], torch.Tensor],
    second_moment: float,
    label_law: torch.Tensor | None,
    label_sanitize: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None,
    num_users: int,
    generator: torch.Generator,
) -> float:
    """On-device accuracy of a ``class-means`` run emulated on public documents only (``sanitas tune``):
    the public model and the projection M1 are fitted on ``x_fit`` (as the run fits them on its public
    split); ``num_users`` rows resampled from ``x_fit`` stand in for the private users, each released
    through ``sanitize`` (the sentence mechanism) and ``label_sanitize`` (the label mechanism, whose law is
    ``label_law``; ``None``: labels in the clear); the model fitted from those releases and the fitting
    part's statistics scores the hold-out's clean rows (on-device inference). ``model``: the public model
    fitted on ``x_fit`` (:func:`fl.maps.public_model.fit_public_model`, once per split for every candidate)."""
    matrix = projection_map(x_fit, model, m_prime)
    u_fit = apply_input_map(x_fit, matrix)
    stats = public_statistics(u_fit.numpy(), y_fit, num_classes)
    rows = torch.randint(len(y_fit), (int(num_users),), generator=generator)
    z = sanitize(u_fit[rows], generator).to(torch.float64).numpy()
    labels = torch.as_tensor(np.asarray(y_fit), dtype=torch.int64)[rows]
    released = labels if label_sanitize is None else label_sanitize(labels, generator)
    fitted = fit(z, released.numpy(), label_transition(label_law, num_classes), second_moment, stats)
    u_held = apply_input_map(x_held, matrix).numpy()
    pred = (u_held @ fitted.weight.T + fitted.bias).argmax(axis=1)
    return float((pred == np.asarray(y_held)).mean())
