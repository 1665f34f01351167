"""The server optimizer takes torch.optim.Adam's and SGD's steps bit for bit, without importing torch._dynamo."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from fl.training.server_optimizer import ServerOptimizer


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))


def _groups(model: torch.nn.Module, two: bool) -> list[dict]:
    params = list(model.parameters())
    if not two:
        return [{"params": params, "lr": 0.01}]
    return [{"params": params[:2], "lr": 0.01}, {"params": params[2:], "lr": 0.003}]


@pytest.mark.parametrize("kind", ["adam", "sgd"])
@pytest.mark.parametrize("two_groups", [False, True])
def test_steps_equal_torch_optimizers(kind: str, two_groups: bool) -> None:
    ours, theirs = _model(0), _model(0)
    opt = ServerOptimizer(_groups(ours, two_groups), 0.01, kind)
    ref_cls = torch.optim.Adam if kind == "adam" else torch.optim.SGD
    ref = ref_cls(_groups(theirs, two_groups), lr=0.01)
    gen = torch.Generator().manual_seed(1)
    for step in range(6):
        grads = [torch.randn(p.shape, generator=gen) * (step + 1) for p in ours.parameters()]
        for o in (opt, ref):
            o.zero_grad(set_to_none=True)
        for model in (ours, theirs):
            for i, (p, g) in enumerate(zip(model.parameters(), grads, strict=True)):
                # one parameter without a gradient on odd steps: both skip it (and its Adam step count)
                p.grad = None if (step % 2 and i == 1) else g.clone()
        opt.step()
        ref.step()
        for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
            assert torch.equal(a, b), f"{kind} differs from torch's at step {step}"
    # power: the steps moved the parameters (a no-op optimizer would fail the equality above only if
    # torch's also did nothing)
    assert not torch.equal(next(ours.parameters()), next(_model(0).parameters()))


def test_zero_grad_as_torch() -> None:
    model = _model(0)
    opt = ServerOptimizer(_groups(model, False), 0.1, "adam")
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_unknown_kind_refused() -> None:
    with pytest.raises(ValueError, match="'adam' or 'sgd'"):
        ServerOptimizer([], 0.1, "rmsprop")


def test_does_not_import_torch_compiler() -> None:
    """The reason it exists: a process that only builds and steps it never imports torch._dynamo."""
    code = (
        "import sys, torch\n"
        "from fl.training.server_optimizer import ServerOptimizer\n"
        "m = torch.nn.Linear(3, 2)\n"
        "o = ServerOptimizer([{'params': list(m.parameters())}], 0.1, 'adam')\n"
        "for p in m.parameters(): p.grad = torch.ones_like(p)\n"
        "o.step(); o.zero_grad()\n"
        "assert 'torch._dynamo' not in sys.modules, 'ServerOptimizer imported torch._dynamo'\n"
        "torch.optim.Adam(m.parameters())\n"
        "assert 'torch._dynamo' in sys.modules, 'power: building torch.optim.Adam imports it'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-500:]
