"""How much the class-means recipe could add without any noise: the ceiling of local DP's on-device gain.

    SANITAS_DATA_DIR=../shared/data python docs/results/federation-gain/class_means_ceiling.py [CONFIG ...]

For each config (default: simulations/experiments/agnews_public.toml and sst2_public.toml) and seeds 1, 2, 3,
on the run's own data (the public split it draws, its private users, its test users), scores on the clean
test inputs: the public-only model (fl.maps.public_model), the class-means model fitted on the private users'
*clean* projected rows and true labels (no noise: what the releases' debiased means converge to) combined with
the public class means as a run combines them, for m' = 16 / 32 / 64 / 128 / 192, and the logistic regression
fitted on every private user's clean embedding (non-private, no projection). Prints one Markdown table; no
privacy is spent (a measurement of what the recipe can reach, not a private run).
"""

from __future__ import annotations

import sys

import numpy as np

from fl import config as config_mod
from fl.data import datasets as data
from fl.encoding.encoder import embed_texts
from fl.maps import class_means as cm
from fl.maps.input_map import apply_input_map
from fl.maps.public_model import fit_public_model, projection_map
from simulations.runtime.overrides import load_with_overrides

DIMS = (16, 32, 64, 128, 192)
SEEDS = (1, 2, 3)
CONFIGS = ("simulations/experiments/agnews_public.toml", "simulations/experiments/sst2_public.toml")


def _scores(config: str, seed: int) -> dict[str, float]:
    cfg = config_mod.resolve({**load_with_overrides(config, []), "seed": seed})
    ds = data.load(cfg.data, cfg.users, cfg.release.level)
    assert isinstance(ds, data.TextDataset) and ds.public is not None
    k = ds.num_classes
    xp = np.asarray(embed_texts(ds.public["text"][:], cfg.encoder, "cpu", progress=False), dtype=np.float64)
    xq = np.asarray(embed_texts(ds.train["text"][:], cfg.encoder, "cpu", progress=False), dtype=np.float64)
    xt = np.asarray(embed_texts(ds.test["text"][:], cfg.encoder, "cpu", progress=False), dtype=np.float64)
    yp, yq, yt = (np.asarray(d["label"][:], dtype=np.int64) for d in (ds.public, ds.train, ds.test))
    public = fit_public_model(xp, yp, k, data.public_groups(cfg.data, cfg.users, cfg.release.level))
    out = {"public-only": float((public.predict(xt) == yt).mean())}
    for m in DIMS:
        matrix = projection_map(xp, public, m)
        stats = cm.public_statistics(apply_input_map(xp, matrix).numpy(), yp, k)
        rows = apply_input_map(xq, matrix).numpy()
        fitted = cm.fit(rows, yq, np.eye(k), 1.0, stats)  # clean rows, true labels: no noise
        u = apply_input_map(xt, matrix).numpy()
        out[f"class means m'={m}, no noise"] = float(((u @ fitted.weight.T + fitted.bias).argmax(1) == yt).mean())
    everything = fit_public_model(xq, yq, k)  # the logistic regression on every private user, non-private
    out["logistic regression on all private users, no noise"] = float((everything.predict(xt) == yt).mean())
    return out


def main() -> None:
    for config in sys.argv[1:] or CONFIGS:
        per_seed = [_scores(config, s) for s in SEEDS]
        base = np.array([p["public-only"] for p in per_seed])
        print(f"\n{config} (seeds {', '.join(map(str, SEEDS))}): gain over public-only on clean test inputs\n")
        print("| model | accuracy | gain over public-only (paired) |\n|---|---|---|")
        for name in per_seed[0]:
            acc = np.array([p[name] for p in per_seed])
            gain = acc - base
            print(
                f"| {name} | {acc.mean():.3f} +- {acc.std(ddof=1):.3f} | {gain.mean():+.3f} +- {gain.std(ddof=1):.3f} |"
            )


if __name__ == "__main__":
    main()
