"""One round of user-level central DP that trains the encoder (``central-train = "encoder"``), timed.

The arithmetic of a round on full SST-2 without the federation around it: ``--users`` Poisson-
sampled users (about q N = 1,000 in simulations/experiments/sst2_encoder.toml) each holding one sentence; the
frozen lower layers once per sentence, the per-user clipped updates through the top layers and the
head (``fl.training.user_updates.clipped_update_sum``, vectorized over users), the server's noisy step, and
the evaluation of the 872 dev sentences (the first round's, which runs their lower layers, and a
later round's, which reuses them); beside it the head-only round on cached embeddings. Also
the bytes a request carries (the trainable parameters) against the whole encoder.

    python benchmarks/bench_central_encoder.py --parts lora,top \
        --out docs/results/encoder-tuning/bench-central-round-cpu.json
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import device_name, emit, run_header  # noqa: E402


def _timed(fn: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def main() -> None:
    from fl import config as config_mod
    from fl.data import datasets as data
    from fl.encoding.encoder import best_device, load_encoder
    from fl.maps.pipeline import ServerModel
    from fl.training import encoder as encoder_training
    from fl.training.encoder import (
        build_encoder_classifier,
        clipped_encoder_sum,
        encoder_predictions,
        lower_states,
        trainable_state,
    )
    from fl.training.user_updates import clipped_update_sum, noisy_mean, pad_by_user

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default="lora,top")
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--device", default="auto")
    p.add_argument("--encoder", default="all-MiniLM-L6-v2", help="a name or a published (public-tuned) folder")
    p.add_argument("--out", default="")
    args = p.parse_args()
    device = best_device(args.device)
    result: dict[str, Any] = {
        "benchmark": "central_encoder_round",
        **run_header(),
        "device": device_name(torch.device(device)),
        "args": vars(args),
        "rows": [],
    }
    base = {"dataset": "sst2", "mode": "central", "central-train": "encoder", "map-in": "identity", "device": device}
    run = config_mod.resolve({**base, "encoder": args.encoder})
    ds = data.load(run.data, run.users, run.release.level)
    gen = torch.Generator().manual_seed(0)
    pick = torch.randperm(len(ds.train), generator=gen)[: args.users].tolist()
    texts = [str(ds.train[i]["text"]) for i in pick]
    labels = torch.as_tensor([int(ds.train[i]["label"]) for i in pick], device=device)
    dev_texts = [str(t) for t in ds.test["text"]]
    owner = torch.arange(len(texts), device=device)
    encoder_bytes = sum(v.numel() * v.element_size() for v in load_encoder(args.encoder, device).state_dict().values())
    for part in args.parts.split(","):
        cfg = config_mod.resolve(
            {**base, "encoder": args.encoder, "central-tuning-part": part, "tuning-layers": args.layers}
        )
        torch.manual_seed(0)
        model = build_encoder_classifier(
            cfg.encoder,
            ServerModel(384, 384, 256, 2),
            None,
            device,
            tuning_part=cfg.central.central_tuning_part,
            seed=cfg.users.seed,
        )
        (h, tokens), lower = _timed(lambda encoder=cfg.encoder: lower_states(encoder, texts, device))
        total, sums = _timed(
            lambda model=model, h=h, tokens=tokens: clipped_encoder_sum(
                model, h, tokens, labels, owner, len(texts), steps=1, lr=1.0, clip=1.0
            )
        )
        _, step = _timed(lambda total=total: noisy_mean(total, 0.82, 1.0, len(texts), torch.Generator().manual_seed(1)))

        # the evaluation a node runs each round: the first round computes the dev sentences' lower
        # layers, later rounds reuse them (fl.training.encoder.encoder_predictions)
        encoder_training._eval_cache.clear()
        _, first_evaluation = _timed(
            lambda model=model, encoder=cfg.encoder: encoder_predictions(encoder, model, dev_texts, device)
        )
        _, evaluation = _timed(
            lambda model=model, encoder=cfg.encoder: encoder_predictions(encoder, model, dev_texts, device)
        )
        state = trainable_state(model)
        result["rows"].append(
            {
                "part": part,
                "users": len(texts),
                "lower_layers_seconds": round(lower, 2),
                "clipped_sums_seconds": round(sums, 2),
                "server_noise_seconds": round(step, 3),
                "evaluate_872_first_round_seconds": round(first_evaluation, 2),
                "evaluate_872_seconds": round(evaluation, 2),
                "round_seconds": round(lower + sums + step + evaluation, 2),
                "trainable_parameters": int(sum(v.numel() for v in state.values())),
                "request_bytes": int(sum(v.numel() * v.element_size() for v in state.values())),
                "whole_encoder_bytes": int(encoder_bytes),
            }
        )
    # the head-only round on cached embeddings, for scale
    emb = torch.as_tensor(load_encoder(args.encoder, device).encode(texts, convert_to_numpy=True), device=device)
    head = ServerModel(384, 384, 256, 2).to(device)
    xs, ys, mask = pad_by_user(emb, labels, owner, len(texts))
    _, head_sums = _timed(lambda: clipped_update_sum(head, xs, ys, mask, steps=1, lr=1.0, clip=1.0))
    result["head_only_clipped_sums_seconds"] = round(head_sums, 3)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    emit(result, args.out)


if __name__ == "__main__":
    main()
