"""End-to-end audit of a run's per-user figure: ``sanitas audit CONFIG``.

What a user must trust is the epsilon a run prints for a user, which covers the
whole flow: encoder, M1 and its normalisation, the sanitizer, what crosses the
wire, cached re-sends or fresh re-draws over the rounds, and the ledger. This
module checks that figure empirically for the sentence and label levels.

The canary. A user of node 0 whose document is one of two real documents of the
data, x and x' (sentence level: the two of the first ``pool`` training documents
farthest apart after M1 and normalisation, so the whole text differs; label
channel: one document with two labels). Each trial is that user on a node of its
own with a fresh node secret.

The flow, vectorised. A trial batch is a cohort of n copies of the canary; the
node's real release code (``clients.ldp_client.release``, the same channels, map,
cache and ``fresh-noise-per-round`` rule as in a run) answers ``num-server-rounds``
training requests for all of them, so each row gets its own noise and the
attacker sees, per trial, exactly what the server sees of that user: the
released rows of every round (a cached row re-sent is the same row) and the
released labels. The printed figure is what the run's ledger would print for the
user: the charges of the rows marked fresh, entered in a ``PrivacyLedger``.

The test. ``mechanisms.audit.audit_pair`` (a projection statistic and thresholds
chosen on a pilot sample, then Clopper-Pearson bounds with Bonferroni) gives
eps_LB, a (1 - alpha) lower bound on the epsilon the flow needs for this pair:
if the flow meets the printed figure, eps_LB > printed happens with probability
<= alpha. Power checks (``tamper``) break the flow on purpose and must be caught:
``"epsilon-3x"`` releases with 3x the configured epsilon while the ledger charges
1x; ``"redraw-uncharged"`` re-draws every round while the ledger charges one
release; ``"leaky-map"`` runs the paper's leaky M1 (``map-in = "leaky"``: the reply
also carries the unsanitized dLoss/dM1) against the nominal figure of its mechanism.

Not covered here yet: the word and document levels (their per-unit pairs are
audited per mechanism in ``mechanisms.audit``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

TAMPERS = ("", "epsilon-3x", "redraw-uncharged", "leaky-map")


@dataclass(frozen=True)
class FlowAudit:
    """The outcome of one end-to-end audit.

    ``passed`` is ``epsilon_lb <= printed_epsilon``: no violation of the printed
    per-user figure found at confidence ``1 - alpha``.
    """

    level: str
    pair: str
    rounds: int
    fresh_noise_per_round: bool
    tamper: str
    printed_epsilon: float
    pair_epsilon: float | None
    epsilon_lb: float
    trials: int
    pilot_trials: int
    alpha: float
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _release_cfg(cfg: Any, tamper: str) -> Any:
    if tamper == "epsilon-3x":
        return cfg.replace(
            **{"sentence-epsilon": 3 * cfg["sentence-epsilon"], "label-epsilon": 3 * cfg["label-epsilon"]}
        )
    if tamper == "redraw-uncharged":
        return cfg.replace(**{"fresh-noise-per-round": True})
    if tamper == "leaky-map":
        return cfg.replace(**{"map-in": "leaky", "allow-unaccounted-leakage": True})
    return cfg


def _canary_cohort(template: Any, emb: torch.Tensor, label: int, n: int) -> Any:
    """A cohort of n users, each holding the canary document (embedding ``emb``, label ``label``)."""
    from dataclasses import replace

    rows = np.arange(n, dtype=np.int64)
    return replace(
        template,
        partition_id=0,
        num_partitions=1,
        num_train_users=n,
        num_test_users=0,
        train_users=range(n),
        test_users=range(0),
        train_doc_user=rows,
        train_doc_rows=rows,
        train_emb=emb.reshape(1, -1).expand(n, -1).contiguous(),
        train_y=torch.full((n,), int(label), dtype=torch.long),
        test_emb=template.test_emb[:0],
        test_y=template.test_y[:0],
        train_text=[""] * n,
        test_text=[],
        train_docs=None,
        test_docs=None,
        train_words=None,
        test_words=None,
    )


def node_zero_and_map(cfg: Any) -> tuple[Any, torch.Tensor | None]:
    """The real node 0 of a run of ``cfg`` (its embedded documents) and the server's real M1 matrix."""
    from fl import messages as wire
    from fl.cohort import build_cohort, population_sizes
    from fl.partition import num_nodes
    from strategies.release_training import ReleaseTraining

    train_users, test_users = population_sizes(cfg)
    real = build_cohort(cfg, 0, num_nodes(max(train_users, test_users), cfg["users-per-node"]), progress=False)
    server = ReleaseTraining(cfg)
    server.info = wire.CohortInfo(
        0, 0, train_users, 0, 0, 0, test_users, real.num_classes, real.encoder_dim, real.map_dim, real.release_dim
    )
    server.model = None
    server.setup_map()
    return real, server.map_matrix


def mechanism_inputs(emb: torch.Tensor, matrix: torch.Tensor | None) -> torch.Tensor:
    """What the sentence mechanism receives for these embeddings: M1 applied, then unit-normalised (float64)."""
    from fl import maps

    z = maps.apply_input_map(emb, matrix).to(torch.float64)
    return z / z.norm(dim=1, keepdim=True).clamp_min(1e-12)


def audit_run(
    config: str | Path | Mapping[str, Any],
    *,
    level: str = "sentence",
    trials: int = 20_000,
    pilot_trials: int | None = None,
    seed: int = 0,
    alpha: float = 0.05,
    tamper: str = "",
    pool: int = 256,
    overrides: Mapping[str, Any] | None = None,
) -> FlowAudit:
    """Audit the per-user figure a run of ``config`` prints, for a canary user (module docstring).

    ``level`` is ``"sentence"`` (x, x' differ in the whole text) or ``"label"`` (same text,
    labels differ; needs a label mechanism). Deterministic for a fixed ``seed``.
    """
    from flwr.app import Context, RecordDict

    from clients.ldp_client import charges_by_extras, release
    from fl.accounting import PrivacyLedger
    from fl.channels import channel_class, make_channels
    from mechanisms.audit import audit_pair
    from simulations.api import resolve_config

    if level not in ("sentence", "label"):
        raise ValueError(f"level must be 'sentence' or 'label' (word and document: per mechanism), got {level!r}")
    if tamper not in TAMPERS:
        raise ValueError(f"tamper must be one of {TAMPERS}, got {tamper!r}")
    cfg = resolve_config(config, dict(overrides or {}))
    if cfg["mode"] != "local" or channel_class(cfg).__name__ != "SentenceChannel":
        raise ValueError("the end-to-end audit covers local-mode sentence-level runs (and their label channel)")
    if cfg["map-in"] == "leaky":
        raise ValueError("map-in = 'leaky' prints no guarantee to audit (use tamper = 'leaky-map' as a power check)")
    if tamper == "leaky-map" and (level != "sentence" or cfg["map-in"] != "random"):
        raise ValueError("the leaky-map power check runs at the sentence level from a random M1 (the leaky start)")
    if level == "label" and cfg["label-mechanism"] == "none":
        raise ValueError("level = 'label' needs a label mechanism (labels in the clear have no finite epsilon)")
    rounds = int(cfg["num-server-rounds"])

    real, matrix = node_zero_and_map(cfg)
    pool_emb = real.train_emb[: min(pool, real.train_emb.shape[0])]
    if level == "sentence":
        dist = torch.cdist(*(2 * [mechanism_inputs(pool_emb, matrix)]))
        i, j = divmod(int(torch.argmax(dist)), dist.shape[1])
        # Same label: the neighbours differ in the text (a label in the clear would tell them apart).
        ex, ep, yx = pool_emb[i], pool_emb[j], int(real.train_y[i])
        yp = yx
        pair = f"training documents {i} and {j} of node 0 (farthest of {pool_emb.shape[0]} after M1)"
        pair_distance = float(dist[i, j])
    else:
        ex, ep = pool_emb[0], pool_emb[0]
        yx, yp = int(real.train_y[0]), (int(real.train_y[0]) + 1) % real.num_classes
        pair = f"training document 0 of node 0 with labels {yx} and {yp}"
        pair_distance = None

    charged_channels = make_channels(cfg, real.map_dim, None, real.num_classes)
    released_cfg = _release_cfg(cfg, tamper)
    release_channels = make_channels(released_cfg, real.map_dim, None, real.num_classes)
    model = None
    if tamper == "leaky-map":
        from fl.pipeline import build_model

        model = build_model(cfg, real.release_dim, real.encoder_dim, real.num_classes)

    def sampler(emb: torch.Tensor, label: int):  # type: ignore[no-untyped-def]
        def draw(n: int, gen: torch.Generator) -> torch.Tensor:
            cohort = _canary_cohort(real, emb, label, n)
            secret = int(torch.randint(0, 2**62, (1,), generator=gen))  # a fresh node secret per batch
            run_cfg = released_cfg.replace(**{"noise-seed": secret})
            ctx = Context(
                run_id=0,
                node_id=0,
                node_config={"partition-id": 0, "num-partitions": 1},
                state=RecordDict(),
                run_config={},
            )
            rows = np.arange(n, dtype=np.int64)
            if model is not None:
                return torch.cat([_leaky_trial(ctx, run_cfg, cohort, i) for i in range(n)])
            seen = []
            for _ in range(rounds):
                rel = release(ctx, run_cfg, "train", cohort, rows, release_channels, matrix)
                parts = [torch.as_tensor(rel.emb, dtype=torch.float64)]
                if rel.labels is not None and cfg["label-mechanism"] != "none":
                    parts.append(torch.nn.functional.one_hot(torch.as_tensor(rel.labels), real.num_classes).double())
                seen.append(torch.cat(parts, dim=1))
            return torch.cat(seen, dim=1)

        return draw

    def _leaky_trial(ctx: Any, run_cfg: Any, cohort: Any, i: int) -> torch.Tensor:
        """One leaky user on a node of its own: its release and the gradient its reply carries."""
        rel = release(ctx, run_cfg, "train", cohort, np.array([i]), release_channels, matrix, model)
        assert rel.grad is not None
        return torch.cat([torch.as_tensor(rel.emb, dtype=torch.float64).reshape(-1), rel.grad.double().reshape(-1)])[
            None
        ]

    # What the ledger prints for the canary: the charges of its fresh rows over the rounds.
    ledger = PrivacyLedger({"train": 1}, target_delta=cfg["accounting-delta"])
    fresh_rounds = rounds if (cfg["fresh-noise-per-round"]) else 1  # redraw-uncharged: charged as cached
    for _ in range(fresh_rounds):
        table, index = charges_by_extras(charged_channels.embedding, 1, {})
        ledger.record("train", np.zeros(1, dtype=np.int64), table[int(index[0])].guarantee, "embedding")
        if cfg["label-mechanism"] != "none":
            ltable, lindex = charged_channels.label.charges(1)
            ledger.record("train", np.zeros(1, dtype=np.int64), ltable[int(lindex[0])].guarantee, "label")
    snap = ledger.snapshot()
    printed = snap["epsilon_total"] if cfg["label-mechanism"] != "none" else snap["epsilon_ldp"]
    pair_eps = None
    guarantee = charged_channels.embedding.guarantee
    if (
        level == "sentence"
        and guarantee.notion == "metric"
        and pair_distance is not None
        and cfg["label-mechanism"] == "none"
    ):
        pair_eps = (
            fresh_rounds
            * guarantee.epsilon
            * (
                2 * float(np.arcsin(min(1.0, pair_distance / 2)))
                if "angular" in (guarantee.metric or "")
                else pair_distance
            )
        )

    result = audit_pair(
        sampler(ex, yx),
        sampler(ep, yp),
        int(trials),
        seed=int(seed),
        pilot_samples=pilot_trials,
        alpha=float(alpha),
        claimed_epsilon=float(printed),
        chunk_size=4096,
    )
    return FlowAudit(
        level=level,
        pair=pair,
        rounds=rounds,
        fresh_noise_per_round=bool(released_cfg["fresh-noise-per-round"]),
        tamper=tamper,
        printed_epsilon=float(printed),
        pair_epsilon=pair_eps,
        epsilon_lb=float(result.epsilon_lb),
        trials=int(trials),
        pilot_trials=int(result.pilot_samples),
        alpha=float(alpha),
        passed=bool(result.epsilon_lb <= printed),
    )
