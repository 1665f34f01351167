"""What a run's privacy figures cover, stated once for every results file and the console.

A run's guarantee (local or central) is about what the nodes *release*: sanitized rows in local
mode (each training user's sanitized embedding and label, and the test users' sanitized evaluation
inputs), noised model updates in central mode. Evaluation is outside it: each node scores the
model against its test users' true labels and returns aggregate confusion counts; with
``clean-evaluation = true`` (off by default: on-device inference) it also scores the model on their
clean, unsanitized inputs and returns those counts too. Those counts are measurements, not
releases under a budget; with few test users per node they nearly reveal individual labels. Every
round's privacy block, ``summary.json``, ``rounds.csv``, ``sweep.csv`` and ``compare.csv`` say so
with ``evaluation_covered = false``.

The guarantee also assumes the noise is secret from whoever it protects against. With
``noise-seed = -1`` (the default) each node draws its secret from the OS and never sends it; a
fixed ``noise-seed >= 0`` (``sanitas compare`` and ``sweep --seeds`` set it to the seed) makes a
reproducible simulation: whoever knows the seed (the run config, which the server holds) can
replay every node's noise, so the printed epsilon is no guarantee against them.
:func:`noise_block` and :func:`guarantee_statement` put both in ``summary.json`` (``noise``,
``guarantee_statement``) and on the console's privacy row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fl.config import ReleaseConfig

GUARANTEE_COVERS = {
    "local": "the sanitized releases only (training releases and the test users' evaluation releases)",
    "central": "the noised global models only (and everything computed from them)",
}

EVALUATION_NOT_COVERED = (
    "evaluation is not covered by any DP guarantee: each node returns confusion counts computed from its "
    "test users' true labels (and, with clean-evaluation = true, off by default, from on-device inference on "
    "their unsanitized inputs); with few test users per node these counts nearly reveal individual labels"
)

#: The noise block of a run whose noise nobody else can replay: where the secret comes from and which
#: generator draws the noise from it (``secure-rng`` or not).
SECRET_NOISE_SOURCE = {
    ("local", False): "each node's secret from its OS CSPRNG, never sent; the noise drawn by torch's Mersenne "
    "Twister seeded from it (not a cryptographic generator: secure-rng = true draws from ChaCha20)",
    ("local", True): "a ChaCha20 keystream under a fresh 256-bit key from each node's OS CSPRNG per draw, never "
    "stored or sent (secure-rng)",
    ("central", False): "secrets from the OS, never sent or written (the trusted server's noise, each node's user "
    "sampling); drawn by torch's Mersenne Twister and SplitMix64 seeded from them (not cryptographic)",
    ("central", True): "ChaCha20 keystreams under 256-bit keys from the OS CSPRNG, never sent or written (the "
    "trusted server's noise, each node's user sampling; secure-rng)",
}

SEEDED_NOISE_NOTE = {
    "local": "reproducible simulation: whoever knows noise-seed (the run config, which the server holds) can replay "
    "every node's noise; the printed epsilon is not a guarantee against them",
    "central": "reproducible simulation: whoever knows noise-seed (the run config) can replay the noise added to the "
    "global models and the users' sampling; the printed epsilon is not a guarantee against them",
}

#: What one GLUE SST-2 training row is (fl.data.sources: phrases cut from ~8.5k review sentences).
SST2_ROW = "a GLUE SST-2 training row; one review sentence can hold up to 35 phrases, each {} under its own budget"


def scope_fields(mode: str) -> dict[str, object]:
    """``guarantee_covers``, ``evaluation_covered = False`` and the reason, for a privacy block or a summary."""
    return {
        "guarantee_covers": GUARANTEE_COVERS[mode],
        "evaluation_covered": False,
        "evaluation_not_covered_because": EVALUATION_NOT_COVERED,
    }


def _scope(summary: Mapping[str, Any]) -> str:
    return "central" if summary.get("mode") == "central" else "local"


def noise_block(mode: str, noise_seed: int, secure_rng: bool = False) -> dict[str, Any]:
    """``summary.json``'s ``noise``: whether the run's noise is secret, and from where; a seeded run
    (``noise-seed >= 0``) says it is reproducible and no guarantee against whoever knows the seed."""
    scope = "central" if mode == "central" else "local"
    if noise_seed >= 0:
        return {
            "secret": False,
            "noise_seed": int(noise_seed),
            "generator": "torch MT19937",
            "note": SEEDED_NOISE_NOTE[scope],
        }
    block: dict[str, Any] = {
        "secret": True,
        "source": SECRET_NOISE_SOURCE[scope, bool(secure_rng)],
        "generator": "ChaCha20" if secure_rng else "torch MT19937",
    }
    if secure_rng:
        block["secure_rng"] = True
    return block


def unit_text(dataset: str, user_unit: str, scope: str = "local") -> str:
    """The privacy unit as the console and ``guarantee_statement`` name it: ``per phrase (...)`` for
    SST-2's rows, ``per source sentence`` for a source-group user, ``per training row`` elsewhere."""
    if user_unit == "source":
        return "per source sentence"
    if dataset == "sst2":
        return f"per phrase ({SST2_ROW.format('released' if scope == 'local' else 'protected')})"
    return "per training row"


def _noise_sentence(noise: Mapping[str, Any] | None, scope: str) -> str:
    if not noise:
        return ""
    if noise.get("secret"):
        who = "secret from the server" if scope == "local" else "secret"
        return f" Noise: {who}: {noise.get('source', 'never sent')}."
    holder = "the run config, which the server holds" if scope == "local" else "the run config"
    return (
        f" Noise: NOT secret, noise-seed = {noise.get('noise_seed')}: a reproducible simulation; whoever knows the "
        f"seed ({holder}) can replay the noise, and this epsilon is no guarantee against them."
    )


def guarantee_statement(
    summary: Mapping[str, Any], user_unit: str | None = None, clean_evaluation: bool | None = None
) -> str:
    """The run's guarantee in words: its epsilon and delta, the unit (``summary["data"]["user_unit"]``,
    else ``user_unit``, else ``"row"``), the messages it covers, whether the noise is secret from the
    server (``summary["noise"]``) and the evaluation counts outside it. ``clean_evaluation`` (else
    ``summary["clean_evaluation"]``) names the on-device inference on clean inputs among them."""
    p = summary.get("privacy") or {}
    unit_key = (summary.get("data") or {}).get("user_unit") or user_unit or "row"
    if clean_evaluation is None:
        clean_evaluation = bool(summary.get("clean_evaluation", False))
    noise = _noise_sentence(summary.get("noise"), _scope(summary))
    if _scope(summary) == "central":
        if p.get("epsilon") is None:
            return "no finite epsilon"
        who = p.get("unit") or summary.get("central_unit") or "user"
        unit = "per node" if who == "node" else unit_text(str(summary.get("dataset", "")), unit_key, "central")
        return (
            f"({p['epsilon']:.3g}, {p.get('delta', 0):g})-DP {unit}, central DP ({who} level). "
            f"Covers: the noised global models (and everything computed from them).{noise} "
            "Outside the guarantee (measurements): the evaluation confusion counts, from the test users' true "
            "labels and clean inputs."
        )
    if not summary.get("ldp_guarantee_holds", True):
        return "NOT LDP (leaky map): no guarantee"
    unit = unit_text(str(summary.get("dataset", "")), unit_key, "local")
    outside = "the evaluation confusion counts, from the test users' true labels"
    if clean_evaluation:
        outside += ", and on-device inference on their clean inputs (clean-evaluation = true)"
    tail = f"{noise} Outside the guarantee (measurements): {outside}."
    total, delta = p.get("epsilon_total"), p.get("delta_total", 0.0)
    if total is not None:
        return (
            f"epsilon {total:.3g} {unit}, delta {delta:g}, local DP. Covers: the training releases (sanitized "
            f"embedding and label) and the test users' sanitized evaluation inputs.{tail}"
        )
    embedding = p.get("epsilon_ldp")
    if embedding is None:
        return "no finite epsilon"
    composed = (p.get("composition_embedding") or {}).get("epsilon_best_approx", embedding)
    return (
        f"epsilon {composed:.3g} {unit} for the embedding, local DP; labels in the clear: no finite epsilon for the "
        f"record. Covers: the sanitized embeddings of the training releases and the test users' sanitized "
        f"evaluation inputs.{tail}"
    )


def summary_scope(summary: Mapping[str, Any], release: ReleaseConfig, *, user_unit: str) -> dict[str, Any]:
    """What ``summary.json`` adds about its guarantee's scope: ``noise`` (:func:`noise_block`, from
    ``release``'s ``noise-seed`` and ``secure-rng``), ``clean_evaluation`` (``release``'s, in local mode) and
    ``guarantee_statement`` (:func:`guarantee_statement`, per ``user_unit``: the data section's ``user-unit``)."""
    fields: dict[str, Any] = {
        "noise": noise_block(_scope(summary), int(release.noise_seed), bool(release.secure_rng)),
        "clean_evaluation": bool(release.clean_evaluation) if _scope(summary) == "local" else True,
    }
    fields["guarantee_statement"] = guarantee_statement({**summary, **fields}, user_unit=user_unit)
    return fields
