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
from mechanisms.audit import audit_pair
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


def _released(release: Any, tamper: str) -> Any:
    """The release section a node with the power check ``tamper`` releases under (the ledger still charges
    ``release``): a typed replace of the honest section."""
    from dataclasses import replace

    if tamper == "epsilon-3x":
        return replace(
            release,
            sentence_epsilon=3 * release.sentence_epsilon,
            label_epsilon=3 * release.label_epsilon,
            word_epsilon=3 * release.word_epsilon,
            document_epsilon=3 * release.document_epsilon,
        )
    if tamper == "unsanitized":  # the node forgets its level's mechanism: the clean embedding goes out
        return replace(release, word_mechanism="none", word_options="", document_mechanism="none", document_options="")
    if tamper == "redraw-uncharged":
        return replace(release, fresh_noise_per_round=True)
    if tamper == "leaky-map":
        return replace(release, map_in="leaky")
    return release


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
    from fl.levels.spec import LevelSpec
    from strategies.local.release_training import ReleaseTraining

    train_users, test_users = population_sizes(cfg.data, cfg.users, cfg.release.level)
    nodes = num_nodes(max(train_users, test_users), cfg.users.users_per_node)
    real = build_cohort(LevelSpec.from_config(cfg), 0, nodes, progress=False)
    server = ReleaseTraining(cfg)
    server.info = wire.CohortInfo(
        0, 0, train_users, 0, 0, 0, test_users, real.num_classes, real.encoder_dim, real.map_dim, real.release_dim
    )
    server.model = None
    server.setup_map()
    matrix = server.map_matrix
    if cfg.server.cohorts > 1 and matrix is not None and int(matrix.shape[1]) != real.map_dim:
        from dataclasses import replace

        # cohorts: the first cohort releases along the map of cohort-map-dim columns (each user releases once, in
        # one cohort, under the same budget): the node is audited as that cohort's node
        real = replace(real, map_dim=int(matrix.shape[1]), release_dim=int(matrix.shape[1]))
    return real, matrix


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


@dataclass
class CanaryPair:
    """The two neighbouring inputs of the canary user: embeddings ``emb``, labels ``labels``; at the word level
    the two one-word ``texts`` (``words`` = 1), at the document level the two sentence ``blocks``. ``pair`` says
    what they are; ``distance`` is their distance in the mechanism's geometry where the claim scales with it,
    ``word_claim`` the word mechanism's (distance, epsilon) for the pair."""

    emb: tuple[torch.Tensor, torch.Tensor]
    labels: tuple[int, int]
    pair: str
    texts: tuple[str, str] = ("", "")
    words: int = 0
    blocks: tuple[Any, Any] = (None, None)
    distance: float | None = None
    word_claim: tuple[float, float] | None = None


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
    cfg = _audit_config(config, level, tamper, overrides)
    rounds = int(cfg["num-server-rounds"])
    real, matrix = node_zero_and_map(cfg)
    setup = _document_setup(cfg) if level == "document" else None
    canary = _choose_pair(cfg, level, real, matrix, setup, pool)
    flow = _TamperedFlow(cfg, tamper, real, matrix, setup, canary.words, rounds)
    fresh_rounds = rounds if cfg["fresh-noise-per-round"] else 1  # redraw-uncharged: charged as cached
    printed, delta = _printed_figure(cfg, level, canary, flow.charged_channels, fresh_rounds)
    pilot = int(pilot_trials) if pilot_trials is not None else max(int(trials) // 4, 2)  # audit_pair's default
    bar = progress_bar(total=2 * (int(trials) + pilot), desc=f"auditing the {level} level's flow", unit="draws")
    try:
        result = audit_pair(
            _counted(flow.sampler(canary, 0), bar),
            _counted(flow.sampler(canary, 1), bar),
            int(trials),
            seed=int(seed),
            pilot_samples=pilot_trials,
            alpha=float(alpha),
            delta=delta,
            claimed_epsilon=printed,
            chunk_size=4096,
        )
    finally:
        bar.close()
        flow.close()
    return FlowAudit(
        level=level,
        pair=canary.pair,
        rounds=rounds,
        fresh_noise_per_round=bool(flow.released.release.fresh_noise_per_round),
        tamper=tamper,
        printed_epsilon=printed,
        pair_epsilon=_pair_epsilon(cfg, level, canary, flow.charged_channels, fresh_rounds),
        epsilon_lb=float(result.epsilon_lb),
        trials=int(trials),
        pilot_trials=int(result.pilot_samples),
        alpha=float(alpha),
        passed=bool(result.epsilon_lb <= printed),
    )


def _audit_config(
    config: str | Path | Mapping[str, Any], level: str, tamper: str, overrides: Mapping[str, Any] | None
) -> Any:
    """The run's resolved config, refused (ValueError, one line) where the audit does not apply: a central run,
    a level other than the run's, a leaky M1, a power check that does not fit the level. A public-tuned
    encoder is tuned (or read from its cache) first: the nodes embed with the server's published encoder."""
    from fl.config import level_of
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
    if cfg.encoder.encoder_tuning != "none":  # the nodes embed with the server's published public-tuned encoder
        from dataclasses import replace

        from fl.encoding.encoder import best_device
        from fl.encoding.public_tuning import TuningSpec, tuned_encoder

        encoder = tuned_encoder(TuningSpec.from_config(cfg), best_device(cfg.server.device), progress=False)
        cfg = replace(cfg, encoder=encoder)
    if level == "label" and cfg["label-mechanism"] == "none":
        raise ValueError("level = 'label' needs a label mechanism (labels in the clear have no finite epsilon)")
    return cfg


def _document_setup(cfg: Any) -> Any:
    """The document level's public setup (its recoder, if any, trained on public data), as the nodes build it."""
    from fl.levels.channels import channel_class
    from fl.levels.spec import LevelSpec

    return channel_class(cfg.release.level).public_setup(LevelSpec.from_config(cfg), "cpu")


def _choose_pair(cfg: Any, level: str, real: Any, matrix: torch.Tensor | None, setup: Any, pool: int) -> CanaryPair:
    """The canary's neighbouring inputs at ``level`` (module docstring), from node 0's real documents."""
    if level == "document":
        return _document_pair(cfg, real, setup, pool)
    if level == "word":
        return _word_pair(cfg, real)
    pool_emb = real.train_emb[: min(pool, real.train_emb.shape[0])]
    if level == "sentence":
        dist = torch.cdist(*(2 * [mechanism_inputs(pool_emb, matrix)]))
        i, j = divmod(int(torch.argmax(dist)), dist.shape[1])
        # Same label: the neighbours differ in the text (a label in the clear would tell them apart).
        y = int(real.train_y[i])
        pair = f"training documents {i} and {j} of node 0 (farthest of {pool_emb.shape[0]} after M1)"
        return CanaryPair((pool_emb[i], pool_emb[j]), (y, y), pair, distance=float(dist[i, j]))
    yx, yp = int(real.train_y[0]), (int(real.train_y[0]) + 1) % real.num_classes
    pair = f"training document 0 of node 0 with labels {yx} and {yp}"
    return CanaryPair((pool_emb[0], pool_emb[0]), (yx, yp), pair)


def _document_pair(cfg: Any, real: Any, setup: Any, pool: int) -> CanaryPair:
    """Truncation: the box's tight pair; a recoding mechanism (DeepCandidate): node 0's document and the
    sentence swap whose exact output laws differ most (:func:`_document_canary`). One label for both."""
    from fl.encoding.documents import SentenceDocs

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
    y = int(real.train_y[0])  # one label for both: the text differs
    return CanaryPair((block.mean(0), swapped.mean(0)), (y, y), pair, blocks=(block, swapped))


def _word_pair(cfg: Any, real: Any) -> CanaryPair:
    """One-word documents: the two words farthest apart in the word mechanism's geometry, encoded clean."""
    from fl.encoding.encoder import best_device, embed_texts
    from fl.levels.word import rewrite as rewrite_mod
    from mechanisms.audit import word_pair, word_pair_claim

    mech = rewrite_mod.word_mechanism(cfg.release)
    w, wp = word_pair(mech, alphabetic=True)
    texts = (mech.space.words[w], mech.space.words[wp])
    word_claim = word_pair_claim(mech, mech.guarantee, w, wp)
    clean = torch.as_tensor(
        np.asarray(embed_texts(list(texts), cfg.encoder, best_device(cfg["device"]), store=False)), dtype=torch.float32
    )
    y = int(real.train_y[0])
    pair = f"one-word documents {texts[0]!r} and {texts[1]!r} (farthest pair of {mech.name}'s geometry)"
    return CanaryPair(
        (clean[0], clean[1]), (y, y), pair, texts=texts, words=1, distance=word_claim[0], word_claim=word_claim
    )


class _TamperedFlow:
    """The node's release flow for canary cohorts, with the power check ``tamper`` applied to what is released
    (``release_channels``, ``released``), while the ledger charges the honest ``charged_channels``."""

    def __init__(
        self, cfg: Any, tamper: str, real: Any, matrix: torch.Tensor | None, setup: Any, words: int, rounds: int
    ) -> None:
        import tempfile
        from dataclasses import replace

        from fl.levels.channels import make_channels
        from fl.levels.spec import LevelSpec

        self.cfg, self.real, self.matrix, self.words, self.rounds = cfg, real, matrix, words, rounds
        self.charged_channels = make_channels(LevelSpec.from_config(cfg), real.map_dim, setup, real.num_classes)
        honest = LevelSpec.from_config(cfg)
        self.released = replace(honest, release=_released(cfg.release, tamper))  # what the (tampered) node releases
        released_setup = setup
        if setup is not None and tamper == "epsilon-3x":  # the node's mechanism comes from the setup's epsilon
            released_setup = replace(setup, epsilon=3 * setup.epsilon)
        self.release_channels = make_channels(self.released, real.map_dim, released_setup, real.num_classes)
        self.model = None
        if tamper == "leaky-map":
            from fl.maps.pipeline import build_model

            self.model = build_model(
                real.release_dim,
                real.encoder_dim,
                real.num_classes,
                hidden_dim=cfg.server.hidden_dim,
                seed=cfg.users.seed,
            )
        # word level: the node's rewrites of the canary (new at every batch) go to a scratch cache
        self.scratch = tempfile.TemporaryDirectory(prefix="sanitas-audit-")

    def close(self) -> None:
        self.scratch.cleanup()

    def sampler(self, canary: CanaryPair, side: int) -> Any:
        """``draw(n, gen)``: n trials of input ``side`` (0: x, 1: x'), each a user on a node of its own with a
        fresh node secret; a row holds what the server sees of that user over the rounds."""
        from dataclasses import replace

        from fl.release import NodeState, release

        emb, label = canary.emb[side], canary.labels[side]
        text, sentences = canary.texts[side], canary.blocks[side]

        def draw(n: int, gen: torch.Generator) -> torch.Tensor:
            cohort = _canary_cohort(self.real, emb, label, n, text, self.words, sentences)
            secret = int(torch.randint(0, 2**62, (1,), generator=gen))  # a fresh node secret per batch
            # A node of its own (a new state) whose secret is this batch's: noise-seed = secret, as a node with
            # that seed would draw; its word rewrites go to the scratch cache.
            spec = replace(
                self.released,
                release=replace(self.released.release, noise_seed=secret),
                encoder=replace(self.released.encoder, cache_dir=self.scratch.name),
            )
            state = NodeState()
            if self.model is not None:
                return torch.cat([self._leaky_trial(state, spec, cohort, i) for i in range(n)])
            rows = np.arange(n, dtype=np.int64)
            seen = []
            for _ in range(self.rounds):
                rel = release(state, spec, "train", cohort, rows, self.release_channels, self.matrix)
                parts = [torch.as_tensor(rel.emb, dtype=torch.float64)]
                if rel.labels is not None and self.cfg.release.label_mechanism != "none":
                    labels = torch.as_tensor(rel.labels)
                    parts.append(torch.nn.functional.one_hot(labels, self.real.num_classes).double())
                seen.append(torch.cat(parts, dim=1))
            return torch.cat(seen, dim=1)

        return draw

    def _leaky_trial(self, state: Any, spec: Any, cohort: Any, i: int) -> torch.Tensor:
        """One leaky user on a node of its own: its release and the gradient its reply carries."""
        from fl.release import release

        rel = release(state, spec, "train", cohort, np.array([i]), self.release_channels, self.matrix, self.model)
        assert rel.grad is not None
        flat = [torch.as_tensor(rel.emb, dtype=torch.float64).reshape(-1), rel.grad.double().reshape(-1)]
        return torch.cat(flat)[None]


def _printed_figure(cfg: Any, level: str, canary: CanaryPair, channels: Any, fresh_rounds: int) -> tuple[float, float]:
    """(epsilon, delta) the run's ledger prints for the canary: the charges of its fresh rows over the rounds."""
    from fl.accounting import PrivacyLedger
    from fl.release import charges_by_extras

    ledger = PrivacyLedger({"train": 1}, target_delta=cfg["accounting-delta"])
    extras = (
        {"num-words": np.array([canary.words], dtype=np.int64)}
        if level == "word"
        else {"num-sentences": np.array([canary.blocks[0].shape[0]], dtype=np.int64)}
        if level == "document"
        else {}
    )
    user = np.zeros(1, dtype=np.int64)
    for _ in range(fresh_rounds):
        table, index = charges_by_extras(channels.embedding, 1, extras)
        ledger.record("train", user, table[int(index[0])].guarantee, "embedding")
        if cfg["label-mechanism"] != "none":
            ltable, lindex = channels.label.charges(1)
            ledger.record("train", user, ltable[int(lindex[0])].guarantee, "label")
    snap = ledger.snapshot()
    printed = snap["epsilon_total"] if cfg["label-mechanism"] != "none" else snap["epsilon_ldp"]
    return float(printed), float(snap["delta_total"])


def _pair_epsilon(cfg: Any, level: str, canary: CanaryPair, channels: Any, fresh_rounds: int) -> float | None:
    """The pair's own epsilon where one is defined (labels in the clear): one word differs (its guarantee for
    this pair), one sentence differs (the SentDP epsilon), or a metric sentence guarantee at the pair's distance;
    per fresh draw."""
    if cfg["label-mechanism"] != "none":
        return None
    guarantee = channels.embedding.guarantee
    if canary.word_claim is not None:
        return fresh_rounds * canary.word_claim[1]
    if level == "document":
        return fresh_rounds * float(guarantee.epsilon)
    if level == "sentence" and guarantee.notion == "metric" and canary.distance is not None:
        d = canary.distance
        scale = 2 * float(np.arcsin(min(1.0, d / 2))) if "angular" in (guarantee.metric or "") else d
        return fresh_rounds * guarantee.epsilon * scale
    return None


def _counted(draw: Any, bar: Any) -> Any:
    """``draw`` that also advances the progress ``bar`` by the draws it makes."""

    def sample(n: int, gen: torch.Generator) -> torch.Tensor:
        out = draw(n, gen)
        bar.update(n)
        return out

    return sample
