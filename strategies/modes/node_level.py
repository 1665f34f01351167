"""Central DP per node (``mode = "central"``, ``central-unit = "node"``): Flower's DP-FedAvg over nodes
inside the central accounting (``strategies.central_node``). The mode's server side: its strategy, its
summary and its attack state."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ArrayRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fl.accounting.scope import scope_fields
from fl.attacks.state import AttackState
from fl.attacks.state import from_model as attack_from_model
from fl.config import RunConfig
from fl.config.rules import check_central_config
from fl.maps import input_map as maps
from fl.maps.pipeline import build_model
from fl.reporting.results import RunWriter
from strategies import discovery
from strategies.central_node import CentralDPAccounting, central_guarantee, make_central_strategy
from strategies.loading import central_step
from strategies.mean_step import server_step_label
from strategies.modes.base import ModeRun, any_node_local, data_fields, final_fields, user_documents
from strategies.modes.user_level import EVERYONE, FINAL_KEYS

log = logging.getLogger(__name__)


class NodeLevelMode:
    """Node-level DP-FedAvg inside Flower's fixed-clipping wrapper inside the central accounting."""

    name = "central/node"
    scope = "central"
    wire_scopes: tuple[str, ...] = ("central/node",)
    releases_embeddings = False  # nodes send clipped model weights

    def check(self, cfg: RunConfig) -> None:
        check_central_config(cfg)

    def start(self, grid: Grid, cfg: RunConfig, writer: RunWriter, timeout: float) -> ModeRun:
        nodes = discovery.discover_nodes(grid, timeout)
        first = next(iter(nodes.values()))
        if cfg.release.noise_seed >= 0 and not cfg.release.secure_rng:
            # Flower's DP-FedAvg samples the nodes with Python's global generator and draws the noise from
            # numpy's: seeded from noise-seed, a node-level run is reproducible as the other modes are.
            random.seed(int(cfg.release.noise_seed))
            np.random.seed(int(cfg.release.noise_seed) % 2**32)
        strategy = make_central_strategy(cfg, nodes, writer, server_step=central_step(cfg))
        model = build_model(
            first.map_dim, first.encoder_dim, first.num_classes, hidden_dim=cfg.server.hidden_dim, seed=cfg.users.seed
        )
        log.info(
            "%d nodes hold %d training users and %d test users; %d nodes sampled per round",
            len(nodes),
            first.num_train_users,
            first.num_test_users,
            strategy.num_sampled,
        )
        return ModeRun(strategy, ArrayRecord(model.state_dict()), "seeded random initialisation", first)

    def owns(self, strategy: Strategy) -> bool:
        return isinstance(strategy, CentralDPAccounting)

    def summary(self, cfg: RunConfig, run: ModeRun) -> tuple[dict[str, Any], str, str]:
        s = run.strategy
        assert isinstance(s, CentralDPAccounting)
        last = run.records[-1] if run.records else {}
        fields = {
            "mode": "central",
            "central_unit": "node",
            "start": run.start,
            "strategy": f"{type(s.strategy).__name__}({type(s.fedavg).__name__})",
            "server_step": s.server_step.name if s.server_step is not None else "FedAvg (the noisy mean is the model)",
            **final_fields(run.records, FINAL_KEYS),
            "privacy": last.get("privacy"),
            "ldp_guarantee_holds": False,
            **scope_fields("central"),
            "guarantee": central_guarantee(cfg, s),
        }
        first = next(iter(s.fedavg.nodes.values()))
        fields["users"] = {"train": first.num_train_users, "test": first.num_test_users, "nodes": s.num_nodes}
        fields.update(data_fields(cfg))
        p = last.get("privacy") or {}
        title = (
            f"{cfg.data.dataset} | central DP{server_step_label(s.server_step)} "
            f"z={cfg.central.central_noise_multiplier:g} "
            f"C={cfg.central.central_clip:g} ({cfg.central.central_clipping}) | {s.num_sampled}/{s.num_nodes} nodes | "
            f"eps={p.get('epsilon', float('nan')):.3g}, delta={p.get('delta', float('nan')):.3g}"
        )
        return fields, title, "raw test"

    def attack_state(self, cfg: RunConfig, run: ModeRun, final: ArrayRecord) -> AttackState | None:
        if cfg.data.synthetic:
            log.info("no attack state: dataset = 'synthetic' has no documents to attack")
            return None
        info = run.info
        if info is None:  # a checkpoint from before the shape was kept
            log.info("no attack state: the node-level run's model shape is not recorded")
            return None
        model = build_model(
            info.map_dim, info.encoder_dim, info.num_classes, hidden_dim=cfg.server.hidden_dim, seed=cfg.users.seed
        )
        model.load_state_dict(final.to_torch_state_dict())
        if cfg.release.map_in in maps.FROM_SERVER:
            return None
        matrix = maps.input_map(cfg.release.map_in, info.encoder_dim, info.map_dim, cfg.release.map_seed)
        users = np.arange(info.num_train_users, dtype=np.int64)
        return attack_from_model(model, matrix, user_documents(cfg, users), EVERYONE)

    def holds_own_files(self, run: ModeRun) -> bool:
        assert isinstance(run.strategy, CentralDPAccounting)
        infos = [*getattr(run.strategy, "nodes", {}).values(), *([run.info] if run.info is not None else [])]
        return any_node_local(infos)

    def run_name(self, cfg: RunConfig) -> str:
        """The dataset and the noise multiplier."""
        return f"{Path(cfg.data.dataset).stem}-central-z{cfg.central.central_noise_multiplier:g}"
