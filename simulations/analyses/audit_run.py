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

Word level: one-word documents, the two words farthest apart in the word
mechanism's geometry (``mechanisms.audit.word_pair``); the node rewrites every
copy afresh and encodes it. Document level: the truncation box's tight pair
(opposite corners, one sentence apart; truncation sees sentence rows as they
are), or for DeepCandidate the real document and sentence swap of node 0 whose
exact output laws differ most. The printed figure is the ledger's per-user one
(k words x the word guarantee; the document guarantee of k sentences); the
pair's own epsilon (one word / one sentence differs) is ``pair_epsilon``.

Power at these two levels is low by nature, and the audit says so rather than
hide it: in 50-d GloVe with nearest-word decoding and a 384-d encoder output,
and in the 384-d truncation box, the privacy loss reaches the claimed epsilon
only on events of vanishing probability, so even a mechanism at 3x its
epsilon stays below the printed figure (docs/results/audits-and-accounting/audit_levels.md).
The power check that IS caught there is ``"unsanitized"``: the node forgets its
level's mechanism and releases the clean embedding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fl.reporting.progress import bar as progress_bar
from mechanisms.base import LEVELS

TAMPERS = ("", "epsilon-3x", "redraw-uncharged", "leaky-map", "unsanitized")


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
            **{
                "sentence-epsilon": 3 * cfg["sentence-epsilon"],
                "label-epsilon": 3 * cfg["label-epsilon"],
                "word-epsilon": 3 * cfg["word-epsilon"],
                "document-epsilon": 3 * cfg["document-epsilon"],
            }
        )
    if tamper == "unsanitized":  # the node forgets its level's mechanism: the clean embedding goes out
        return cfg.replace(
            **{"word-mechanism": "none", "word-options": "", "document-mechanism": "none", "document-options": ""}
        )
    if tamper == "redraw-uncharged":
        return cfg.replace(**{"fresh-noise-per-round": True})
    if tamper == "leaky-map":
        return cfg.replace(**{"map-in": "leaky", "allow-unaccounted-leakage": True})
    return cfg


def _canary_cohort(
    template: Any, emb: torch.Tensor, label: int, n: int, text: str = "", words: int = 0, sentences: Any = None
) -> Any:
    """A cohort of n users, each holding the canary document (embedding ``emb``, label ``label``;
    at the word level its ``text`` and its number of ``words``, which the node rewrites; at the
    document level its ``sentences``, a float32 [k, d] block of sentence embeddings)."""
    from dataclasses import replace

    from fl.encoding.documents import SentenceDocs

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
        train_text=[text] * n,
        test_text=[],
        train_docs=None
        if sentences is None
        else SentenceDocs(
            sentences.repeat(n, 1).contiguous(), np.arange(0, n * sentences.shape[0] + 1, sentences.shape[0])
        ),
        test_docs=None if sentences is None else SentenceDocs(sentences[:0], np.zeros(1, dtype=np.int64)),
        train_words=np.full(n, words, dtype=np.int64) if text else None,
        test_words=np.zeros(0, dtype=np.int64) if text else None,
    )


def node_zero_and_map(cfg: Any) -> tuple[Any, torch.Tensor | None]:
    """The real node 0 of a run of ``cfg`` (its embedded documents) and the server's real M1 matrix."""
    from fl import wire
    from fl.cohort import build_cohort, population_sizes
    from fl.data.partition import num_nodes
    from strategies.local.release_training import ReleaseTraining

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
    from fl.maps import input_map as maps

    z = maps.apply_input_map(emb, matrix).to(torch.float64)
    return z / z.norm(dim=1, keepdim=True).clamp_min(1e-12)


def _document_canary(setup: Any, mech: Any, docs: Any, pool: int, max_docs: int = 16) -> tuple[int, int]:
    """(document, replacement sentence row) of node 0 whose neighbouring releases differ most.

    Among the first ``max_docs`` documents of the fewest sentences >= 2 and the
    sentences of the first ``pool`` documents, in the space the mechanism sees
    (``setup.recode``): DeepCandidate maximises the total variation between the
    exact output laws (``log_probs``) of the document and of its swap; a box
    mechanism (truncation) maximises the L1 move of the clipped mean.
    """
    from fl.encoding.documents import SentenceDocs

    n = min(pool, len(docs))
    k_all = docs.num_sentences[:n]
    if not (k_all >= 2).any():
        raise ValueError("the document audit needs a training document of 2 or more sentences on node 0")
    k = int(k_all[k_all >= 2].min())
    doc_ids = np.flatnonzero(k_all == k)[:max_docs]
    rows = int(docs.offsets[n])
    recoded = setup.recode(SentenceDocs(docs.emb[:rows], np.array([0, rows]))).to(torch.float64)
    best, pick = -1.0, (int(doc_ids[0]), 0)
    for d in doc_ids.tolist():
        lo, hi = int(docs.offsets[d]), int(docs.offsets[d + 1])
        block = recoded[lo:hi]
        if hasattr(mech, "log_probs"):
            base = mech.log_probs(block).exp()
            scores = torch.stack(
                [
                    0.5 * (mech.log_probs(torch.cat([recoded[r : r + 1], block[1:]])).exp() - base).abs().sum()
                    for r in range(rows)
                ]
            )
        else:
            box_lo, box_hi = mech.lo.to(torch.float64), mech.hi.to(torch.float64)
            clipped = recoded.clamp(box_lo, box_hi)
            scores = (clipped - clipped[lo]).abs().sum(dim=1)
        r = int(torch.argmax(scores))
        if float(scores[r]) > best:
            best, pick = float(scores[r]), (d, r)
    return pick


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

    ``level`` is ``"sentence"`` (x, x' differ in the whole text), ``"label"`` (same text,
    labels differ; needs a label mechanism), ``"word"`` (one-word documents, the two
    words farthest apart in the word mechanism's geometry) or ``"document"`` (a real
    document of the fewest sentences >= 2, and the same with its first sentence
    replaced by the sentence of the pool farthest from it). Deterministic for a fixed ``seed``.
    """
    import tempfile

    from flwr.app import Context, RecordDict

    from clients.ldp_client import charges_by_extras, release
    from fl.accounting import PrivacyLedger
    from fl.config import level_of
    from fl.levels.channels import channel_class, make_channels
    from mechanisms.audit import audit_pair
    from simulations.runtime.api import resolve_config

    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS} (document: per mechanism, mechanisms.audit), got {level!r}")
    if tamper not in TAMPERS:
        raise ValueError(f"tamper must be one of {TAMPERS}, got {tamper!r}")
    cfg = resolve_config(config, dict(overrides or {}))
    run_level = level_of(cfg)
    if cfg["mode"] != "local":
        raise ValueError("the end-to-end audit covers local-mode runs (central mode: its accountant's figure)")
    if run_level != (level if level in ("word", "document") else "sentence"):  # the label rides a sentence-level run
        raise ValueError(f"level = {level!r} does not match the run's level ({run_level}); audit the level the run has")
    if tamper == "unsanitized" and level not in ("word", "document"):
        raise ValueError("the unsanitized power check is for the word and document levels")
    if cfg["map-in"] == "leaky":
        raise ValueError("map-in = 'leaky' prints no guarantee to audit (use tamper = 'leaky-map' as a power check)")
    if tamper == "leaky-map" and (level != "sentence" or cfg["map-in"] != "random"):
        raise ValueError("the leaky-map power check runs at the sentence level from a random M1 (the leaky start)")
    if cfg["encoder-tuning"] != "none":  # the nodes embed with the server's published public-tuned encoder
        from fl.encoding.encoder import best_device
        from fl.encoding.public_tuning import tune_public

        cfg = cfg.replace(encoder=str(tune_public(cfg, best_device(cfg["device"]), progress=False).folder))
    if level == "label" and cfg["label-mechanism"] == "none":
        raise ValueError("level = 'label' needs a label mechanism (labels in the clear have no finite epsilon)")
    rounds = int(cfg["num-server-rounds"])

    real, matrix = node_zero_and_map(cfg)
    pool_emb = real.train_emb[: min(pool, real.train_emb.shape[0])]
    texts, words, word_claim = ("", ""), 0, None
    blocks: tuple[Any, Any] = (None, None)
    setup = None
    if level == "document":
        from fl.encoding.documents import SentenceDocs

        setup = channel_class(cfg).public_setup(cfg, "cpu")
        docs: SentenceDocs = real.train_docs
        mech = setup.mechanism(cfg.release)
        if setup.recoder is None:  # truncation sees the sentence rows as they are: the box's tight pair
            from mechanisms.audit import document_pair

            block, swapped = (t.to(torch.float32) for t in document_pair(mech, 2))
            pair = "two 2-sentence documents at opposite corners of the public box, one sentence apart (tight)"
        else:
            i, far = _document_canary(setup, mech, docs, pool)
            block = docs.docs([i])[0].clone()
            swapped = block.clone()
            swapped[0] = docs.emb[far]
            pair = (
                f"training document {i} of node 0 ({block.shape[0]} sentences) and the same with its first "
                f"sentence replaced by sentence {far} of node 0 (the swap whose output laws differ most)"
            )
        blocks, words = (block, swapped), 0
        ex, ep, yx = block.mean(0), swapped.mean(0), int(real.train_y[0])  # one label for both: text differs
        yp = yx
        pair_distance = None
    elif level == "word":
        from fl.encoding.encoder import best_device, embed_texts
        from fl.levels.word import rewrite as rewrite_mod
        from mechanisms.audit import word_pair, word_pair_claim

        mech = rewrite_mod.word_mechanism(cfg)
        w, wp = word_pair(mech, alphabetic=True)
        texts, words = (mech.space.words[w], mech.space.words[wp]), 1
        word_claim = word_pair_claim(mech, mech.guarantee, w, wp)
        clean = torch.as_tensor(
            np.asarray(embed_texts(list(texts), cfg, best_device(cfg["device"]), store=False)), dtype=torch.float32
        )
        ex, ep, yx = clean[0], clean[1], int(real.train_y[0])
        yp = yx
        pair = f"one-word documents {texts[0]!r} and {texts[1]!r} (farthest pair of {mech.name}'s geometry)"
        pair_distance = word_claim[0]
    elif level == "sentence":
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

    charged_channels = make_channels(cfg, real.map_dim, setup, real.num_classes)
    released_cfg = _release_cfg(cfg, tamper)
    released_setup = setup
    if setup is not None and tamper == "epsilon-3x":  # the node's mechanism comes from the setup's epsilon
        from dataclasses import replace

        released_setup = replace(setup, epsilon=3 * setup.epsilon)
    release_channels = make_channels(released_cfg, real.map_dim, released_setup, real.num_classes)
    model = None
    if tamper == "leaky-map":
        from fl.maps.pipeline import build_model

        model = build_model(cfg, real.release_dim, real.encoder_dim, real.num_classes)

    # word level: the node's rewrites of the canary (new at every batch) go to a scratch cache
    scratch = tempfile.TemporaryDirectory(prefix="sanitas-audit-")

    def sampler(emb: torch.Tensor, label: int, text: str = "", sentences: Any = None):  # type: ignore[no-untyped-def]
        def draw(n: int, gen: torch.Generator) -> torch.Tensor:
            cohort = _canary_cohort(real, emb, label, n, text, words, sentences)
            secret = int(torch.randint(0, 2**62, (1,), generator=gen))  # a fresh node secret per batch
            run_cfg = released_cfg.replace(**{"noise-seed": secret, "cache-dir": scratch.name})
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
        extras = (
            {"num-words": np.array([words], dtype=np.int64)}
            if level == "word"
            else {"num-sentences": np.array([blocks[0].shape[0]], dtype=np.int64)}
            if level == "document"
            else {}
        )
        table, index = charges_by_extras(charged_channels.embedding, 1, extras)
        ledger.record("train", np.zeros(1, dtype=np.int64), table[int(index[0])].guarantee, "embedding")
        if cfg["label-mechanism"] != "none":
            ltable, lindex = charged_channels.label.charges(1)
            ledger.record("train", np.zeros(1, dtype=np.int64), ltable[int(lindex[0])].guarantee, "label")
    snap = ledger.snapshot()
    printed = snap["epsilon_total"] if cfg["label-mechanism"] != "none" else snap["epsilon_ldp"]
    pair_eps = None
    guarantee = charged_channels.embedding.guarantee
    if word_claim is not None and cfg["label-mechanism"] == "none":
        pair_eps = fresh_rounds * word_claim[1]  # one word differs: its guarantee for this pair, per fresh draw
    elif level == "document" and cfg["label-mechanism"] == "none":
        pair_eps = fresh_rounds * float(guarantee.epsilon)  # one sentence differs: the SentDP epsilon
    elif (
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

    pilot = int(pilot_trials) if pilot_trials is not None else max(int(trials) // 4, 2)  # audit_pair's default
    bar = progress_bar(total=2 * (int(trials) + pilot), desc=f"auditing the {level} level's flow", unit="draws")

    def counted(draw: Any) -> Any:
        def sample(n: int, gen: torch.Generator) -> torch.Tensor:
            out = draw(n, gen)
            bar.update(n)
            return out

        return sample

    try:
        result = audit_pair(
            counted(sampler(ex, yx, texts[0], blocks[0])),
            counted(sampler(ep, yp, texts[1], blocks[1])),
            int(trials),
            seed=int(seed),
            pilot_samples=pilot_trials,
            alpha=float(alpha),
            delta=float(snap["delta_total"]),
            claimed_epsilon=float(printed),
            chunk_size=4096,
        )
    finally:
        bar.close()
        scratch.cleanup()
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
