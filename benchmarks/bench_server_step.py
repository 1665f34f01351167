"""One training step of the server's MLP on a CPU, three ways (JSON): autograd with foreach Adam (the
step before), autograd with fused Adam (the step now), and a hand-written forward and backward pass
with fused Adam (what writing the step by hand would add).

Usage: python benchmarks/bench_server_step.py [--threads 1] [--steps 1500] [--out FILE]

The model is the MLP recipe's (``fl.maps.pipeline.ServerModel``: m' = 2 -> d = 384, tanh, 256, ReLU,
2 classes) on a batch of 128 releases; one torch thread, as ``fl.threads`` gives it in a run. Also
timed: its three large matrix products alone (the step's arithmetic floor).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, run_header  # noqa: E402
from fl.maps.pipeline import ServerModel  # noqa: E402


def per_step_ms(step: Callable[[], object], steps: int) -> float:
    for _ in range(50):
        step()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    return round((time.perf_counter() - started) / steps * 1e3, 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = ServerModel(2, 384, 256, 2)
    x, y = torch.randn(128, 2), torch.randint(0, 2, (128,))
    loss_fn = nn.CrossEntropyLoss()
    result = {**run_header(), "benchmark": "one server MLP step on a CPU", "batch": 128, "ms_per_step": {}}
    for name, kwargs in (("autograd, foreach Adam", {"foreach": True}), ("autograd, fused Adam", {"fused": True})):
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, **kwargs)

        def step(optimizer: torch.optim.Optimizer = optimizer) -> float:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            return float(loss.detach())

        result["ms_per_step"][name] = per_step_ms(step, args.steps)
    layers = [model.restore, model.classifier[0], model.classifier[2]]
    params = [t for layer in layers for t in (layer.weight, layer.bias)]
    fused = torch.optim.Adam(params, lr=1e-3, fused=True)
    rows = torch.arange(len(y))

    @torch.no_grad()
    def by_hand() -> float:
        (w1, b1), (w2, b2), (w3, b3) = ((layer.weight, layer.bias) for layer in layers)
        a1 = torch.tanh(torch.addmm(b1, x, w1.t()))
        a2 = torch.addmm(b2, a1, w2.t()).clamp_min_(0)
        logp = torch.log_softmax(torch.addmm(b3, a2, w3.t()), 1)
        loss = -logp.gather(1, y[:, None]).mean()
        d3 = logp.exp_()
        d3[rows, y] -= 1
        d3 /= len(y)
        d2 = (d3 @ w3).mul_(a2 > 0)
        d1 = (d2 @ w2).mul_(1 - a1 * a1)
        grads = [d1.t() @ x, d1.sum(0), d2.t() @ a1, d2.sum(0), d3.t() @ a2, d3.sum(0)]
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        fused.step()
        return float(loss)

    result["ms_per_step"]["by hand, fused Adam"] = per_step_ms(by_hand, args.steps)
    h, w, g = torch.randn(128, 384), torch.randn(256, 384), torch.randn(128, 256)
    result["ms_per_step"]["its 3 large matrix products alone"] = per_step_ms(
        lambda: (h @ w.t(), g.t() @ h, g @ w), args.steps
    )
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
