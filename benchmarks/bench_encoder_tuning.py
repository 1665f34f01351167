"""Public fine-tuning of the encoder: which part wins per cost (``fl.encoding.public_tuning``).

For each ``tuning-part`` (top layers, LoRA adapters, all weights), in a fresh process each (so the
peak memory is that part's): fine-tune all-MiniLM-L6-v2 on the dataset's seeded public split (the
run config's ``public-fraction`` of the training set), time it, then score a clean logistic probe
fitted on the public split's tuned embeddings on the test users (SST-2's 872 dev sentences; AG
News's seeded ``--test-fraction``): the ceiling a run with that encoder sits under. The untuned
encoder's probe is the baseline row.

    python benchmarks/bench_encoder_tuning.py --parts top,lora,all --public-fraction 0.25 \
        --out docs/results/encoder-tuning-sst2.json

With ``--public-fraction 0.99`` the "public" split is the whole training set: the part's probe is then
the non-private fully fine-tuned reference (the encoder tuned on the private data without DP).

    python benchmarks/bench_encoder_tuning.py --parts all --public-fraction 0.99 \
        --out docs/results/encoder-tuning/bench-sst2-full-cpu.json
    python benchmarks/bench_encoder_tuning.py --dataset agnews --parts none,all \
        --public-fraction 0.99 --out docs/results/encoder-tuning/bench-agnews-full-cpu.json

Needs the offline data (``SANITAS_DATA_DIR``). Seconds on 2 CPU cores: tuning ~2-7 minutes a
part, encoding the ~17k public and 872 dev sentences ~1 minute a part.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import device_name, emit, run_header  # noqa: E402


def _cfg(args: argparse.Namespace, part: str, cache: str) -> Any:
    from fl import config as config_mod

    return config_mod.resolve(
        {
            "dataset": args.dataset,
            "test-fraction": args.test_fraction,
            "public-fraction": args.public_fraction,
            "seed": args.seed,
            "encoder-tuning": "public" if part != "none" else "none",
            "tuning-part": part if part != "none" else "top",
            "tuning-layers": args.layers,
            "tuning-epochs": args.epochs,
            "cache-dir": cache,
            "device": args.device,
        }
    )


def one_part(args: argparse.Namespace, part: str) -> dict[str, Any]:
    """Tune one part (or none) and probe it; runs in its own process."""
    import torch
    from sklearn.linear_model import LogisticRegression

    from fl.data import datasets as data
    from fl.encoding.encoder import best_device
    from fl.encoding.public_tuning import TuningSpec, tune_public

    cache = tempfile.mkdtemp(prefix="bench-tuning-")
    cfg = _cfg(args, part, cache)
    device = best_device(args.device)
    row: dict[str, Any] = {"part": part}
    started = time.time()
    encoder = cfg["encoder"]
    if part != "none":
        tuned = tune_public(TuningSpec.from_config(cfg), device, progress=False)
        row.update(
            {
                "tuning_seconds": round(time.time() - started, 1),
                "trainable_parameters": tuned.info["trainable_parameters"],
                "holdout_accuracy": tuned.info["epochs"][tuned.info["epoch_kept"] - 1]["holdout_accuracy"],
                "learning_rate": tuned.info["learning_rate"],
                "digest": tuned.digest,
            }
        )
        encoder = str(tuned.folder)
    ds = data.load(cfg.data, cfg.users, cfg.release.level)
    model = __import__("fl.encoding.encoder", fromlist=["load_encoder"]).load_encoder(encoder, device)
    t = time.time()
    pub = model.encode(list(ds.public["text"]), batch_size=128, convert_to_numpy=True)
    dev = model.encode(list(ds.test["text"]), batch_size=128, convert_to_numpy=True)
    row["encode_seconds_per_1000"] = round((time.time() - t) / (len(pub) + len(dev)) * 1000, 2)
    clf = LogisticRegression(C=1.0, max_iter=5000).fit(pub, np.asarray(ds.public["label"]))
    row["dev_probe_accuracy"] = round(float((clf.predict(dev) == np.asarray(ds.test["label"])).mean()), 4)
    row["public_documents"] = len(pub)
    row["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    row["device"] = device_name(torch.device(device))
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default="none,top,lora,all")
    p.add_argument("--dataset", default="sst2", help="a dataset with texts (e.g. sst2, agnews)")
    p.add_argument("--test-fraction", type=float, default=0.2, help="a single-split dataset's test share (agnews)")
    p.add_argument("--public-fraction", type=float, default=0.25)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="auto")
    p.add_argument("--out", default="")
    p.add_argument("--one", default="", help=argparse.SUPPRESS)  # internal: one part, JSON on stdout
    args = p.parse_args()
    if args.one:
        print("ROW " + json.dumps(one_part(args, args.one)), flush=True)
        return
    result: dict[str, Any] = {"benchmark": "encoder_tuning", **run_header(), "args": vars(args), "rows": []}
    for part in args.parts.split(","):
        cmd = [sys.executable, __file__, "--one", part] + [
            f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k not in ("one", "out", "parts")
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        rows = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("ROW ")]
        if proc.returncode or not rows:
            raise SystemExit(f"part {part} failed: {proc.stderr[-2000:]}")
        result["rows"].append(rows[0])
        print(json.dumps(rows[0]), file=sys.stderr, flush=True)
    emit(result, args.out)


if __name__ == "__main__":
    main()
