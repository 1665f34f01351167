"""Encode a dataset split with the frozen encoder and report the time (JSON).

Usage: python benchmarks/bench_encode.py --dataset sst2 --data-dir ../shared/data [--cache-dir DIR]

The first run of a (encoder, texts) pair measures encoding; a second run with
the same cache measures a cache hit (what an epsilon sweep pays).
"""

from __future__ import annotations

import argparse
import json
import time

from fl import config, datasets
from fl.encoder import best_device, embed_documents


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="sst2")
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--cache-dir", default="")
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    cfg = config.resolve({"dataset": args.dataset, "data-dir": args.data_dir, "cache-dir": args.cache_dir,
                          "encoder": args.encoder})
    ds = datasets.load(cfg)
    device = best_device("auto")
    out = {"dataset": args.dataset, "encoder": args.encoder, "device": device}
    for split in ("train", "test"):
        texts = getattr(ds, split)["text"]
        start = time.perf_counter()
        embed_documents(texts, "whole", args.encoder, config.cache_dir(cfg), device, args.batch_size)
        seconds = time.perf_counter() - start
        out[split] = {"texts": len(texts), "seconds": round(seconds, 2), "texts_per_second": round(len(texts) / seconds, 1)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
