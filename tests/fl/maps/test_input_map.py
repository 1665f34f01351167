"""The input map M1: gradient isolation in the LDP modes (docs/SPEC.md §11.6 item 1) and
the leaky mode as its power check; public pretraining; straight-through routing."""

from __future__ import annotations

import torch
from torch import nn

import mechanisms
from fl.maps.input_map import (
    apply_input_map,
    input_map,
    leaky_map_gradient,
    map_version,
    straight_through,
    train_public_map,
)
from fl.maps.pipeline import ServerModel, train_epochs
from mechanisms.base import SentenceMechanism


class Spy(SentenceMechanism):
    """Wraps a mechanism and records whether its input carried a gradient path."""

    name = "spy"

    def __init__(self, inner: SentenceMechanism) -> None:
        self.inner = inner
        self.saw_grad: list[bool] = []

    @property
    def guarantee(self):  # noqa: ANN201
        return self.inner.guarantee

    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        self.saw_grad.append(bool(x.requires_grad))
        return self.inner.sanitize(x, generator=generator)


def _model(*dims: int, seed: int = 0) -> ServerModel:
    """ServerModel(*dims) with a seeded initialisation (the global torch RNG is restored afterwards)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ServerModel(*dims)


def _data(n: int = 256, d: int = 32, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=gen)
    x = torch.randn(n, d, generator=gen) + 2.0 * y[:, None].float()
    return x, y


def test_ldp_mode_has_no_gradient_path_to_m1_or_the_encoder() -> None:
    """One training step on releases leaves M1 (even if trainable) and the encoder output without gradients."""
    x, y = _data()
    encoder_out = x.clone().requires_grad_(True)  # stands in for a (carelessly) differentiable encoder
    m1 = nn.Parameter(input_map("random", 32, 8, seed=0).float())  # a careless user made M1 trainable
    spy = Spy(mechanisms.create("purkayastha", epsilon=5.0))
    released = spy.sanitize(apply_input_map(encoder_out, m1), generator=torch.Generator().manual_seed(1))
    assert spy.saw_grad == [False] and not released.requires_grad
    model = _model(8, 32, 16, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    train_epochs(model, opt, released.float(), y, epochs=1, batch_size=64, generator=torch.Generator().manual_seed(0))
    assert m1.grad is None and encoder_out.grad is None
    assert model.restore.weight.grad is not None  # M2 did train (post-processing)


def test_leaky_mode_does_send_a_gradient_of_raw_data() -> None:
    """Power check of the isolation test: the leaky path yields a non-zero M1 gradient
    that changes with the raw embeddings (which is why it is not private)."""
    x, y = _data()
    m1 = input_map("leaky", 32, 8, seed=0)
    model = _model(8, 32, 16, 2)
    mech = mechanisms.create("planar_laplace", epsilon=5.0)
    released, grad = leaky_map_gradient(m1, model, x, y, mech, torch.Generator().manual_seed(1))
    assert grad.shape == (32, 8) and float(grad.abs().sum()) > 0
    assert not released.requires_grad
    # One example: dLoss/dM1 = x^T delta, a rank-one matrix whose row space reveals x exactly up to scale.
    _, g1 = leaky_map_gradient(m1, model, x[:1], y[:1], mech, torch.Generator().manual_seed(2))
    u, s, vh = torch.linalg.svd(g1.double())
    assert float(s[1] / s[0]) < 1e-5
    assert abs(float(torch.nn.functional.cosine_similarity(u[:, 0], x[0].double(), dim=0))) > 0.999


def test_straight_through_forward_is_the_release_and_backward_the_clean_map() -> None:
    h = torch.randn(4, 16, generator=torch.Generator().manual_seed(0))
    h = torch.nn.functional.normalize(h, dim=1).requires_grad_(True)
    mech = mechanisms.create("privemb", epsilon=1.0, out_dim=6, input_dim=16)
    gen_a, gen_b = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    out = straight_through(mech, h, gen_a)
    assert out.shape == (4, 6)
    assert torch.allclose(out.detach(), mech.sanitize(h.detach(), generator=gen_b).float(), atol=1e-6)
    out.sum().backward()
    expected = mech.phi.float().sum(dim=0).expand(4, -1)  # d(sum h Phi^T)/dh
    assert torch.allclose(h.grad, expected, atol=1e-5)


def test_public_pretraining_learns_and_returns_a_frozen_map() -> None:
    x, y = _data(512)
    start = input_map("public", 32, 8, seed=0)
    model = _model(8, 32, 16, 2)
    mech = mechanisms.create("purkayastha", epsilon=10.0)
    matrix, loss = train_public_map(
        start, model, x, y, mech, epochs=5, batch_size=64, lr=1e-2, generator=torch.Generator().manual_seed(0)
    )
    assert matrix.dtype == torch.float64 and not matrix.requires_grad and matrix.shape == (32, 8)
    assert not torch.equal(matrix, start) and map_version(matrix) != map_version(start)
    assert loss < 0.6  # separable classes are learnt through the noise
