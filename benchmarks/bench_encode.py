"""Encode a dataset split with the frozen encoder and report the time (JSON).

Usage: python benchmarks/bench_encode.py --dataset sst2 --data-dir ../shared/data [--cache-dir DIR]
       [--encoder NAME] [--batch-size 64] [--train-size N] [--test-size N] [--out FILE]

The first run of a (encoder, texts) pair measures encoding; a second run with
the same cache measures a cache hit (what an epsilon sweep pays). Timings are
wall-clock, so other work on the machine skews them; the load average is
recorded (``_common.run_header`` and ``_common.emit``, as in every benchmark).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmark this checkout

import torch  # noqa: E402

from _common import device_name, emit, run_header  # noqa: E402  (benchmarks/ is sys.path[0])
from fl import config  # noqa: E402
from fl.data import datasets  # noqa: E402
from fl.encoding.encoder import best_device, embed_documents  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="sst2")
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--cache-dir", default="")
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--train-size", type=int, default=0, help="seeded subsample of the training split (0: all)")
    parser.add_argument("--test-size", type=int, default=0, help="seeded subsample of the test split (0: all)")
    parser.add_argument("--out", default="", help="also write the JSON to this file")
    args = parser.parse_args()
    cfg = config.resolve(
        {
            "dataset": args.dataset,
            "data-dir": args.data_dir,
            "cache-dir": args.cache_dir,
            "encoder": args.encoder,
            "train-size": args.train_size,
            "test-size": args.test_size,
        }
    )
    ds = datasets.load(cfg.data, cfg.users, cfg.release.level)
    device = best_device("auto")
    result = {
        **run_header(),
        "dataset": args.dataset,
        "encoder": args.encoder,
        "device": device,
        "device_name": device_name(torch.device(device)),
        "batch_size": args.batch_size,
        "train_size": args.train_size,
        "test_size": args.test_size,
    }
    for split in ("train", "test"):
        texts = getattr(ds, split)["text"]
        start = time.perf_counter()
        embed_documents(texts, "whole", args.encoder, config.cache_dir(cfg), device, args.batch_size)
        seconds = time.perf_counter() - start
        result[split] = {
            "texts": len(texts),
            "seconds": round(seconds, 2),
            "texts_per_second": round(len(texts) / seconds, 1),
        }
    emit(result, args.out)


if __name__ == "__main__":
    main()
