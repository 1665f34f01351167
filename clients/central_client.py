"""Central-DP (DP-FedAvg) ClientApp handlers (``mode = "central"``).

``central-unit = "user"`` (user-level DP-FedAvg, McMahan et al. 2018): on a
*train* message each of the node's training users joins the round with
probability ``q`` (the ``sampling-rate`` the server sends; the coin comes from
the node's secret, the round and the user id, ``fl.training.user_updates.poisson_sample``),
each sampled user takes ``local-epochs`` plain-SGD steps at
``client-learning-rate`` from the global model on their own documents only,
the update is clipped to ``central-clip``, and the node replies with the **sum**
of its users' clipped updates, nothing else: no count, no per-user value, no
metric (the number of sampled users would itself reveal sampling coins).

``central-unit = "node"`` (DP-FedAvg over nodes): on a *train* message a node
trains the downstream model on its users' **raw**
(unsanitized) embeddings: M1 from public values (``random`` or ``identity``),
normalise, then ``ServerModel`` (M2 + tanh + MLP), for ``local-epochs``
epochs of Adam at ``learning-rate``, starting from the global weights, and
returns the updated weights with ``num-examples``: a standard Flower
Message-API FedAvg client. There is no local sanitizer: privacy comes from the
server's clipping and Gaussian noise (``strategies.central_node``), or from the
client-side clipping mod plus the server's noise.

Every reply carries ``uniform-weight = 1.0``, the key the server's FedAvg
weights by, because the noise ``z * C / k`` is calibrated for an unweighted
average (``fl.accounting.central``). The server uses no other training metric.

On an *evaluate* message the node scores the global model on its test users'
raw embeddings and returns confusion counts only (simulation diagnostics, not
covered by the DP guarantee, as in local mode).

Central mode releases nothing locally sanitized: no user's row leaves the node, only
clipped model updates whose noise the server adds. So the node's release ledger
(``fl.release.ledger``: one release per user, ``max-epsilon``) has nothing to enforce
here; the central guarantee is the server's accountant's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp.mod import fixedclipping_mod
from flwr.clientapp.typing import ClientAppCallable
from flwr.supercore.differential_privacy import KEY_CLIPPING_NORM
from torch import nn

from clients.node import batch_seed, node_cohort, noise_secret, public_model_predictions, torch_state
from fl import wire
from fl.accounting.central import UNIFORM_WEIGHT_KEY
from fl.cohort import Cohort
from fl.config import ReleaseConfig, RunConfig, ServerConfig
from fl.config.rules import check_central_config
from fl.encoding.encoder import best_device
from fl.maps import input_map as maps
from fl.maps.pipeline import ServerModel, confusion_matrix, predict, train_epochs
from fl.release import NodeState
from fl.training.encoder import (
    EncoderClassifier,
    build_encoder_classifier,
    clipped_encoder_sum,
    encoder_predictions,
    load_trainable,
    lower_states,
)
from fl.training.proximal import proximal_mu, with_proximal_term
from fl.training.user_updates import (
    clipped_update_sum,
    hash_seed,
    keyed_coins,
    one_step_sums_by_group,
    pad_by_user,
    poisson_sample,
)


def _cohort(context: Context, cfg: RunConfig) -> Cohort:
    return node_cohort(context, cfg)  # the same node -> cohort mapping as local mode


@lru_cache(maxsize=8)
def _map(kind: str, d: int, m_prime: int, seed: int) -> torch.Tensor | None:
    return maps.input_map(kind, d, m_prime, seed)


def input_matrix(msg: Message, release: ReleaseConfig, c: Cohort) -> torch.Tensor | None:
    """M1: from the public seed (``random``), none (``identity``), or the server's public-trained
    matrix carried by the message (``public``)."""
    if release.map_in in maps.FROM_SERVER:
        if wire.MAP_IN not in msg.content:
            raise ValueError(f"map-in = {release.map_in!r}: the message carries no M1")
        return torch.as_tensor(wire.array_record(msg.content, wire.MAP_IN)["matrix"].numpy())
    return _map(release.map_in, c.encoder_dim, c.map_dim, release.map_seed)


def central_features(cfg: RunConfig, c: Cohort, emb: torch.Tensor, matrix: torch.Tensor | None = None) -> torch.Tensor:
    """n(M1 x) of raw embeddings, float32 (M1 from the public seed, none, or ``matrix``)."""
    check_central_config(cfg)
    if matrix is None and cfg.release.map_in not in maps.FROM_SERVER:
        matrix = _map(cfg.release.map_in, c.encoder_dim, c.map_dim, cfg.release.map_seed)
    return maps.apply_input_map(emb, matrix).to(torch.float32)


# One model per process and shape, its every parameter set from each request: building a ServerModel
# (its seeded initialisation) cost more than the node's whole update (7 s of a 20-round user-level run).
_server_models: dict[tuple[tuple[int, int, int, int], str], ServerModel] = {}


def global_model(
    msg: Message, server: ServerConfig, c: Cohort, arrays: ArrayRecord | None = None, device: str = "cpu"
) -> ServerModel:
    """The server's current model (input dimension m' = M1's output: no sanitizer in between) on
    ``device``, from ``arrays`` or the request's.

    Every parameter comes from the request (``load_state_dict`` is strict), so the reused module
    carries nothing from an earlier request or node. One module per shape and device: a node that
    trains on a GPU and scores on the CPU keeps one of each, and neither moves the other."""
    if arrays is None:
        if "arrays" not in msg.content:
            raise ValueError("the central-mode message carries no model arrays")
        arrays = wire.array_record(msg.content, "arrays")
    shape = (c.map_dim, c.encoder_dim, int(server.hidden_dim), c.num_classes)
    if (shape, device) not in _server_models:
        for key in [k for k in _server_models if k[0] != shape]:  # one run per process at a time
            del _server_models[key]
        with torch.random.fork_rng(devices=[]):  # the placeholder initialisation leaves the global generator alone
            _server_models[shape, device] = ServerModel(*shape).to(device)
    model = _server_models[shape, device]
    model.load_state_dict(torch_state(arrays))  # copies into the module's own parameters
    model.zero_grad(set_to_none=True)
    return model


def handle_central_train(msg: Message, context: Context, cfg: RunConfig) -> Message:
    """Local training from the global weights on the node's raw embeddings; reply with the new weights."""
    c = _cohort(context, cfg)
    model = global_model(msg, cfg.server, c)
    x = central_features(cfg, c, c.train_emb)
    y = c.train_y
    request: Mapping[str, object] = wire.config_record(msg.content, "config") if "config" in msg.content else {}
    server_round = wire.read_int(request, "server-round", 0)
    # Batch order only (public seed): the privacy comes from the server's clipping and noise.
    gen = torch.Generator().manual_seed(batch_seed(cfg, c.partition_id, server_round))
    adam = torch.optim.Adam(model.parameters(), lr=cfg.server.learning_rate)
    optimizer = with_proximal_term(adam, model.parameters(), proximal_mu(request))  # FedProx's term, if sent
    if x.shape[0]:
        train_epochs(model, optimizer, x, y, int(cfg.central.local_epochs), int(cfg.server.batch_size), gen)
    content = RecordDict(
        {
            "arrays": ArrayRecord(model.state_dict()),
            "metrics": MetricRecord({"num-examples": int(x.shape[0]), UNIFORM_WEIGHT_KEY: 1.0}),
        }
    )
    return Message(content=content, reply_to=msg)


def sampled_users(context: Context, cfg: RunConfig, c: Cohort, server_round: int, q: float) -> torch.Tensor:
    """The node's training users in this round's Poisson sample (sorted global ids)."""
    users = torch.arange(c.train_users.start, c.train_users.stop, dtype=torch.int64)
    # noise-seed, or the node's OS secret; with secure-rng its 256-bit key and a ChaCha20 keystream.
    secret: int | bytes = (
        NodeState(context.state).sampling_key(cfg.release.noise_seed)
        if cfg.release.secure_rng
        else wire.read_int(noise_secret(context, cfg.release), "secret")
    )
    return users[poisson_sample(secret, server_round, users, c.num_train_users, q)]


# A worker serves many nodes a round: the encoder model (copied top layers, adapters, head) is built
# once per process and shape, and only its trainable parameters are set from each request. Nothing
# else in it changes between requests (the frozen weights are the published encoder's; M1 is in the key).
_encoder_models: dict[tuple[Any, ...], EncoderClassifier] = {}


def global_encoder_model(
    msg: Message, cfg: RunConfig, c: Cohort, device: str, arrays: ArrayRecord
) -> EncoderClassifier:
    """``central-train = "encoder"``: the run's encoder's top layers (adapters or the layers themselves)
    and the head, their trainable parameters set from ``arrays``, M1 from the request or the seed."""
    matrix = input_matrix(msg, cfg.release, c)
    key = (
        cfg.encoder.encoder,
        cfg.encoder.tuning_layers,
        cfg.central.central_tuning_part,
        cfg.encoder.tuning_lora_rank,
        cfg.users.seed,
        cfg.server.hidden_dim,
        c.map_dim,
        c.encoder_dim,
        c.num_classes,
        device,
        None if matrix is None else (tuple(matrix.shape), hashlib.sha256(matrix.numpy().tobytes()).hexdigest()),
    )
    if key not in _encoder_models:
        head = ServerModel(c.map_dim, c.encoder_dim, int(cfg.server.hidden_dim), c.num_classes)
        _encoder_models.clear()  # one run per process at a time
        _encoder_models[key] = build_encoder_classifier(
            cfg.encoder, head, matrix, device, tuning_part=cfg.central.central_tuning_part, seed=cfg.users.seed
        )
    return load_trainable(_encoder_models[key], torch_state(arrays))


def requested_model(msg: Message, context: Context) -> ArrayRecord:
    """The trainable parameters a user-level request is about: carried by the request, or (a train
    request's ``model-ref``) the ones this node kept from its last evaluate request.

    The server sends each round's model once per node: the evaluate request of round ``t`` carries
    the model after step ``t``, which is also the model round ``t + 1`` trains from, so a node that
    scored it keeps it (``context.state``, left out of resume snapshots) and the next train request
    names it by its content address instead of carrying it again."""
    if wire.MODEL in msg.content:
        return wire.array_record(msg.content, wire.MODEL)
    ref = wire.config_record(msg.content, wire.CONFIG).get(wire.MODEL_REF)
    if ref is None:
        raise ValueError("the central-mode message carries no model arrays and no model-ref")
    held = context.state.array_records.get(wire.HELD_MODEL)
    if held is None or held.object_id != ref:
        raise ValueError(f"the request names model {str(ref)[:12]}..., which this node does not hold")
    return held


def keep_model(msg: Message, context: Context, arrays: ArrayRecord) -> None:
    """Keep an evaluate request's model for the next train request (see :func:`requested_model`)."""
    if msg.metadata.message_type.split(".")[0] == MessageType.EVALUATE:
        context.state[wire.HELD_MODEL] = arrays


def handle_user_train(msg: Message, context: Context, cfg: RunConfig) -> Message:
    """User-level DP-FedAvg on a node: reply with the sum of the sampled users' clipped updates."""
    c = _cohort(context, cfg)
    device = torch.device(best_device(cfg.server.device))
    arrays = requested_model(msg, context)
    encoder_model = (
        global_encoder_model(msg, cfg, c, str(device), arrays) if cfg.central.central_train == "encoder" else None
    )
    model: nn.Module = (
        encoder_model if encoder_model is not None else global_model(msg, cfg.server, c, arrays, str(device))
    )
    chosen, keep, owner = _sampled_documents(context, cfg, c, *_round_and_rate(msg))
    owner = owner.to(device)
    mu = proximal_mu(wire.config_record(msg.content, wire.CONFIG))  # FedProx's term (strategy = "FedProx")
    steps, lr, clip = (
        int(cfg.central.local_epochs),
        float(cfg.central.client_learning_rate),
        float(cfg.central.central_clip),
    )
    # central-train = "encoder": the frozen lower layers once, the per-user updates through the top and head.
    if chosen.numel() and encoder_model is not None:
        texts = [c.train_text[i] for i in torch.nonzero(keep).reshape(-1).tolist()]
        h, tokens = lower_states(cfg.encoder, texts, str(device))
        y = c.train_y[keep].to(device)
        total = clipped_encoder_sum(
            encoder_model, h, tokens, y, owner, int(chosen.numel()), steps=steps, lr=lr, clip=clip, proximal_mu=mu
        )
    elif chosen.numel():
        x = central_features(cfg, c, c.train_emb[keep], input_matrix(msg, cfg.release, c)).to(device)
        xs, ys, mask = pad_by_user(x, c.train_y[keep].to(device), owner, int(chosen.numel()))
        total, _ = clipped_update_sum(model, xs, ys, mask, steps=steps, lr=lr, clip=clip, proximal_mu=mu)
    else:  # nobody sampled here: the sum is zero (the reply looks the same)
        total = _zero_update(model)
    return _update_reply(msg, total)


def _round_and_rate(msg: Message) -> tuple[int, float]:
    """A user-level train request's round and Poisson sampling rate."""
    request = wire.config_record(msg.content, wire.CONFIG)
    return wire.read_int(request, "server-round"), wire.read_float(request, "sampling-rate")


def _sampled_documents(
    context: Context, cfg: RunConfig, c: Cohort, server_round: int, q: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The node's users sampled this round (sorted ids), which of its training documents are theirs
    (bool), and each such document's user as an index into the sampled ones."""
    chosen = sampled_users(context, cfg, c, server_round, q)
    doc_user = torch.from_numpy(c.train_doc_user)
    keep = torch.isin(doc_user, chosen)
    return chosen, keep, torch.searchsorted(chosen, doc_user[keep])


def _sampled_documents_of_nodes(
    contexts: Sequence[Context], cfg: RunConfig, cohorts: Sequence[Cohort], server_round: int, q: float
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """:func:`_sampled_documents` of several nodes of this process, every node's coins drawn in one pass
    (``keyed_coins``: each of its users under its own secret's round key). A coin is a function of the
    secret, the round and the user id only, so each node samples the users it samples alone (tested);
    ``secure-rng`` keys (a ChaCha20 keystream each) are drawn node by node."""
    if cfg.release.secure_rng or not 0.0 < q <= 1.0:  # poisson_sample refuses such a q, naming it
        return [_sampled_documents(ctx, cfg, c, server_round, q) for ctx, c in zip(contexts, cohorts, strict=True)]
    secrets = [wire.read_int(noise_secret(ctx, cfg.release), "secret") for ctx in contexts]
    sizes = [len(c.train_users) for c in cohorts]
    keys = np.repeat(np.array([hash_seed(s, server_round) for s in secrets], dtype=np.uint64), sizes)
    ids = np.concatenate([np.arange(c.train_users.start, c.train_users.stop, dtype=np.int64) for c in cohorts])
    sampled = np.split(keyed_coins(keys, ids) < q, np.cumsum(sizes)[:-1])
    out = []
    for c, mask in zip(cohorts, sampled, strict=True):
        # A node's documents belong to its own users: their positions in its user block index its coins.
        at = c.train_doc_user - c.train_users.start
        if at.size and not (0 <= int(at.min()) and int(at.max()) < mask.size):
            raise ValueError("a node's documents belong to users outside its block")  # each node then answers alone
        keep = mask[at]
        rank = np.cumsum(mask) - 1  # a sampled user's index among the node's sampled users (sorted ids)
        chosen = np.flatnonzero(mask) + c.train_users.start
        out.append((torch.from_numpy(chosen), torch.from_numpy(keep), torch.from_numpy(rank[at[keep]])))
    return out


def _zero_update(model: nn.Module) -> dict[str, torch.Tensor]:
    """The sum over no sampled user: zeros of every trainable parameter's shape."""
    return {k: torch.zeros_like(v) for k, v in model.named_parameters() if v.requires_grad}


def _update_reply(msg: Message, total: Mapping[str, torch.Tensor]) -> Message:
    """The reply to a user-level train request: the sum of the sampled users' clipped updates, nothing else."""
    arrays = ArrayRecord({k: wire.to_array(v.detach().to("cpu", torch.float32).numpy()) for k, v in total.items()})
    return Message(content=RecordDict({wire.UPDATE_SUM: arrays}), reply_to=msg)


def handle_user_train_batch(
    msgs: Sequence[Message], contexts: Sequence[Context], cfg: RunConfig
) -> list[Message] | None:
    """:func:`handle_user_train` for several nodes of this process at once (the local backend's handoff),
    or ``None`` where the batch does not apply (the encoder, several SGD steps, requests for different
    models or rounds): the caller then gives each node its request.

    Each node samples its own users from its own secret and replies with the sum over its own sampled
    users only, as alone; what is shared is the work: one forward and one backward pass over every
    node's sampled users (``fl.training.user_updates.one_step_sums_by_group``) instead of one per
    node. The sums may differ from the one-node path in their last bits (another reduction order)."""
    if cfg.central.central_train == "encoder" or int(cfg.central.local_epochs) != 1:
        return None
    rounds = {_round_and_rate(m) for m in msgs}
    if len(rounds) != 1:
        return None
    ((server_round, q),) = rounds
    arrays = [requested_model(m, ctx) for m, ctx in zip(msgs, contexts, strict=True)]
    if len({a.object_id for a in arrays}) != 1:
        return None
    cohorts = [_cohort(ctx, cfg) for ctx in contexts]
    device = torch.device(best_device(cfg.server.device))
    model = global_model(msgs[0], cfg.server, cohorts[0], arrays[0], str(device))
    xs, ys, owners, bounds = [], [], [], [0]
    sampled = _sampled_documents_of_nodes(contexts, cfg, cohorts, server_round, q)
    # M1 from the public seed (or none) is every node's: the features of all the nodes' rows at once.
    shared_map = cfg.release.map_in not in maps.FROM_SERVER
    for msg, c, (chosen, keep, owner) in zip(msgs, cohorts, sampled, strict=True):
        emb = c.train_emb[keep]
        xs.append(emb if shared_map else central_features(cfg, c, emb, input_matrix(msg, cfg.release, c)))
        ys.append(c.train_y[keep])
        owners.append(owner + bounds[-1])  # users numbered across nodes
        bounds.append(bounds[-1] + int(chosen.numel()))
    if bounds[-1] == 0:  # nobody sampled on any node
        sums = [_zero_update(model) for _ in msgs]
    else:
        features = central_features(cfg, cohorts[0], torch.cat(xs)) if shared_map else torch.cat(xs)
        owner_of = torch.cat(owners).to(device)
        x, y, mask = pad_by_user(features.to(device), torch.cat(ys).to(device), owner_of, bounds[-1])
        lr, clip = float(cfg.central.client_learning_rate), float(cfg.central.central_clip)
        sums, _ = one_step_sums_by_group(model, x, y, mask, lr=lr, clip=clip, bounds=bounds)
    return [_update_reply(msg, total) for msg, total in zip(msgs, sums, strict=True)]


def handle_central_evaluate(msg: Message, context: Context, cfg: RunConfig) -> Message:
    """Score the global model on the node's test users' raw embeddings; return confusion counts."""
    c = _cohort(context, cfg)
    arrays = wire.array_record(msg.content, wire.MODEL) if wire.MODEL in msg.content else None
    if cfg.central.central_train == "encoder":
        device = best_device(cfg.server.device)
        if arrays is None:
            raise ValueError("the central-mode message carries no model arrays")
        encoder_model = global_encoder_model(msg, cfg, c, device, arrays)
        pred = encoder_predictions(cfg.encoder, encoder_model, c.test_text, device).numpy()
    else:
        model = global_model(msg, cfg.server, c, arrays).eval()
        matrix = input_matrix(msg, cfg.release, c)
        pred = predict(model, central_features(cfg, c, c.test_emb, matrix)).numpy()
    return _evaluate_reply(msg, context, cfg, c, pred, arrays)


def _evaluate_reply(
    msg: Message, context: Context, cfg: RunConfig, c: Cohort, pred: np.ndarray, arrays: ArrayRecord | None
) -> Message:
    """The reply to an evaluate request from the model's classes ``pred`` of the node's test users: their
    confusion counts (and the public-only model's, when the request carries it); a user-level node keeps
    the request's model for its next train request."""
    truth = c.test_y.numpy()
    if cfg.central.central_unit == "user" and arrays is not None:
        keep_model(msg, context, arrays)
    counts: dict[str, Any] = {
        "num-examples": int(truth.size),
        UNIFORM_WEIGHT_KEY: 1.0,
        "confusion": confusion_matrix(truth, pred, c.num_classes).reshape(-1).tolist(),
    }
    if wire.PUBLIC_MODEL in msg.content:  # the model fitted on the public data alone, on the same clean inputs
        public = public_model_predictions(msg.content, c.test_emb)
        counts["public-confusion"] = confusion_matrix(truth, public, c.num_classes).reshape(-1).tolist()
    metrics = MetricRecord(counts)
    return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)


def handle_central_evaluate_batch(
    msgs: Sequence[Message], contexts: Sequence[Context], cfg: RunConfig
) -> list[Message] | None:
    """:func:`handle_central_evaluate` for several user-level nodes of this process at once (the local
    backend's handoff), or ``None`` where it does not apply (the encoder, a map from the server, requests
    for different models or without one): one forward pass over every node's test users, then each node's
    reply from its own users' classes, as alone (tested)."""
    if cfg.central.central_train == "encoder" or cfg.release.map_in in maps.FROM_SERVER:
        return None
    if any(wire.MODEL not in m.content for m in msgs):
        return None
    arrays = [wire.array_record(m.content, wire.MODEL) for m in msgs]
    if len({a.object_id for a in arrays}) != 1:
        return None
    cohorts = [_cohort(ctx, cfg) for ctx in contexts]
    model = global_model(msgs[0], cfg.server, cohorts[0], arrays[0]).eval()
    pred = predict(model, central_features(cfg, cohorts[0], torch.cat([c.test_emb for c in cohorts]))).numpy()
    bounds = np.cumsum([0, *(len(c.test_y) for c in cohorts)])
    return [
        _evaluate_reply(msg, ctx, cfg, c, pred[bounds[i] : bounds[i + 1]], a)
        for i, (msg, ctx, c, a) in enumerate(zip(msgs, contexts, cohorts, arrays, strict=True))
    ]


def central_clipping_mod(msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """Flower's ``fixedclipping_mod`` on training messages that carry a clipping norm.

    ``DifferentialPrivacyClientSideFixedClipping`` puts the norm in the train
    config (``central-clipping = "client"``); other messages (local mode,
    server-side clipping) pass through unchanged.
    """
    if msg.metadata.message_type.split(".")[0] == MessageType.TRAIN:
        configs = list(msg.content.config_records.values())
        if len(configs) == 1 and KEY_CLIPPING_NORM in configs[0]:
            return fixedclipping_mod(msg, context, call_next)
    return call_next(msg, context)
