"""Per-user model updates, clipped and summed, vectorized over users (user-level DP-FedAvg).

McMahan et al. (2018), "Learning Differentially Private Recurrent Language
Models", Alg. 1: every sampled user starts from the global model, takes
``steps`` gradient steps of plain SGD on their *own* documents only, and the
difference to the global model is clipped to L2 norm ``C`` over all
parameters. A node returns only the **sum** of its users' clipped updates: no
per-user quantity leaves it.

Users hold different numbers of documents: their documents are padded to a
common count and masked, so one user's loss is the mean over their real
documents. The computation is one ``torch.func.vmap`` over users of a
``grad`` of a ``functional_call`` (no Python loop per user); the only Python
loop is over the ``steps``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from mechanisms import random_source
from mechanisms.keystream import coins


def pad_by_user(
    x: torch.Tensor, y: torch.Tensor, owner: torch.Tensor, num_users: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Documents grouped by user: ``x`` [U, D, ...], ``y`` [U, D], ``mask`` [U, D] (D = most documents
    of one user; ``x`` [n, ...] may have any trailing shape). ``owner[i]`` in [0, num_users) is the
    user of document i; a user without documents gets an all-false mask row."""
    counts = torch.bincount(owner, minlength=num_users)
    width = max(int(counts.max()) if counts.numel() else 0, 1)
    order = torch.argsort(owner, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(owner.numel(), device=owner.device) - starts[owner[order]]
    xs = x.new_zeros((num_users, width, *x.shape[1:]))
    ys = y.new_zeros((num_users, width))
    mask = torch.zeros((num_users, width), dtype=torch.bool, device=x.device)
    xs[owner[order], slot] = x[order]
    ys[owner[order], slot] = y[order]
    mask[owner[order], slot] = True
    return xs, ys, mask


def clipped_update_sum(
    model: nn.Module,
    x: torch.Tensor | tuple[torch.Tensor, ...],
    y: torch.Tensor,
    mask: torch.Tensor,
    steps: int,
    lr: float,
    clip: float,
    chunk: int = 128,
    proximal_mu: float = 0.0,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Sum over users of their clipped updates, and each user's update norm before clipping.

    ``x`` [U, D, m] (or a tuple of model inputs, each [U, D, ...]: ``fl.training.encoder`` passes
    hidden states and token masks), ``y`` [U, D], ``mask`` [U, D] from :func:`pad_by_user`. The
    update is over the model's *trainable* parameters (``requires_grad``; the frozen ones are
    constants): each user's update is ``theta_user - theta_global`` after ``steps`` SGD steps at
    ``lr`` on the user's masked mean cross-entropy, scaled by ``min(1, clip / ||update||)`` with the
    norm over all trainable parameters together: every user's contribution to the sum has norm
    <= ``clip`` (the sensitivity the server's noise is calibrated to). Users with no documents
    contribute zero. The model is not modified. Users go through ``vmap`` ``chunk`` at a time, so
    memory holds ``chunk`` per-user copies of the trainable parameters, not one per user.
    ``proximal_mu`` > 0 adds FedProx's term ``mu / 2 ||theta - theta_global||^2`` to each user's loss
    (``fl.training.proximal``); its gradient is zero at the first step, so one step is unchanged by it.
    """
    if not (clip > 0 and steps >= 1 and lr > 0):
        raise ValueError(f"need clip > 0, steps >= 1 and lr > 0, got {clip}, {steps}, {lr}")
    inputs = x if isinstance(x, tuple) else (x,)
    if steps == 1 and _trainable_in_linear(model):  # one step: the proximal term's gradient is zero there
        return _one_step_clipped_sum(model, inputs, y, mask, lr, clip)
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    frozen = {k: v.detach() for k, v in model.named_parameters() if not v.requires_grad}
    buffers = {**frozen, **{k: v.detach() for k, v in model.named_buffers()}}
    dtype = inputs[0].dtype if inputs[0].is_floating_point() else torch.float32

    def loss(p: dict[str, torch.Tensor], xu: tuple[torch.Tensor, ...], yu: torch.Tensor, mu: torch.Tensor):
        logits = functional_call(model, (p, buffers), xu)
        per_doc = nn.functional.cross_entropy(logits, yu, reduction="none")
        return (per_doc * mu).sum() / mu.sum().clamp_min(1)

    def user_update(xu: tuple[torch.Tensor, ...], yu: torch.Tensor, mu: torch.Tensor) -> dict[str, torch.Tensor]:
        p = dict(params)
        for _ in range(steps):
            g = grad(loss)(p, xu, yu, mu.to(dtype))
            p = {k: p[k] - lr * (g[k] + proximal_mu * (p[k] - params[k])) for k in p}
        return {k: p[k] - params[k] for k in p}

    total = {k: torch.zeros_like(v) for k, v in params.items()}
    all_norms = []
    for start in range(0, y.shape[0], max(1, int(chunk))):
        part = slice(start, start + max(1, int(chunk)))
        updates = vmap(user_update)(tuple(t[part] for t in inputs), y[part], mask[part])  # each [U_chunk, *shape]
        squares = [u.reshape(u.shape[0], -1).square().sum(dim=1) for u in updates.values()]
        norms = torch.sqrt(sum(squares[1:], squares[0]))  # the same sum as sum(squares): 0 + s == s exactly
        scale = torch.clamp(clip / norms.clamp_min(1e-12), max=1.0)
        for k, u in updates.items():
            total[k] += torch.tensordot(scale, u, dims=1)  # sum over users of the clipped updates
        all_norms.append(norms)
    norms = torch.cat(all_norms) if all_norms else torch.zeros(0, dtype=dtype, device=y.device)
    return total, norms


_GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function (Steele, Lea & Flood 2014) on uint64 counters, vectorised:
    a bijective mixer whose outputs for consecutive counters pass BigCrush."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(_GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def user_coins(secret: int | bytes, server_round: int, user_ids: torch.Tensor) -> torch.Tensor:
    """One uniform in [0, 1) per user id (float64, 53 bits), a function of (secret, round, user id)
    only: counter-based, so a node computes its users' coins in O(its users), whichever node asks and
    in whatever order. An integer secret mixes key + id with SplitMix64 (fast, not cryptographic); a
    32-byte key (``secure-rng``) reads the user ids' positions of the ChaCha20 keystream of
    SHA-256(key, round) (:func:`mechanisms.keystream.coins`)."""
    if isinstance(secret, bytes):
        ids = user_ids.to(torch.int64)
        if ids.numel() == 0:
            return torch.zeros(0, dtype=torch.float64)
        if int(ids.min()) < 0:
            raise ValueError("user ids must be non-negative")
        round_key = hashlib.sha256(secret + int(server_round).to_bytes(8, "little")).digest()
        first = int(ids.min())
        return coins(round_key, first, int(ids.max()) - first + 1)[ids - first]
    return torch.from_numpy(keyed_coins(np.uint64(hash_seed(secret, server_round)), user_ids.to(torch.int64).numpy()))


def keyed_coins(keys: np.ndarray | np.uint64, user_ids: np.ndarray) -> np.ndarray:
    """:func:`user_coins` of an integer secret from its round key (``hash_seed(secret, round)``), float64: one key
    for all ``user_ids``, or one key per id, so that the nodes of one process draw every user's coin in
    one pass (each id under its own node's key: the same coins as each node alone)."""
    id_words = np.asarray(user_ids, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        bits = _splitmix64(_splitmix64(id_words * np.uint64(_GOLDEN) + keys))
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _trainable_in_linear(model: nn.Module) -> bool:
    """True when every trainable parameter is the weight or bias of an ``nn.Linear`` used once per
    forward pass (the head; LoRA's adapters and the head): the frozen rest may be anything."""
    owned = {id(p) for m in model.modules() if isinstance(m, nn.Linear) for p in m.parameters(recurse=False)}
    return all(id(p) in owned for p in model.parameters() if p.requires_grad)


def one_step_sums_by_group(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    lr: float,
    clip: float,
    bounds: list[int],
) -> tuple[list[dict[str, torch.Tensor]], torch.Tensor]:
    """:func:`clipped_update_sum` for one SGD step of a model whose trainable parameters are all in
    ``nn.Linear`` layers, summed apart over consecutive groups of users: group g is users
    ``bounds[g]:bounds[g + 1]`` of ``x`` [U, D, m] / ``y`` / ``mask`` (:func:`pad_by_user`). Each user's
    update and clipping are its own, whichever group it is in; a group's sum holds its users only.

    The nodes of one process compute a round as one batch this way (``clients.central_client``): one
    forward and one backward pass for all their sampled users, then one product per node and layer."""
    if not (clip > 0 and lr > 0):
        raise ValueError(f"need clip > 0 and lr > 0, got {clip}, {lr}")
    if not _trainable_in_linear(model):
        raise ValueError("grouped one-step sums need a model whose trainable parameters are nn.Linear layers")
    if bounds[0] != 0 or bounds[-1] != y.shape[0] or any(a > b for a, b in zip(bounds, bounds[1:], strict=False)):
        raise ValueError(f"group bounds must rise from 0 to the {y.shape[0]} users, got {bounds}")
    return _one_step_clipped_sum(model, (x,), y, mask, lr, clip, bounds)


def _one_step_clipped_sum(
    model: nn.Module,
    x: tuple[torch.Tensor, ...],
    y: torch.Tensor,
    mask: torch.Tensor,
    lr: float,
    clip: float,
    bounds: list[int] | None = None,
) -> Any:
    """:func:`clipped_update_sum` for one SGD step of a model whose trainable parameters are all in
    ``nn.Linear`` layers, without materialising one gradient per user (the "ghost norm" identity of
    Goodfellow 2015 and Li et al. 2022, "Large Language Models Can Be Strong Differentially Private
    Learners").

    For a linear layer z = W a + b, user u's gradient is G_u = sum_j d_j a_j^T over the rows j that
    user u's documents put through it (one per document in the head; one per token in an encoder
    layer), d_j = dLoss_u / dz_j, so ||G_u||^2 = sum_jk (d_j . d_k)(a_j . a_k) and the bias gradient
    is sum_j d_j: the norms need one forward and one backward pass over all documents, and the clipped
    sum is sum_u s_u G_u = (s * d)^T a. Padded tokens and documents have d = 0. Same result as the
    per-user definition (tests check it).
    """
    num_users, width = mask.shape
    first = x[0]
    weights = (mask / mask.sum(dim=1, keepdim=True).clamp_min(1)).to(first.dtype).reshape(-1)  # 1 / n_u per document
    flat_y = y.reshape(-1)
    if len(x) == 1:  # the head: one row of features per document
        flat: tuple[torch.Tensor, ...] = (first.reshape(num_users * width, -1),)
    else:  # the encoder's inputs (hidden states, token mask), one per document
        flat = tuple(t.reshape(num_users * width, *t.shape[2:]) for t in x)
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    layers = [
        (name, m)
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear) and any(id(p) in trainable for p in m.parameters(recurse=False))
    ]
    inputs: dict[str, torch.Tensor] = {}
    outputs: dict[str, torch.Tensor] = {}

    def keep(name: str):
        def hook(module: nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
            inputs[name], outputs[name] = args[0].detach(), out

        return hook

    handles = [m.register_forward_hook(keep(name)) for name, m in layers]
    try:
        with torch.enable_grad():
            logits = model(*flat)
            per_doc = nn.functional.cross_entropy(logits, flat_y, reduction="none")
            deltas = torch.autograd.grad((per_doc * weights).sum(), [outputs[name] for name, _ in layers])
    finally:
        for h in handles:
            h.remove()
    sq = torch.zeros(num_users, dtype=first.dtype, device=first.device)
    for (name, m), d in zip(layers, deltas, strict=True):
        # Each user's rows through this layer: its documents (head), or its documents' tokens.
        a = inputs[name].reshape(num_users, -1, m.in_features)
        d = d.reshape(num_users, -1, m.out_features)
        if m.weight.requires_grad:
            sq += (torch.bmm(d, d.transpose(1, 2)) * torch.bmm(a, a.transpose(1, 2))).sum(dim=(1, 2))
        if m.bias is not None and m.bias.requires_grad:
            sq += d.sum(dim=1).square().sum(dim=1)
    norms = lr * sq.clamp_min(0).sqrt()  # the update is -lr * G_u
    scale = torch.clamp(clip / norms.clamp_min(1e-12), max=1.0)
    names = {id(p): k for k, p in model.named_parameters() if p.requires_grad}
    groups = [0, num_users] if bounds is None else bounds
    totals: list[dict[str, torch.Tensor]] = [{} for _ in groups[1:]]
    for (name, m), d in zip(layers, deltas, strict=True):
        rows = d.numel() // (num_users * m.out_features)  # rows per user through this layer
        row_scale = scale.repeat_interleave(rows).unsqueeze(1)  # s_u for each of its rows
        sd = d.reshape(-1, m.out_features) * row_scale
        # -lr on the rows, not on the [out, in] product: one pass less over every group's sum (the batch
        # writes one such matrix per node); the same floats at lr = 1, the last bits otherwise.
        step = -lr * sd
        a = inputs[name].reshape(-1, m.in_features)
        for g, total in enumerate(totals):  # a group's users are consecutive: so are their rows
            part = slice(groups[g] * rows, groups[g + 1] * rows)
            if m.weight.requires_grad:
                total[names[id(m.weight)]] = step[part].T @ a[part]
            if m.bias is not None and m.bias.requires_grad:
                total[names[id(m.bias)]] = step[part].sum(dim=0)
    ordered = [{k: total[k] for k in names.values()} for total in totals]
    return (ordered[0] if bounds is None else ordered), norms


def poisson_sample(
    secret: int | bytes, server_round: int, user_ids: torch.Tensor, num_users: int, q: float
) -> torch.Tensor:
    """Which of ``user_ids`` take part in this round: each of the ``num_users`` users independently with
    probability ``q``. A user's coin depends on (secret, round, user id) only (:func:`user_coins`),
    never on which node asks, in which order, or on any data."""
    if not 0.0 < q <= 1.0:
        raise ValueError(f"the sampling rate q must lie in (0, 1], got {q!r}")
    if user_ids.numel() and not (0 <= int(user_ids.min()) and int(user_ids.max()) < num_users):
        raise ValueError(f"user ids must lie in [0, {num_users})")
    return user_coins(secret, server_round, user_ids) < q


def hash_seed(*parts: int) -> int:
    """A 63-bit seed from integers (stable across processes, unlike ``hash``)."""
    material = "|".join(str(int(p)) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "little") >> 1


def noisy_mean(
    update_sum: Mapping[str, torch.Tensor],
    noise_multiplier: float,
    clip: float,
    expected_users: float,
    generator: torch.Generator,
) -> dict[str, torch.Tensor]:
    """The server's release: (sum of clipped updates + N(0, z^2 C^2 I)) / (q N), McMahan et al.'s
    fixed-denominator estimator (the denominator is public, so dividing is post-processing)."""
    if not (noise_multiplier > 0 and clip > 0 and expected_users > 0):
        raise ValueError("need noise_multiplier > 0, clip > 0 and expected_users > 0")
    out = {}
    for k, v in update_sum.items():
        noise = random_source.randn(v.shape, generator=generator, dtype=v.dtype, device=v.device)
        out[k] = (v + noise_multiplier * clip * noise) / expected_users
    return out
