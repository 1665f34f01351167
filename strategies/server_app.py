"""The Sanitas ServerApp: validate, open the results folder, run the strategy,
write the summary and the plot.

Used by ``flwr run .`` (``[tool.flwr.app.components] serverapp``) and by
``sanitas run`` (which passes its resolved config as overrides). ``mode =
"central"`` runs DP-FedAvg instead (``strategies.central``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from typing import Any

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp

from fl import config as config_mod
from fl import datasets as data
from fl import rewrite as rewrite_mod
from fl.accounting.scope import EVALUATION_NOT_COVERED, GUARANTEE_COVERS, scope_fields
from fl.results import RunWriter, run_folder

from .central import run_central
from .loading import innermost, make_strategy
from .release_training import LEAKY_WARNING, ReleaseTraining

log = logging.getLogger(__name__)


def guarantee_statement(cfg: Mapping[str, Any], strategy: ReleaseTraining) -> dict[str, Any]:
    """What the run's releases guarantee, in numbers and in words."""
    statement: dict[str, Any] = {}
    for channel in ("sentence", "label"):
        g = strategy.guarantees.get(channel) or config_mod.make_mechanism(
            cfg, channel, input_dim=getattr(strategy, "map_dim", None)).guarantee
        statement[channel] = {**g.to_dict(), "pure_ldp_per_release": g.as_ldp()[0], "text": g.describe()}
    pulled_back = {
        "random": "the public random map M1",
        "public": "M1 trained on the public split only, then frozen",
    }
    if cfg["map-in"] in pulled_back:
        statement["sentence"]["text"] += (
            f" (metric pulled back through {pulled_back[cfg['map-in']]}: d(n(M1 x), n(M1 x')))"
        )
    if rewrite_mod.enabled(cfg):
        g = strategy.guarantees.get("word") or rewrite_mod.word_mechanism(cfg).guarantee
        statement["word"] = {**g.to_dict(), "pure_ldp_per_word": g.as_ldp()[0], "text": g.describe()}
        statement["sentence"]["text"] = (
            f"the embedding of the word-level rewrite, released without further noise: {g.describe()}, "
            "composed over the document's words (k words: see privacy.word_level); the number of words is "
            "not hidden"
        )
    setup = getattr(strategy, "document_setup", None)
    if setup is not None:
        mech = setup.mechanism(cfg)
        g = mech.guarantee
        statement["document"] = {**g.to_dict(), "pure_per_changed_sentence": g.as_ldp()[0], "text": g.describe()}
        whole = "epsilon * k / 2" if mech.name == "deepcandidate" else "k * epsilon"
        statement["sentence"]["text"] = (
            f"a document embedding under sentence-level DP ({mech.name}): {g.describe()} of a document "
            f"(any one sentence replaced); a whole document of k sentences: pure {whole} "
            "(see privacy.document_level); the number of sentences k is revealed"
        )
    statement["ldp_guarantee_holds"] = not strategy.leaky
    if strategy.leaky:
        for channel in ("sentence", "label"):
            statement[channel]["text"] = f"{LEAKY_WARNING}. Nominal mechanism: {statement[channel]['text']}"
    notes = [LEAKY_WARNING] if strategy.leaky else []
    notes += [
        "Each user is its own privacy unit; cohorts on a node only batch the work.",
        f"The guarantee covers {GUARANTEE_COVERS['local']}; {EVALUATION_NOT_COVERED}.",
    ]
    if not strategy.guarantees.get("label", config_mod.make_mechanism(cfg, "label").guarantee).is_private:
        notes.append("Labels are released in the clear: the (embedding, label) pair has no finite epsilon.")
    if getattr(strategy, "word_delta_warning", None):
        notes.append(f"WARNING: {strategy.word_delta_warning}")
    if cfg["noise-seed"] >= 0:
        notes.append("noise-seed is fixed for reproducibility; a server that knew it could remove the noise.")
    statement["notes"] = notes
    return statement


def run_server(grid: Grid, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Run one federated job with a resolved config; returns the summary dict.

    Nothing is written before the config and the data source have been checked.
    """
    if cfg["mode"] == "central":
        return run_central(grid, cfg)
    started = time.time()
    source = data.check_source(cfg)
    writer = RunWriter(run_folder(cfg))
    writer.write_json("config.json", {"config": dict(cfg), "data_source": source})
    strategy = make_strategy(cfg, writer)
    core = innermost(strategy)
    if not isinstance(core, ReleaseTraining):
        raise TypeError("the innermost strategy must be a ReleaseTraining")
    log.info("results go to %s", writer.folder)
    quality = None
    if rewrite_mod.enabled(cfg) and cfg["word-quality-docs"] > 0:
        from fl.word_quality import rewrite_quality

        quality = rewrite_quality(cfg)
        writer.write_json("rewrite_quality.json", quality)
        log.info("word-level rewrite on %d sampled test documents: N_w %.3f, ROUGE-1 F %.3f, BLEU %.1f",
                 quality["documents"], quality["N_w"], quality["rouge1_f"], quality["bleu"])
    strategy.start(grid=grid, initial_arrays=ArrayRecord(), num_rounds=int(cfg["num-server-rounds"]))
    last = core.records[-1] if core.records else {}
    summary = {
        "results_folder": str(writer.folder),
        "dataset": cfg["dataset"],
        "strategy": type(strategy).__name__,
        "rounds": len(core.records),
        "final": {k: last.get(k) for k in ("accuracy", "macro_f1", "clean_accuracy", "clean_macro_f1",
                                           "random_guess_f1", "by_sentences")},
        "best_accuracy": max((r["accuracy"] for r in core.records if not math.isnan(r["accuracy"])), default=None),
        "privacy": last.get("privacy"),
        "ldp_guarantee_holds": not core.leaky,
        **scope_fields("local"),
        "guarantee": guarantee_statement(cfg, core),
        **({"rewrite_quality": quality} if quality is not None else {}),
        "users": {"train": core.num_train_users, "test": core.num_test_users, "nodes": len(core.nodes)},
        "data": data.load(cfg).describe(),  # includes documents dropped as empty or (document level) short
        "wall_seconds": round(time.time() - started, 2),
    }
    writer.write_json("summary.json", summary)
    mech, eps_key = ("word-mechanism", "word-epsilon") if rewrite_mod.enabled(cfg) else \
        ("document-mechanism", "document-epsilon") if cfg["document-mechanism"] != "none" else \
        ("sentence-mechanism", "sentence-epsilon")
    mech = cfg[mech]
    eps = "" if mech == "none" else f" eps={cfg[eps_key]:g}" + ("/word" if rewrite_mod.enabled(cfg) else "")
    leak = " | NOT LDP (leaky M1)" if core.leaky else ""
    writer.plot(f"{cfg['dataset']} | {mech}{eps} | M1={cfg['map-in']} m'={core.map_dim} | "
                f"label={cfg['label-mechanism']}{leak}")
    log.info("done in %.1fs: %s", summary["wall_seconds"], writer.folder)
    return summary


def make_server_app(overrides: Mapping[str, Any] | None = None) -> ServerApp:
    """The ServerApp; ``overrides`` (from ``sanitas run``) take precedence over the run config."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        cfg = config_mod.resolve({**dict(context.run_config), **dict(overrides or {})})
        run_server(grid, cfg)

    return app


app = make_server_app()
