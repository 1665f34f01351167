"""User-level DP-FedAvg emulated on public documents: will a central point's settings learn anything?

A user-level central run at a small per-user epsilon on a small dataset can end where it started: a
model that always answers the majority class (87% "ham"). Its settings (server and client learning
rates, rounds, cohort size) decide that, and the place to find out is public data, never the private
users or the test split. :func:`emulate_user_level` runs the same algorithm as
``strategies.central_user`` (the same start, Poisson sampling, per-user clipped updates, the server's
Gaussian noise at the point's noise multiplier, the server optimizer) with the public documents as
users, one document each, and scores each round's model on a seeded public hold-out.

How to read it: the hold-out is never a user of the emulation, but M1 and a public-trained start
(``map-in = "public"`` or ``"supervised"``) are fitted on the whole public split, so the emulated
accuracy is, if anything, optimistic. ``sanitas compare`` therefore only refuses settings that learn
nothing even here. When the public split holds fewer users than the run's expected cohort, the
emulation's cohort is smaller and its noise, relative to the signal, larger: a pessimistic point,
stated in the result (``cohort``).

The head only (``central-train = "head"``): an encoder's central tuning is not emulated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from fl.config import CentralConfig, ReleaseConfig
from fl.maps import input_map as maps
from fl.maps.pipeline import predict
from fl.reporting.outcome import learned, majority_rate
from fl.threads import sized_threads
from fl.training.central_start import CentralStart
from fl.training.user_updates import clipped_update_sum, noisy_mean

#: The share of the public documents held out to score the emulated model.
HOLD_OUT = 0.2
#: Rounds at the end whose mean hold-out accuracy is the verdict (one noisy round is not).
LAST_ROUNDS = 3


@dataclass(frozen=True)
class Emulation:
    """One emulated central point: its settings and what the public hold-out says."""

    noise_multiplier: float
    server_learning_rate: float
    rounds: int
    users: int  # public documents that took part as users
    cohort: float  # expected users per round, q * users
    hold_out: int
    majority_class_rate: float
    accuracy: list[float]  # after each round
    learned: bool  # the mean accuracy of the last LAST_ROUNDS rounds beats the majority-class rate

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def public_split(
    x: torch.Tensor, y: torch.Tensor, seed: int
) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """A seeded (users, hold-out) split of the public embeddings and labels."""
    n = int(y.shape[0])
    order = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed) * 7919 + 17))
    cut = max(1, round(HOLD_OUT * n))
    return (x[order[cut:]], y[order[cut:]]), (x[order[:cut]], y[order[:cut]])


def emulate_user_level(
    start_fn: Callable[[int, int, int], CentralStart],
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    noise_multiplier: float,
    server_learning_rate: float | None = None,
    *,
    central: CentralConfig,
    release: ReleaseConfig,
    seed: int,
    rounds: int,
) -> Emulation:
    """User-level DP-FedAvg of a run (its start, rounds, cohort size, clip, local steps and learning
    rates; ``server_learning_rate`` instead of the config's when given) at ``noise_multiplier``, with the
    public embeddings ``x`` [n, d] (the run's encoder) and labels ``y`` as users, one document each,
    scored on a seeded public hold-out after every round. Deterministic given the run's seeds.

    Parameters
    ----------
    start_fn : Callable[[int, int, int], CentralStart]
        Builds the run's start from ``(m', d, num_classes)``, as the server does:
        ``functools.partial(fl.training.central_start.central_start, PublicSpec.from_config(cfg), cfg.central)``
        (:class:`fl.maps.public_start.PublicSpec`). Called once per emulation,
        with torch's global generator restored afterwards; the model it returns is trained in place.
    x, y : torch.Tensor
        The public embeddings [n, d] and labels [n]; a seeded fifth is the hold-out.
    num_classes : int
        Classes of the task.
    noise_multiplier : float
        z, the Gaussian noise's std over the clip, of the point emulated.
    server_learning_rate : float or None
        The server optimizer's step size; ``None``: ``central.server_learning_rate``.
    central : CentralConfig
        The run's central section (``cfg.central``): ``central-cohort-size``, ``central-clip``,
        ``local-epochs`` (per-user SGD steps), ``client-learning-rate``, ``server-optimizer`` and
        ``server-learning-rate``.
    release : ReleaseConfig
        The run's release section (``cfg.release``): ``map-in``, ``map-dim`` and ``map-seed`` (M1).
    seed : int
        The run's ``seed`` (``cfg.users.seed``): the hold-out split and the users' sampling and noise.
    rounds : int
        Rounds of the federation (``cfg.server.num_server_rounds``).
    """
    lr = float(central.server_learning_rate if server_learning_rate is None else server_learning_rate)
    (xu, yu), (xh, yh) = public_split(x, y, int(seed))
    d = int(x.shape[1])
    m_prime = maps.map_dim(release, d)
    with torch.random.fork_rng(devices=[]):  # the start seeds torch's global generator: leave it as it was
        start = start_fn(m_prime, d, num_classes)
    model = start.model.to("cpu")
    matrix = start.matrix
    if matrix is None and release.map_in not in maps.FROM_SERVER:
        matrix = maps.input_map(release.map_in, d, m_prime, release.map_seed)
    features = maps.apply_input_map(xu, matrix).to(torch.float32)
    hold_out = maps.apply_input_map(xh, matrix).to(torch.float32)
    users = int(yu.shape[0])
    q = min(1.0, float(central.central_cohort_size) / users)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer: torch.optim.Optimizer = (
        torch.optim.Adam(trainable, lr=lr) if central.server_optimizer == "adam" else torch.optim.SGD(trainable, lr=lr)
    )
    gen = torch.Generator().manual_seed(int(seed) * 1_000_003 + 0x5E1)
    clip, steps = float(central.central_clip), int(central.local_epochs)
    accuracy = []
    with sized_threads(model, max(1, round(q * users))):
        for _ in range(int(rounds)):
            sampled = torch.nonzero(torch.rand(users, generator=gen) < q).flatten()
            if sampled.numel():
                xs, ys = features[sampled][:, None, :], yu[sampled][:, None]
                mask = torch.ones(ys.shape, dtype=torch.bool)
                total, _ = clipped_update_sum(model, xs, ys, mask, steps, float(central.client_learning_rate), clip)
            else:
                total = {k: torch.zeros_like(p) for k, p in model.named_parameters() if p.requires_grad}
            mean = noisy_mean(total, float(noise_multiplier), clip, q * users, gen)
            optimizer.zero_grad(set_to_none=True)
            for k, p in model.named_parameters():
                if p.requires_grad:
                    p.grad = -mean[k].to(p.dtype)  # the mean update points downhill
            optimizer.step()
            accuracy.append(float((predict(model, hold_out) == yh).double().mean()))
    majority = majority_rate(np.bincount(yh.numpy(), minlength=num_classes).tolist()) or 0.0
    return Emulation(
        noise_multiplier=float(noise_multiplier),
        server_learning_rate=lr,
        rounds=len(accuracy),
        users=users,
        cohort=q * users,
        hold_out=int(yh.shape[0]),
        majority_class_rate=majority,
        accuracy=accuracy,
        learned=bool(learned(float(np.mean(accuracy[-LAST_ROUNDS:])) if accuracy else None, majority)),
    )
