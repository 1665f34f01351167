"""Which honest M1 recipe gives the best sanitized-test accuracy? (in-process, JSON)

Usage: python benchmarks/utility_recipes.py [--config simulations/experiments/sst2_utility.toml]
       [--epsilons 2,4,6,10] [--seeds 1,2,3] [--recipes public16,supervised2,...]
       [--epochs 5] [--threads 1] [--out FILE]

For each seed and sentence epsilon (Purkayastha metric epsilon; pure pi * epsilon per release)
it builds candidate input maps M1 from the seed's PUBLIC split only, releases every private
training document and every test document once through the run's real mechanism
(``fl.config.make_mechanism``, n(M1 x) or n(M1 x + b) by ``fl.maps.input_map.apply_input_map``), trains the
server model (``fl.maps.pipeline``: M2 + MLP, Adam) on the private releases with their labels in the
clear, and scores it on the sanitized test releases: the shape of a ``sanitas run`` without Flower
(one release per user, all users in one round).

Recipes (``--recipes``; a trailing number is m'):

* ``public<m'>``: the baseline, M1 trained on the public split through the noise
  (``fl.maps.input_map.train_public_map`` from the seeded random start, ``public-epochs`` epochs), and the
  server model starting from that public training, as ``map-in = "public"`` does;
* ``pca<m'>``: the top m' principal directions of the public embeddings, centred by the public
  mean (an affine public map, no labels);
* ``supervised<m'>``: ``map-in = "supervised"`` (``fl.maps.input_map.supervised_map``): the public logistic
  regression's logit, m' - 2 principal directions, and a constant whose scale is chosen on a public
  hold-out (``fl.maps.public_start.choose_map_scale``), unless ``--scale`` fixes it.

Every recipe also reports its *public validation* accuracy
(``fl.maps.public_start.public_validation_accuracy``: the pipeline emulated on a seeded 20% hold-out
of the public split, under the same mechanism). Choosing m' or a recipe by that number uses public
documents only; ``choice`` in the output names, per seed and epsilon, the recipe public validation
picks and its test accuracy. Test accuracies are on the sanitized dev set (diagnostic, computed
from true labels, not covered by any guarantee).

Whatever public map is used, the guarantee of one release is unchanged: epsilon * d_angular-LDP
in n(M1 x + b), pure pi * epsilon-LDP per document (labels in the clear: no finite epsilon for the
pair).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmark this checkout

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _common import emit, run_header  # noqa: E402  (benchmarks/ is sys.path[0])
from fl import config as config_mod  # noqa: E402
from fl.data import datasets as data  # noqa: E402
from fl.encoding.encoder import embed_texts  # noqa: E402
from fl.maps import input_map as maps  # noqa: E402
from fl.maps import public_start
from fl.maps.pipeline import build_model, predict, train_epochs  # noqa: E402

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "simulations" / "experiments" / "sst2_utility.toml"
BASELINE = {"map-in": "public", "public-fraction": 0.1, "map-dim": 16}


def embeddings(cfg: Any, split: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The frozen encoder's embeddings of a split (through the shared cache) and its labels."""
    emb = embed_texts(split["text"], cfg.encoder, "cpu", progress=False)
    return torch.as_tensor(np.asarray(emb), dtype=torch.float32), torch.as_tensor(
        np.asarray(split["label"], dtype=np.int64)
    )


def pca_map(x: torch.Tensor, m_prime: int) -> torch.Tensor:
    """Affine [d + 1, m']: the top m' principal directions of the public embeddings, centred."""
    xn = x.double()
    mu = xn.mean(dim=0)
    _, _, vt = torch.linalg.svd(xn - mu, full_matrices=False)
    v = vt[:m_prime].T
    return torch.cat([v, -(mu @ v)[None]], dim=0)


def parse_recipe(name: str) -> tuple[str, int]:
    match = re.fullmatch(r"(public|pca|supervised)(\d+)", name)
    if not match:
        raise SystemExit(f"unknown recipe {name!r}: use public<m'>, pca<m'> or supervised<m'>")
    return match.group(1), int(match.group(2))


def run_recipe(
    cfg: Any,
    recipe: str,
    public: tuple[torch.Tensor, torch.Tensor],
    private: tuple[torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor],
    num_classes: int,
    epochs: int,
    scale: float,
) -> dict[str, Any]:
    """Build one recipe's M1 from ``public``, score it on public validation and on the test set."""
    kind, m_prime = parse_recipe(recipe)
    cfg = cfg.replace(**{"map-dim": m_prime})
    mech = config_mod.make_mechanism(cfg, "sentence", input_dim=m_prime)
    gen = torch.Generator().manual_seed(int(cfg["seed"]))
    xp, yp = public
    d = xp.shape[1]
    info: dict[str, Any] = {"recipe": recipe, "m_prime": m_prime}
    started = time.perf_counter()
    model = build_model(
        int(mech.output_dim(m_prime)), d, num_classes, hidden_dim=cfg.server.hidden_dim, seed=cfg.users.seed
    )

    # Public validation: the same recipe fitted on 80% of the public split, scored on the rest.
    order = torch.randperm(len(yp), generator=torch.Generator().manual_seed(int(cfg["seed"]) + 7))
    n_val = round(public_start.VALIDATION_FRACTION * len(yp))
    val, fit = order[:n_val], order[n_val:]

    def build(x: torch.Tensor, y: torch.Tensor, start_model: torch.nn.Module | None) -> torch.Tensor:
        if kind == "pca":
            return pca_map(x, m_prime)
        if kind == "supervised":
            s = scale
            if s == 0:
                s, chosen = public_start.choose_map_scale(
                    x, y, num_classes, m_prime, mech, gen, server=cfg.server, seed=cfg.users.seed
                )
                info.setdefault("scale_choices", []).append(chosen["validation_accuracy"])
            info.setdefault("scales", []).append(s)
            return maps.supervised_map(x, y, num_classes, m_prime, s)
        start = maps.input_map("public", d, m_prime, cfg["map-seed"])
        throwaway = start_model or build_model(
            int(mech.output_dim(m_prime)), d, num_classes, hidden_dim=cfg.server.hidden_dim, seed=cfg.users.seed
        )
        matrix, _ = maps.train_public_map(
            start, throwaway, x, y, mech, int(cfg["public-epochs"]), int(cfg["batch-size"]), cfg["learning-rate"], gen
        )
        return matrix

    val_matrix = build(xp[fit], yp[fit], None)
    info["public_validation_accuracy"] = public_start.public_validation_accuracy(
        val_matrix,
        (xp[fit], yp[fit]),
        (xp[val], yp[val]),
        mech,
        num_classes,
        gen,
        server=cfg.server,
        seed=cfg.users.seed,
    )
    # The run: M1 from the whole public split, every private document released once.
    matrix = build(xp, yp, model if kind == "public" else None)
    xt, yt = private
    xd, yd = test
    zt = mech.sanitize(maps.apply_input_map(xt, matrix), generator=gen).to(torch.float32)
    zd = mech.sanitize(maps.apply_input_map(xd, matrix), generator=gen).to(torch.float32)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg["learning-rate"])
    train_epochs(model, optimizer, zt, yt, epochs, int(cfg["batch-size"]), gen)
    info["test_accuracy"] = float((predict(model, zd) == yd).double().mean())
    if zd.shape[1] == m_prime:
        clean = maps.apply_input_map(xd, matrix).to(torch.float32)
        info["clean_test_accuracy"] = float((predict(model, clean) == yd).double().mean())
    info["seconds"] = round(time.perf_counter() - started, 1)
    return info


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="run config (dataset, data-dir, public split)")
    parser.add_argument("--epsilons", default="2,4,6,10")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--recipes", default="public16,public4,pca2,supervised2,supervised3,supervised4")
    parser.add_argument("--scale", type=float, default=0.0, help="supervised map-scale (0: chosen on public data)")
    parser.add_argument("--epochs", type=int, default=5, help="server epochs over the private releases")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    base = config_mod.load_toml(args.config)
    recipes = args.recipes.split(",")
    for name in recipes:
        parse_recipe(name)
    rows: list[dict[str, Any]] = []
    for seed in (int(s) for s in args.seeds.split(",")):
        cfg = config_mod.resolve({**base, "seed": seed, "map-in": "public", "label-mechanism": "none"})
        ds = data.load(cfg.data, cfg.users, cfg.release.level)
        public, private, test = (embeddings(cfg, split) for split in (ds.public, ds.train, ds.test))
        for eps in (float(e) for e in args.epsilons.split(",")):
            at = cfg.replace(**{"sentence-epsilon": eps})
            for name in recipes:
                row = {
                    "seed": seed,
                    "epsilon": eps,
                    **run_recipe(at, name, public, private, test, ds.num_classes, args.epochs, args.scale),
                }
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
    summary: dict[str, Any] = {}
    for eps in sorted({r["epsilon"] for r in rows}):
        at = [r for r in rows if r["epsilon"] == eps]
        entry: dict[str, Any] = {}
        for name in recipes:
            acc = [r["test_accuracy"] for r in at if r["recipe"] == name]
            val = [r["public_validation_accuracy"] for r in at if r["recipe"] == name]
            entry[name] = {
                "test_mean": round(statistics.mean(acc), 4),
                "test_sd": round(statistics.stdev(acc), 4) if len(acc) > 1 else 0.0,
                "public_validation_mean": round(statistics.mean(val), 4),
            }
        picks = []
        for seed in sorted({r["seed"] for r in at}):
            mine = [r for r in at if r["seed"] == seed]
            best = max(mine, key=lambda r: r["public_validation_accuracy"])
            picks.append({"seed": seed, "recipe": best["recipe"], "test_accuracy": best["test_accuracy"]})
        entry["choice"] = picks
        summary[f"{eps:g}"] = entry
    emit(
        {
            **run_header(),
            "config": args.config,
            "recipes": recipes,
            "epochs": args.epochs,
            "scale": args.scale,
            "summary": summary,
            "runs": rows,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
