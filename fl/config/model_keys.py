"""The encoder, central and server sections' keys: what embeds, what trains and where.

Declared as :mod:`fl.config.keys` describes: one field per key (default, doc, choices) and the
section's own checks in ``check``.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from fl.config.errors import ConfigError
from fl.config.section import STRATEGY_FORM, Section, at_least, attribute, key
from fl.config.values import mechanism_options


@dataclass(frozen=True)
class EncoderConfig(Section):
    """The sentence encoder G, its cache, and its optional public fine-tuning."""

    encoder: str = key("all-MiniLM-L6-v2", "sentence-transformers name or path")
    encode_batch_size: int = key(64, "documents per encoder forward pass")
    doc_embedding: str = key(
        "whole",
        '"whole" (one input sequence) or "sentence-mean"',
        choices=("whole", "sentence-mean"),
    )
    cache_dir: str = key("", '"" = $SANITAS_CACHE_DIR or ~/.cache/sanitas')
    encoder_tuning: str = key(
        "none",
        '"none" (the encoder as published) or "public": fine-tuned by the server on the public split only'
        " before round 1, published by the digest of its folder, every file (fl.encoding.public_tuning)",
        choices=("none", "public"),
    )
    tuning_part: str = key(
        "all",
        'what the public tuning trains: "all" weights, the "top" tuning-layers layers, or "lora"',
        choices=("all", "top", "lora"),
    )
    tuning_layers: int = key(
        2,
        'transformer layers trained ("top") or given LoRA adapters ("lora"), counted from the top',
    )
    tuning_lora_rank: int = key(8, "rank of the LoRA adapters (query and value projections)")
    tuning_epochs: int = key(
        1,
        'encoder-tuning = "public": at most this many epochs (the best on the public hold-out is kept)',
    )
    tuning_learning_rate: float = key(
        0.0,
        "Adam step size of the encoder part (0 = the part's default: all 3e-5, top 1e-4, lora 1e-3); "
        'central-train = "encoder": the server optimizer\'s step size for the encoder part',
    )
    tuning_batch_size: int = key(32, 'encoder-tuning = "public": documents per step')
    tuning_holdout: float = key(0.1, 'encoder-tuning = "public": share of the public split held out to pick the epoch')
    tuning_noise: bool = key(
        False,
        'encoder-tuning = "public": tune through the run\'s sentence mechanism (a trainable map to map-dim, '
        "normalised, sanitized at sentence-epsilon, straight-through), so the encoder learns what survives the "
        "noise; public data only",
    )

    @property
    def cache_folder(self) -> Path:
        """The embedding cache folder (``cache-dir``, ``$SANITAS_CACHE_DIR``, ``~/.cache/sanitas``)."""
        raw = self.cache_dir or os.environ.get("SANITAS_CACHE_DIR", "") or "~/.cache/sanitas"
        return Path(raw).expanduser().resolve()

    def check(self) -> None:
        """Batch sizes, layers, rank and epochs >= 1; the tuning step size >= 0 and its hold-out in [0, 1)."""
        super().check()
        at_least(
            self, 1, "encode-batch-size", "tuning-layers", "tuning-lora-rank", "tuning-epochs", "tuning-batch-size"
        )
        if not (self.tuning_learning_rate >= 0 and math.isfinite(self.tuning_learning_rate)):
            raise ConfigError(
                "tuning-learning-rate must be >= 0 and finite (0 = the part's default), got "
                f"{self.tuning_learning_rate}"
            )
        if not 0.0 <= self.tuning_holdout < 1.0:
            raise ConfigError(f"tuning-holdout must lie in [0, 1), got {self.tuning_holdout}")


@dataclass(frozen=True)
class CentralConfig(Section):
    """Central-DP mode (DP-FedAvg over users or nodes) and its training."""

    mode: str = key(
        "local",
        '"local": local-DP releases; "central": DP-FedAvg on raw embeddings',
        choices=("local", "central"),
    )
    central_noise_multiplier: float = key(1.0, "Gaussian noise std / clipping norm (Flower DP wrappers)")
    central_clip: float = key(1.0, "clipping norm of a client update")
    central_clipping: str = key("server", '"server" or "client" side fixed clipping', choices=("server", "client"))
    central_delta: float = key(
        0.0,
        "delta of the central (epsilon, delta) account; 0 = 1 / (10 N) for the run's N users, at most 1e-5 "
        "(a delta >= 1 / N is flagged)",
    )
    local_epochs: int = key(1, "central mode: epochs (node unit) or per-user SGD steps (user unit) per round")
    central_unit: str = key(
        "user",
        '"user": user-level DP-FedAvg (Poisson-sampled users, per-user clipping); "node": DP-FedAvg over '
        "whole nodes (a node's update clipped and noised as one client)",
        choices=("user", "node"),
    )
    central_cohort_size: float = key(1000.0, "user unit: expected users per round q * N (q = min(1, this / N))")
    client_learning_rate: float = key(1.0, "user unit: plain-SGD step size of each user's local steps")
    server_optimizer: str = key(
        "adam",
        'user unit: "adam" (FedAdam) or "sgd" (FedAvg step) on the noisy mean',
        choices=("adam", "sgd"),
    )
    server_learning_rate: float = key(0.01, "user unit: step size of the server optimizer")
    central_train: str = key(
        "head",
        'user unit: "head" (M2 + classifier on the frozen encoder\'s embeddings) or "encoder" (the '
        "encoder's central-tuning-part trains too, from each sampled user's own documents, clipped with "
        "the head)",
        choices=("head", "encoder"),
    )
    central_start: str = key(
        "seeded",
        'user unit: where the head starts: "seeded" (a seeded random head) or "public" (M1 and a head fitted on the '
        "public split's clean embeddings, the public data the local side fits on)",
        choices=("seeded", "public"),
    )
    evaluate_every: int = key(
        0,
        "user unit: score the global model on the test users every this many rounds and after the last "
        "(0 = about ten times a run: every ceil(num-server-rounds / 10) rounds); each round's privacy record is "
        "written either way",
    )
    central_tuning_part: str = key(
        "lora",
        'central-train = "encoder": "lora" adapters or the "top" tuning-layers layers',
        choices=("top", "lora"),
    )

    def check(self) -> None:
        """Epochs >= 1, central-delta in [0, 1), and the noise, clipping, cohort and step sizes > 0 and finite."""
        super().check()
        at_least(self, 1, "local-epochs")
        if self.evaluate_every < 0:
            raise ConfigError(f"evaluate-every must be >= 0 (0 = about ten times a run), got {self.evaluate_every}")
        if not 0.0 <= self.central_delta < 1.0:
            raise ConfigError(
                f"central-delta must lie in [0, 1) (0 = 1 / (10 N), at most 1e-5), got {self.central_delta}"
            )
        for name in (
            "central-noise-multiplier",
            "central-clip",
            "central-cohort-size",
            "client-learning-rate",
            "server-learning-rate",
        ):
            value = getattr(self, attribute(name))
            if not (value > 0 and math.isfinite(value)):
                raise ConfigError(f"{name} must be > 0 and finite, got {value}")


#: The devices a run can ask for (torch's names; whether CUDA is there is checked where the run starts).
DEVICE_FORM = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


@dataclass(frozen=True)
class ServerConfig(Section):
    """The server's strategy and the training of M2 + classifier."""

    strategy: str = key(
        "",
        '"" = Sanitas\' ReleaseTraining (local: trained on the server; central: DP-FedAvg with server-optimizer), '
        'a Flower strategy by class name ("FedAdam"; local: trained on the nodes over their releases; central: '
        'the mean family only), "package.module:Class" or "path/to/file.py:Class" (docs/extending.md)',
    )
    strategy_options: str = key(
        "", "the strategy's constructor arguments, TOML inline-table body: 'eta = 0.01, beta_1 = 0.9'"
    )
    num_server_rounds: int = key(3, "rounds of the federation")
    fraction_train: float = key(1.0, "fraction of training users sampled each round")
    server_epochs: int = key(10, "epochs over all releases received so far, per round")
    batch_size: int = key(128, "server training batch size (releases per step)")
    learning_rate: float = key(0.001, "Adam step size of the server's M2 + classifier")
    hidden_dim: int = key(256, "hidden width of M2")
    server_model: str = key(
        "mlp",
        'local mode: "mlp" (M2 + tanh + MLP, trained by Adam on the releases) or "class-means" (the releases\' '
        "class means debiased by the mechanisms' known noise laws, combined with the public class means by their "
        "variances, scored as a linear discriminant; fl.maps.class_means)",
        choices=("mlp", "class-means"),
    )
    cohorts: int = key(
        1,
        'local mode, "class-means": the private users in this many disjoint cohorts, one a round '
        "(num-server-rounds = cohorts), each user releasing once; each later cohort releases along the map the "
        "server fitted on the earlier cohort's releases (fl.maps.cohorts)",
    )
    cohort_map_dim: int = key(
        0,
        "cohorts > 1: m' of every cohort's public projection but the last (0 = map-dim); the last cohort releases "
        "at map-dim along the map fitted on the one before",
    )
    class_means_covariance: str = key(
        "public",
        '"class-means": the within-class covariance of the discriminant: "public" (Ledoit-Wolf on the public '
        "documents) or \"releases\" (debiased from the releases' second moments by the mechanism's known law, shrunk "
        "toward the public one by its noise; with cohorts, the last cohort's only)",
        choices=("public", "releases"),
    )
    device: str = key("auto", '"auto", "cpu", "cuda", "cuda:1", ...')
    node_timeout: float = key(3600.0, "seconds the server waits for a round's replies; later replies count as lost")

    def check(self) -> None:
        """Rounds, epochs, batch and width >= 1, the sampled fraction in (0, 1], a positive step size and
        round timeout, ``strategy`` in one of its forms and ``strategy-options`` TOML (their meaning is
        checked against the class by ``strategies.loading.check_strategy``)."""
        super().check()
        at_least(self, 1, "num-server-rounds", "server-epochs", "batch-size", "hidden-dim", "cohorts")
        if self.cohort_map_dim < 0 or self.cohort_map_dim == 1:  # a projection of one column carries no direction
            raise ConfigError(f"cohort-map-dim must be 0 (= map-dim) or >= 2, got {self.cohort_map_dim}")
        if not 0.0 < self.fraction_train <= 1.0:
            raise ConfigError(f"fraction-train must lie in (0, 1], got {self.fraction_train}")
        if self.learning_rate <= 0:
            raise ConfigError(f"learning-rate must be > 0, got {self.learning_rate}")
        if not (self.node_timeout > 0 and math.isfinite(self.node_timeout)):
            raise ConfigError(f"node-timeout must be > 0 seconds and finite, got {self.node_timeout}")
        if not DEVICE_FORM.fullmatch(self.device):
            raise ConfigError(f'device = {self.device!r}: use "auto", "cpu", "mps", "cuda" or "cuda:N"')
        if self.strategy and not STRATEGY_FORM.fullmatch(self.strategy):
            raise ConfigError(
                f"strategy = {self.strategy!r}: write a Flower class name (\"FedAdam\"), 'package.module:Class' "
                "or 'path/to/file.py:Class'"
            )
        if self.strategy_options and not self.strategy:
            raise ConfigError("strategy-options is set but strategy is empty: name the strategy the options are for")
        mechanism_options(self.strategy_options, "strategy-options")  # its syntax here; its names where it loads
