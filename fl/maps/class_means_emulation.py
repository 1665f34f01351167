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
) -> float:
    """On-device accuracy of a ``class-means`` run emulated on public documents only (``sanitas tune``).

    The public documents are cut in three: ``public`` stands in for the run's public split (the public
    model ``model`` was fitted on it; the projection M1 and the public class statistics come from it),
    ``private`` for the private users (``num_users`` rows resampled from it, each released through
    ``sanitize``, the sentence mechanism, and ``label_sanitize``, the label mechanism whose law is
    ``label_law``; ``None``: labels in the clear), ``held`` for the test users, scored on their clean rows
    (on-device inference). The private stand-in holds documents the public stand-in does not, as the run's
    private users do: resampling the public documents themselves would make every private mean one the
    public statistics already hold, and the emulation would never prefer a larger projection."""
    (x_pub, y_pub), (x_priv, y_priv), (x_held, y_held) = public, private, held
    matrix = projection_map(x_pub, model, m_prime)
    stats = public_statistics(apply_input_map(x_pub, matrix).numpy(), y_pub, num_classes)
    rows = torch.randint(len(y_priv), (int(num_users),), generator=generator)
    z = sanitize(apply_input_map(x_priv, matrix)[rows], generator).to(torch.float64).numpy()
    labels = torch.as_tensor(np.asarray(y_priv), dtype=torch.int64)[rows]
    released = labels if label_sanitize is None else label_sanitize(labels, generator)
    fitted = fit(z, released.numpy(), label_transition(label_law, num_classes), second_moment, stats)
    u_held = apply_input_map(x_held, matrix).numpy()
    pred = (u_held @ fitted.weight.T + fitted.bias).argmax(axis=1)
    return float((pred == np.asarray(y_held)).mean())
