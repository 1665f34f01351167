"""What every node does whatever the mode: find its cohort, answer the server's query, resolve the
run config once per process, and keep its secret noise state.

A node holds a cohort of users (``fl.cohort``), named by Flower's node config: partition
``partition-id`` of ``num-partitions`` of the run's dataset, or, with ``data-path``, the node's own
file of training documents (one per user; they never leave the node, only their sanitized
releases do). Such a node first reports how many users it holds; the server then assigns their
global ids (a ``USERS`` query, kept in the node's ``Context.state``). Each user is still its own
privacy unit; the cohort only batches the work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict

from fl import config as config_mod
from fl import wire
from fl.cohort import Cohort, build_cohort, build_local_cohort
from fl.config import ReleaseConfig, RunConfig
from fl.levels.spec import LevelSpec
from fl.maps.public_model import predict_affine
from fl.release import NodeState

DATA_PATH = "data-path"  # node config: the node's own training documents
USERS_STATE = "sanitas.users"  # Context.state: the global ids the server assigned to a data-path node


def node_partition(context: Context) -> tuple[int, int]:
    """(partition id, number of partitions) of this node, from Flower's node config."""
    node_config = context.node_config
    try:
        pid, num = int(node_config["partition-id"]), int(node_config["num-partitions"])
    except KeyError:
        raise ValueError(
            "the node config must define partition-id and num-partitions (simulation nodes do; a SuperNode "
            'gets them from --node-config "partition-id=0 num-partitions=2")'
        ) from None
    except ValueError:
        raise ValueError(
            f"node config partition-id={node_config['partition-id']!r} "
            f"num-partitions={node_config['num-partitions']!r}: "
            "both must be integers"
        ) from None
    if not 0 <= pid < num:
        raise ValueError(f"node config partition-id={pid} must lie in 0..num-partitions-1 (num-partitions={num})")
    return pid, num


def node_cohort(context: Context, cfg: RunConfig) -> Cohort:
    """This node's cohort (built once per process and config, ``fl.cohort``).

    A problem with the node's own data names the node and its file: the server shows it as the
    node's error reply."""
    pid, num = node_partition(context)
    path = context.node_config.get(DATA_PATH)
    if not path:
        return build_cohort(LevelSpec.from_config(cfg), pid, num)
    users = context.state.config_records.get(USERS_STATE)
    offset, total = (wire.read_int(users, "train-offset"), wire.read_int(users, "num-train-users")) if users else (0, 0)
    try:
        return build_local_cohort(LevelSpec.from_config(cfg), str(path), pid, num, offset, total)
    except (ValueError, FileNotFoundError, KeyError) as err:
        raise ValueError(f"node partition-id={pid}: {err}") from None


@lru_cache(maxsize=64)  # the points of a shared federation (clients.points) each have their own
def _resolved(items: tuple[tuple[str, Any], ...]) -> config_mod.RunConfig:
    return config_mod.resolve(dict(items))


def resolve_once(run_config: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> config_mod.RunConfig:
    """The resolved run config, validated once per process and (run config, overrides) pair.

    Every message of a run carries the same run config; validating it per
    message cost time on every node. The returned config is shared (and read-only).
    """
    merged = {**dict(run_config), **dict(overrides or {})}
    return _resolved(tuple(sorted(merged.items())))


def with_published_encoder(cfg: RunConfig, msg: Message) -> RunConfig:
    """The config to serve ``msg`` with: with ``encoder-tuning = "public"``, the encoder the request
    names by digest (``fl.wire.ENCODER``), loaded from the published folder and checked against
    the digest (``fl.encoding.public_tuning.published_encoder``); otherwise ``cfg`` itself."""
    if cfg.encoder.encoder_tuning == "none":
        return cfg
    if wire.ENCODER not in msg.content:
        raise ValueError("encoder-tuning = 'public' but the request names no published encoder")
    from fl.encoding.public_tuning import encoders_root, published_encoder

    folder = published_encoder(encoders_root(cfg.encoder), str(msg.content[wire.ENCODER]["digest"]))
    # The published folder in the encoder section (a typed swap of one section; nothing is resolved again).
    return replace(cfg, encoder=replace(cfg.encoder, encoder=str(folder)))


def cohort_info(c: Cohort) -> wire.CohortInfo:
    return wire.CohortInfo(
        train_users_lo=c.train_users.start,
        train_users_hi=c.train_users.stop,
        num_train_users=c.num_train_users,
        num_train_docs=int(c.train_doc_user.size),
        test_users_lo=c.test_users.start,
        test_users_hi=c.test_users.stop,
        num_test_users=c.num_test_users,
        num_classes=c.num_classes,
        encoder_dim=c.encoder_dim,
        map_dim=c.map_dim,
        release_dim=c.release_dim,
        partition_id=c.partition_id,
        num_partitions=c.num_partitions,
        node_local=int(c.node_local),
    )


def handle_query(msg: Message, context: Context, cfg: RunConfig) -> Message:
    """Report the users this node holds and the shapes the server model needs; a ``USERS`` record
    in the query (data-path nodes) assigns this node's global user ids first."""
    if wire.USERS in msg.content:
        assigned = wire.config_record(msg.content, wire.USERS)
        context.state[USERS_STATE] = ConfigRecord(
            {
                "train-offset": wire.read_int(assigned, "train-offset"),
                "num-train-users": wire.read_int(assigned, "num-train-users"),
            }
        )
    info = cohort_info(node_cohort(context, cfg))
    return Message(content=RecordDict({wire.COHORT: info.to_record()}), reply_to=msg)


# ------------------------------------------------------------------------------------- noise
def noise_secret(context: Context, release: ReleaseConfig) -> ConfigRecord:
    """This node's noise state in its ``context.state`` (:meth:`fl.release.NodeState.noise`): its secret
    (from the OS, or ``noise-seed``) and draw counter."""
    return NodeState(context.state).noise(release.noise_seed)


def public_model_predictions(content: RecordDict, x: np.ndarray | torch.Tensor) -> np.ndarray:
    """The public-only classes of the clean inputs ``x``: the public model the request ``content`` carries
    (``fl.wire.PUBLIC_MODEL``, the homogeneous logits matrix; ``KeyError`` when it carries none), applied by
    :func:`fl.maps.public_model.predict_affine`. Both modes' evaluate handlers score it so."""
    return predict_affine(wire.shared_numpy(wire.array_record(content, wire.PUBLIC_MODEL)["matrix"]), x)


def torch_state(arrays: ArrayRecord) -> dict[str, torch.Tensor]:
    """``arrays`` as tensors over the process's shared decoded arrays (``fl.wire.shared_numpy``): for
    loading into a module only (``load_state_dict`` copies), never to write to."""
    return {k: torch.from_numpy(wire.shared_numpy(a)) for k, a in arrays.items()}


def batch_seed(cfg: RunConfig, partition_id: int, server_round: int) -> int:
    """The seed of a node's batch order in a round of local training (central node level, or local mode training
    on the releases): public (the run's seed, the partition, the round); the privacy is the noise's, not the order's."""
    return int(cfg.users.seed) * 1_000_003 + int(partition_id) * 1009 + int(server_round)
