"""Central DP per user (``mode = "central"``, ``central-unit = "user"``): user-level DP-FedAvg
(``strategies.central_user``). The mode's server side: its start (seeded, or from the public split), its
strategy, its summary and its attack state."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fl.accounting.scope import scope_fields
from fl.attacks.state import AttackState
from fl.attacks.state import from_model as attack_from_model
from fl.config import RunConfig
from fl.config.rules import check_central_config
from fl.encoding.encoder import best_device
from fl.maps.pipeline import ServerModel
from fl.maps.public_start import PublicSpec
from fl.reporting.results import RunWriter
from fl.training.central_start import central_start
from strategies import discovery
from strategies.central_user import UserLevelDPFedAvg, user_level_guarantee
from strategies.loading import central_step
from strategies.mean_step import server_step_label
from strategies.modes.base import ModeRun, any_node_local, data_fields, final_fields, user_documents

log = logging.getLogger(__name__)

FINAL_KEYS = ("accuracy", "macro_f1", "clean_accuracy", "clean_macro_f1")
EVERYONE = "every training document (central mode: any user may have been sampled)"


class UserLevelMode:
    """User-level DP-FedAvg from a seeded start, or from a model trained on the public split."""

    name = "central/user"
    scope = "central"
    wire_scopes: tuple[str, ...] = ("central/user",)
    releases_embeddings = False  # nodes send clipped, noised sums of users' model updates

    def check(self, cfg: RunConfig) -> None:
        check_central_config(cfg)

    def start(self, grid: Grid, cfg: RunConfig, writer: RunWriter, timeout: float) -> ModeRun:
        nodes = discovery.discover_nodes(grid, timeout)
        first = next(iter(nodes.values()))
        begin = central_start(
            PublicSpec.from_config(cfg), cfg.central, first.map_dim, first.encoder_dim, first.num_classes
        )
        model, matrix, start = begin.model, begin.matrix, begin.text
        trained: torch.nn.Module = model  # the head, or (central-train = "encoder") the encoder's top part and the head
        if cfg.central.central_train == "encoder":  # the encoder's top part trains next to the head
            from fl.training.encoder import build_encoder_classifier, trainable_state

            trained = build_encoder_classifier(
                cfg.encoder,
                model,
                matrix,
                best_device(cfg.server.device),
                tuning_part=cfg.central.central_tuning_part,
                seed=cfg.users.seed,
            )
            encoder_part = sum(v.numel() for k, v in trainable_state(trained).items() if k.startswith("top."))
            start += (
                f"; the encoder's top {cfg.encoder.tuning_layers} layers ({cfg.central.central_tuning_part}: "
                f"{encoder_part} trainable parameters) train with the head under the same per-user clipping and noise"
            )
        strategy = UserLevelDPFedAvg(cfg, nodes, trained, matrix, writer, server_step=central_step(cfg))
        strategy.public_model = begin.public_model  # held against the run on the same clean test inputs
        log.info(
            "%d nodes hold %d training users and %d test users; about %.0f users sampled per round; start: %s",
            len(nodes),
            first.num_train_users,
            first.num_test_users,
            strategy.q * strategy.num_users,
            start,
        )
        return ModeRun(strategy, strategy._arrays(), start)

    def owns(self, strategy: Strategy) -> bool:
        return isinstance(strategy, UserLevelDPFedAvg)

    def summary(self, cfg: RunConfig, run: ModeRun) -> tuple[dict[str, Any], str, str]:
        u = run.strategy
        assert isinstance(u, UserLevelDPFedAvg)
        p = (run.records[-1] if run.records else {}).get("privacy") or {}
        fields = {
            "mode": "central",
            "central_unit": "user",
            "strategy": type(u).__name__,
            # What steps the model from the noisy mean: a Flower strategy, or server-optimizer.
            "server_step": u.server_step.name
            if u.server_step is not None
            else f"server-optimizer = {cfg.central.server_optimizer!r}",
            **final_fields(run.records, FINAL_KEYS),
            "privacy": p or None,
            "ldp_guarantee_holds": False,
            **scope_fields("central"),
            "start": run.start,
            "guarantee": user_level_guarantee(cfg, u, run.start),
            "users": {"train": u.num_users, "test": next(iter(u.nodes.values())).num_test_users, "nodes": len(u.nodes)},
            **data_fields(cfg),
        }
        title = (
            f"{cfg.data.dataset} | user-level central DP{server_step_label(u.server_step)} "
            f"z={cfg.central.central_noise_multiplier:g} "
            f"C={cfg.central.central_clip:g} | ~{u.q * u.num_users:.0f} users/round | "
            f"eps={p.get('epsilon', float('nan')):.3g}, delta={p.get('delta', float('nan')):.3g}"
        )
        return fields, title, "raw test"

    def attack_state(self, cfg: RunConfig, run: ModeRun, final: ArrayRecord) -> AttackState | None:
        strategy = run.strategy
        assert isinstance(strategy, UserLevelDPFedAvg)
        if cfg.data.synthetic:
            log.info("no attack state: dataset = 'synthetic' has no documents to attack")
            return None
        if cfg.central.central_train == "encoder":
            log.info("no attack state: the attacks read a head on fixed embeddings, this run trained the encoder too")
            return None
        users = np.arange(strategy.num_users, dtype=np.int64)
        assert isinstance(strategy.model, ServerModel)  # central-train = "head": the model is the head itself
        return attack_from_model(strategy.model, strategy.map_matrix, user_documents(cfg, users), EVERYONE)

    def holds_own_files(self, run: ModeRun) -> bool:
        assert isinstance(run.strategy, UserLevelDPFedAvg)
        return any_node_local(run.strategy.nodes.values())

    def run_name(self, cfg: RunConfig) -> str:
        """The dataset and the noise multiplier."""
        return f"{Path(cfg.data.dataset).stem}-central-z{cfg.central.central_noise_multiplier:g}"
