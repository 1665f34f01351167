"""The encoder paths on CUDA: the central encoder's per-user clipped sums give the CPU's results, and
public fine-tuning runs on the GPU and publishes an encoder whose digest its nodes check. Skipped
without CUDA (CI has none)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fl import config as config_mod
from fl.maps.pipeline import ServerModel
from fl.training.encoder import build_encoder_classifier, lower_states
from fl.training.user_updates import clipped_update_sum, pad_by_user
from tests.support.encoder_training import LABELS, TEXTS, encoder_cfg

CUDA = "cuda"


@pytest.mark.gpu
def test_central_encoder_sums_on_cuda_match_the_cpu() -> None:
    cfg = encoder_cfg("lora")
    owner = torch.tensor([0, 0, 1, 2, 2, 2, 3])
    out = {}
    for device in ("cpu", CUDA):
        torch.manual_seed(0)
        model = build_encoder_classifier(
            cfg.encoder,
            ServerModel(384, 384, 8, 2),
            None,
            device,
            tuning_part=cfg.central.central_tuning_part,
            seed=cfg.users.seed,
        )
        h, m = lower_states(cfg.encoder, TEXTS, device)
        y = LABELS.to(device)
        hs, ys, mask = pad_by_user(h, y, owner.to(device), 4)
        ms = pad_by_user(m, y, owner.to(device), 4)[0]
        out[device] = clipped_update_sum(model, (hs, ms), ys, mask, steps=2, lr=0.5, clip=0.5)
    (cpu_total, cpu_norms), (gpu_total, gpu_norms) = out["cpu"], out[CUDA]
    assert gpu_norms.device.type == "cuda"
    torch.testing.assert_close(gpu_norms.cpu(), cpu_norms, rtol=1e-3, atol=1e-5)
    for k, v in cpu_total.items():
        torch.testing.assert_close(gpu_total[k].cpu(), v, rtol=1e-3, atol=1e-5)


@pytest.mark.gpu
def test_public_tuning_on_cuda(tmp_path: Path, data_dir: Path) -> None:
    from fl.encoding.public_tuning import TuningSpec, published_encoder, tune_public

    texts = [{"text": t, "label": int(y)} for t, y in zip(TEXTS * 4, LABELS.tolist() * 4, strict=True)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in texts))
    cfg = config_mod.resolve(
        {
            "dataset": str(tmp_path / "d.jsonl"),
            "public-fraction": 0.5,
            "encoder-tuning": "public",
            "tuning-batch-size": 4,
            "cache-dir": str(tmp_path / "cache"),
            "device": CUDA,
        }
    )
    tuned = tune_public(TuningSpec.from_config(cfg), CUDA, progress=False)
    assert published_encoder(tuned.folder.parent, tuned.digest) == str(tuned.folder)
