"""Throughput of every word-level mechanism, in tokens per second (JSON).

Usage: python benchmarks/bench_word.py [--n 100000] [--cpu-n 4000]
       [--vocab-sizes 400000,50000] [--epsilon 10] [--repeats 3] [--out FILE]

For each registered mechanism whose class level is "word", each GloVe 6B 50d
vocabulary size (the most frequent words; 400000 is the whole space) and each
device (CPU, and CUDA when available), it times

* ``sanitize_ids`` on a LongTensor of token ids drawn uniformly from the
  vocabulary (``--n`` tokens on CUDA, ``--cpu-n`` on CPU: the exact nearest
  neighbour costs ~2 * 51 * V flops per token, so a CPU sample is smaller; the
  figure is a rate either way), and
* ``sanitize_text`` end to end (tokenize, look up, sanitize, rebuild) on texts
  of 20 of those words joined by spaces; its token count is the tokenizer's
  word count.

Each figure is the median of --repeats calls after one small warm-up call
that builds the per-device tables (index, clipped vectors); the one-off setup
costs are reported separately: loading the space, the exact diameter D_V (the
CMP guarantee) and the Mahalanobis geometry. The nearest-neighbour search
alone (``nearest_only``: the same number of CMP-perturbed vectors) shows how
much of the time is the projection. On CUDA the generator lives on the device
and timings are bracketed by ``torch.cuda.synchronize()``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmark this checkout

import torch  # noqa: E402

import mechanisms  # noqa: E402
from _common import device_name, emit, mechanisms_at_level, run_header  # noqa: E402  (benchmarks/ is sys.path[0])
from mechanisms.words import load_glove, tokenize  # noqa: E402

TEXT_WORDS = 20


def time_call(
    fn: Callable[[], object], repeats: int, device: torch.device, warmup: Callable[[], object] | None = None
) -> float:
    """Median wall seconds of ``fn`` over ``repeats`` calls, after one warm-up call (``warmup`` or ``fn``)."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    (warmup or fn)()
    sync()
    seconds = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def setup_costs(names: list[str], vocab_sizes: list[int], epsilon: float) -> dict:
    """One-off seconds: load the space, the exact diameter, each mechanism's guarantee."""
    out: dict = {}
    for vocab in vocab_sizes:
        start = time.perf_counter()
        space = load_glove(None if vocab >= 400_000 else vocab)
        loaded = time.perf_counter()
        diameter = space.diameter
        measured = time.perf_counter()
        row = {
            "load_seconds": round(loaded - start, 3),
            "diameter_seconds": round(measured - loaded, 3),
            "diameter": round(diameter, 6),
            "guarantee_seconds": {},
        }
        for name in names:
            start = time.perf_counter()
            mechanisms.create(name, epsilon=epsilon, space=space).guarantee
            row["guarantee_seconds"][name] = round(time.perf_counter() - start, 3)
        out[str(vocab)] = row
    return out


def bench_device(
    device: torch.device, names: list[str], vocab_sizes: list[int], n: int, epsilon: float, repeats: int
) -> dict:
    gen = torch.Generator(device=device).manual_seed(0)
    out: dict = {"device": device_name(device), "tokens": n, "vocab_sizes": {}}
    for vocab in vocab_sizes:
        space = load_glove(None if vocab >= 400_000 else vocab)
        ids = torch.randint(0, space.num_words, (n,), generator=torch.Generator().manual_seed(1)).to(device)
        words = space.decode(ids.cpu())
        texts = [" ".join(words[i : i + TEXT_WORDS]) for i in range(0, n, TEXT_WORDS)]
        text_tokens = sum(len(tokenize(t)[0]) for t in texts)
        small_ids, small_texts = ids[:1000], texts[: 1000 // TEXT_WORDS]
        row: dict = {}
        cmp = mechanisms.create("cmp", epsilon=epsilon, space=space)
        noisy = cmp.perturb(ids, gen)
        seconds = time_call(lambda: cmp.index(noisy), repeats, device, warmup=lambda: cmp.index(noisy[:1000]))
        row["nearest_only"] = {"seconds": round(seconds, 4), "tokens_per_second": round(n / seconds, 1)}
        for name in names:
            try:
                mech = mechanisms.create(name, epsilon=epsilon, space=space)
                ids_s = time_call(
                    lambda: mech.sanitize_ids(ids, gen),
                    repeats,
                    device,
                    warmup=lambda: mech.sanitize_ids(small_ids, gen),
                )
                text_s = time_call(
                    lambda: mech.sanitize_text(texts, gen),
                    repeats,
                    device,
                    warmup=lambda: mech.sanitize_text(small_texts, gen),
                )
            except Exception as err:  # report and go on: one broken mechanism must not hide the rest
                row[name] = {"error": f"{type(err).__name__}: {err}"}
                continue
            row[name] = {
                "sanitize_ids": {"seconds": round(ids_s, 4), "tokens_per_second": round(n / ids_s, 1)},
                "sanitize_text": {
                    "seconds": round(text_s, 4),
                    "tokens": text_tokens,
                    "tokens_per_second": round(text_tokens / text_s, 1),
                },
            }
        out["vocab_sizes"][str(vocab)] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="tokens per call on CUDA")
    parser.add_argument("--cpu-n", type=int, default=4000, help="tokens per call on CPU")
    parser.add_argument("--vocab-sizes", default="400000,50000", help="comma-separated GloVe vocabulary sizes")
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per figure (median)")
    parser.add_argument("--out", default="", help="also write the JSON to this file")
    args = parser.parse_args()
    vocab_sizes = [int(s) for s in args.vocab_sizes.split(",") if s.strip()]
    warnings.simplefilter("ignore", UserWarning)  # trlaplace's large-delta warning

    names = mechanisms_at_level("word")
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    result = {
        **run_header(),
        "space": "glove-6b-50d",
        "epsilon": args.epsilon,
        "repeats": args.repeats,
        "input": f"token ids uniform over the vocabulary; texts of {TEXT_WORDS} of them joined by spaces",
        "mechanisms": names,
        "setup": setup_costs(names, vocab_sizes, args.epsilon),
        "devices": {
            d.type: bench_device(
                d, names, vocab_sizes, args.cpu_n if d.type == "cpu" else args.n, args.epsilon, args.repeats
            )
            for d in devices
        },
    }
    emit(result, args.out)


if __name__ == "__main__":
    main()
