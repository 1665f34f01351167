"""The run-config keys, declared once: name, default, section, doc and allowed values.

Each section is a frozen dataclass; each field is one key (``sentence_epsilon`` is the key
``sentence-epsilon``) declared with :func:`key`: its default, one line of documentation and, for the
keys that take a fixed set of values, ``choices``. Everything else is generated from these classes:
``DEFAULTS``, ``SECTIONS``, ``CHOICES`` and ``DOCS`` below, the ``[tool.flwr.app.config]`` block of
``pyproject.toml`` and the tables of ``docs/configuration.md`` (:mod:`fl.config.reference`; tests check
both files against it). Each section checks its own keys (``check``); rules that read keys of two sections
are in :mod:`fl.config.rules`. A new key is one field here plus its check in its section's ``check`` (or a
rule there).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from fl.config.errors import ConfigError
from fl.config.section import STRATEGY_FORM, Section, at_least, attribute, declared_default, kebab, key
from fl.config.values import (
    is_user_file,
    label_name_list,
    level_of,
    make_mechanism,
    mechanism_options,
    public_label_pairs,
)


@dataclass(frozen=True)
class DataConfig(Section):
    """Where the documents come from and how they are split: the dataset, users' files, subsampling and the
    public split."""

    dataset: str = key(
        "sst2",
        'registry name (sst2 imdb 20newsgroups agnews qnli sst5 trec mr cr mpqa subj), "synthetic" (scale work only), '
        "or a path to your own .csv/.jsonl/.json/.parquet file",
    )
    data_dir: str = key("", 'folder with <dataset>/<split>.jsonl.gz; "" = $SANITAS_DATA_DIR, else the hub')
    test_file: str = key("", "user data: optional separate test file")
    text_column: str = key("text", "user data: text column(s), comma-separated columns are joined")
    label_column: str = key("label", "user data: label column")
    label_names: str = key(
        "",
        'user data: the class names in class-id order, "ham,spam" (every string label must be one; integer labels '
        'are ids 0..k-1 and get these names); "" = the distinct labels, sorted',
    )
    test_fraction: float = key(0.2, "seeded test split when a dataset has a single split")
    train_size: int = key(0, "seeded subsample of training documents (0 = all)")
    test_size: int = key(0, "seeded subsample of test documents (0 = all)")
    public_fraction: float = key(0.0, "seeded fraction of training documents marked public")
    public_split: str = key(
        "source",
        'how public-fraction splits: "source" (groups of items that share text stay on one side; a text '
        'contained verbatim in a public text is public; fl.data.sources) or "row" (unsafe where items share text)',
        choices=("source", "row"),
    )
    group_column: str = key("", 'user data: column naming each item\'s source group ("" = grouped by containment)')
    public_dataset: str = key(
        "",
        "public data from another registry dataset or file (its training split; needs public-fraction = 0)",
    )
    public_size: int = key(
        0,
        "seeded number of public documents: a public-dataset's subsample, or (public-fraction = 0) whole source "
        "groups (public-split = source) or rows of the training split drawn until this many texts are public "
        "(0 = all of public-dataset / public-fraction); more than there are is refused",
    )
    public_sentences: bool = key(False, "public-dataset: split its documents into sentences, each keeping its label")
    public_labels: str = key(
        "",
        'public-dataset: its class names -> the run\'s, "neg = negative, pos = positive" ("" = equal names or '
        "unambiguous prefixes)",
    )
    user_unit: str = key(
        "row",
        'who a private user is: "row" (every training row, e.g. a GLUE SST-2 phrase) or "source" (one user per '
        "source group, holding its longest text, which contains the group's other texts verbatim: the user's record "
        "is the whole group, released once under one budget)",
        choices=("row", "source"),
    )
    empty_documents: str = key("error", '"error" or "drop" (dropped documents are counted)', choices=("error", "drop"))
    short_documents: str = key(
        "drop",
        'document level: documents with < 2 sentences are "drop"ped (counted) or an "error"',
        choices=("drop", "error"),
    )
    synthetic_dim: int = key(384, 'dataset = "synthetic": embedding dimension d (no encoder)')
    synthetic_test_users: int = key(2000, 'dataset = "synthetic": test users (one document each)')

    @property
    def folder(self) -> Path | None:
        """The local data folder (``data-dir``, then ``$SANITAS_DATA_DIR``), or None for the hub."""
        raw = self.data_dir or os.environ.get("SANITAS_DATA_DIR", "")
        return Path(raw).expanduser().resolve() if raw else None

    @property
    def synthetic(self) -> bool:
        """``dataset = "synthetic"``: vectors for scale and speed measurements only, no text."""
        return self.dataset == "synthetic"

    def check(self) -> None:
        """Sizes and fractions in range; one source of public documents, described only where it is
        another dataset; a user's file for the keys that describe one; ``data-dir`` a folder."""
        super().check()
        if self.synthetic_dim < 2 or self.synthetic_test_users < 1:
            raise ConfigError(
                f"synthetic-dim must be >= 2 and synthetic-test-users >= 1, got {self.synthetic_dim} and "
                f"{self.synthetic_test_users}"
            )
        at_least(self, 0, "train-size", "test-size")
        if not 0.0 < self.test_fraction < 1.0:
            raise ConfigError(f"test-fraction must lie in (0, 1), got {self.test_fraction}")
        if not 0.0 <= self.public_fraction < 1.0:
            raise ConfigError(f"public-fraction must lie in [0, 1), got {self.public_fraction}")
        self._check_public_data()
        if self.data_dir and not Path(self.data_dir).expanduser().is_dir():
            raise ConfigError(f"data-dir {self.data_dir!r} does not exist or is not a folder")

    def _check_public_data(self) -> None:
        """The public-data keys: one source of public documents (``public-size`` sizes a public-dataset's
        subsample or, with public-fraction = 0, the training split's public part; never both with
        public-fraction), sizes, text where they need it, and the label mapping's form."""
        if self.public_dataset and self.public_fraction > 0:
            raise ConfigError(
                f"public-dataset = {self.public_dataset!r} and public-fraction = {self.public_fraction} both "
                "name public documents: set public-fraction = 0 to take them from the other dataset only"
            )
        if self.public_size < 0:
            raise ConfigError(f"public-size must be >= 0 (0 = all), got {self.public_size}")
        if self.public_size > 0 and self.public_fraction > 0:
            raise ConfigError(
                f"public-size = {self.public_size} and public-fraction = {self.public_fraction} both size the public "
                "split of the training data: set public-fraction = 0 to draw public-size documents"
            )
        if not self.public_dataset:
            for name in ("public-sentences", "public-labels"):
                value, default = getattr(self, attribute(name)), declared_default(self, name)
                if value != default:
                    raise ConfigError(f"{name} = {value!r} needs public-dataset (the other dataset it describes)")
        if self.public_dataset == "synthetic" or (self.dataset == "synthetic" and self.public_dataset):
            raise ConfigError('public-dataset needs text: dataset = "synthetic" has none')
        if self.dataset == "synthetic":
            for name, value in (("public-size", self.public_size), ("user-unit", self.user_unit)):
                if value != declared_default(self, name):
                    raise ConfigError(f'{name} = {value!r} needs text: dataset = "synthetic" has none')
        public_label_pairs(self.public_labels)
        if self.group_column and not is_user_file(self.dataset):
            raise ConfigError(
                f"group-column = {self.group_column!r} names a column of your own data file; dataset = "
                f"{self.dataset!r} is a registry dataset (its groups are found by containment)"
            )
        if label_name_list(self.label_names) and not is_user_file(self.dataset):
            raise ConfigError(
                f"label-names = {self.label_names!r} names the classes of your own data file; dataset = "
                f"{self.dataset!r} has fixed class names (leave label-names empty)"
            )


@dataclass(frozen=True)
class UsersConfig(Section):
    """Users and nodes: how documents become users and users are partitioned over simulated nodes."""

    num_users: int = key(0, "training users (0 = one user per training document)")
    partitioner: str = key("iid", '"iid" or "dirichlet" (label skew), via flwr-datasets', choices=("iid", "dirichlet"))
    dirichlet_alpha: float = key(
        0.5,
        'partitioner = "dirichlet": concentration of the label skew (smaller = more skewed)',
    )
    users_per_node: int = key(1000, "cohort size of a simulated node (sanitas run)")
    seed: int = key(42, "data shuffling, splits, partitioning, user sampling, model init")

    def check(self) -> None:
        """Node cohorts of at least one user, a count of users >= 0 and a positive Dirichlet concentration."""
        super().check()
        at_least(self, 1, "users-per-node")
        at_least(self, 0, "num-users")
        if not (self.dirichlet_alpha > 0 and math.isfinite(self.dirichlet_alpha)):
            raise ConfigError(f"dirichlet-alpha must be > 0, got {self.dirichlet_alpha}")


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
class ReleaseConfig(Section):
    """What leaves a node in local mode: the input map M1, the level's mechanism, the label mechanism, the
    noise and the budget."""

    map_in: str = key(
        "random",
        'input map M1: "random" (public seed), "identity", "public" (trained on the public split, then '
        'frozen), "supervised" (affine: the public split\'s logistic-regression logits and a constant, '
        'fl.maps.input_map.supervised_map), "projection" (affine: centred on the public mean, the public '
        "logistic regression's logit directions, then the top principal directions of what they leave; "
        'fl.maps.input_map.projection_map) or "leaky" (trained through the noise: NOT local DP)',
        choices=("random", "identity", "public", "supervised", "projection", "leaky"),
    )
    map_dim: int = key(16, 'm\', output dimension of M1 (ignored by "identity"; "supervised": >= number of classes)')
    map_scale: float = key(0.0, 'map-in = "supervised": the constant coordinate (0 = chosen on a public hold-out)')
    map_seed: int = key(0, "public seed of the random projection (and of M1's initialisation)")
    public_epochs: int = key(10, 'map-in = "public": epochs of server-side training on the public split')
    allow_unaccounted_leakage: bool = key(False, 'must be true for map-in = "leaky"')
    word_mechanism: str = key(
        "none",
        'word-level rewrite before encoding ("cmp", "trlaplace", ...; needs sentence-mechanism = "none": '
        "the embedding of the rewritten text is released without further noise)",
    )
    word_epsilon: float = key(10.0, "per word")
    word_options: str = key("", "e.g. 'space = \"glove\", vocab_size = 100000, clip = 5.0'")
    word_quality_docs: int = key(500, "test documents rewritten by the driver for N_w / ROUGE-1 / BLEU (0 = skip)")
    word_support_words: int = key(10, "frequent words whose S_w is measured over 1000 draws each (0 = skip)")
    document_mechanism: str = key(
        "none",
        'sentence-level DP of whole documents: "deepcandidate" or "truncation" (needs sentence-mechanism '
        '= "none", map-in = "identity", a public split for the recoder/box)',
    )
    document_epsilon: float = key(10.0, "per sentence (SentDP); a whole document of k sentences costs more")
    document_options: str = key("", "extra document-mechanism parameters, TOML inline-table body")
    num_projections: int = key(0, "deepcandidate: p directions; 0 = tuned on public validation docs over 10..100")
    num_candidates: int = key(5000, "deepcandidate: public candidate documents (at most)")
    candidate_min_sentences: int = key(8, "deepcandidate: candidates have at least this many sentences")
    recoder_epochs: int = key(20, "deepcandidate: at most this many epochs of recoder training (best on validation)")
    recoder_clusters: int = key(50, "deepcandidate: k-means clusters the recoder learns to preserve")
    sentence_mechanism: str = key(
        "purkayastha",
        'sentence-level mechanism ("purkayastha", "planar_laplace", "privemb", "laplace", "gaussian", "none", ...)',
    )
    sentence_epsilon: float = key(
        10.0,
        "epsilon of the sentence mechanism (per release; metric mechanisms: per unit of their metric)",
    )
    sentence_options: str = key(
        "",
        "extra mechanism parameters, TOML inline-table body: 'out_dim = 64, variant = \"paper\"'",
    )
    label_mechanism: str = key("none", 'label mechanism: "none" (labels in the clear), "rr" or "rr_prior"')
    label_epsilon: float = key(1.0, "epsilon of the label mechanism (per release)")
    label_options: str = key("", "extra label-mechanism parameters, TOML inline-table body")
    label_prior: str = key(
        "model",
        'rr_prior: "model" (server model on the sanitized embedding) or "public"',
        choices=("model", "public"),
    )
    fresh_noise_per_round: bool = key(False, "True: re-draw every round (and pay again)")
    noise_seed: int = key(-1, "-1: secret per-node seed from the OS; >= 0: reproducible simulation")
    secure_rng: bool = key(
        False,
        "deployment: the noise (every mechanism, the label's too) and the users' sampling drawn from a ChaCha20 "
        "keystream keyed from the OS CSPRNG, not torch's Mersenne Twister; refuses noise-seed",
    )
    max_epsilon: float = key(0.0, "per-user lifetime budget (pure-LDP epsilon, embedding + label); 0 = none")
    accounting_delta: float = key(1e-06, "delta of the approximate-DP figures (PLD/advanced composition, shuffling)")
    clean_evaluation: bool = key(
        False,
        "on-device inference too: each node also scores the model on its test users' clean inputs and returns "
        "the confusion counts (a measurement outside the guarantee, like every evaluation count); false = "
        "server-side inference on sanitized test inputs only",
    )

    @property
    def level(self) -> str:
        """The level a run releases at (:func:`fl.config.values.level_of`): ``"word"`` or ``"document"``
        when that level's mechanism is set, else ``"sentence"``."""
        return level_of(self.flat())

    def mechanism_name(self, channel: str) -> str:
        """The registry name of the ``channel``'s mechanism (``<channel>-mechanism``: ``"sentence"``,
        ``"word"``, ``"document"`` or ``"label"``)."""
        return str(self.flat()[f"{channel}-mechanism"])

    def epsilon(self, channel: str) -> float:
        """The ``channel``'s per-unit epsilon (``<channel>-epsilon``)."""
        return float(self.flat()[f"{channel}-epsilon"])

    def mechanism(self, channel: str, input_dim: int | None = None, num_classes: int | None = None) -> Any:
        """The ``channel``'s mechanism (``"sentence"``, ``"label"``, ``"word"``, ...) as these keys name it
        (:func:`fl.config.values.make_mechanism`)."""
        return make_mechanism(self.flat(), channel, input_dim=input_dim, num_classes=num_classes)

    def check(self) -> None:
        """The input map's settings, the accounting's budget and delta, the word and document levels'
        parameters, one level at a time, every channel protected under a budget, secure-rng without a seed,
        and every channel's mechanism: a known name of the channel's level with a valid epsilon."""
        super().check()
        at_least(self, 1, "public-epochs")
        if self.map_in != "identity" and self.map_dim < 2:
            raise ConfigError(f"map-dim must be >= 2, got {self.map_dim}")
        if self.map_in == "leaky" and not self.allow_unaccounted_leakage:
            raise ConfigError(
                "map-in = 'leaky' sends unsanitized gradients of M1 to the server, so no local-DP guarantee "
                "holds; set allow-unaccounted-leakage = true to run it anyway"
            )
        if not (self.map_scale >= 0 and math.isfinite(self.map_scale)):
            raise ConfigError(f"map-scale must be >= 0 and finite (0 = chosen on public data), got {self.map_scale}")
        if not (self.max_epsilon >= 0 and math.isfinite(self.max_epsilon)):
            raise ConfigError(f"max-epsilon must be >= 0 and finite (0 = no budget), got {self.max_epsilon}")
        if not 0.0 < self.accounting_delta < 1.0:
            raise ConfigError(f"accounting-delta must lie in (0, 1), got {self.accounting_delta}")
        self._check_levels()
        if self.noise_seed < -1:
            raise ConfigError(
                f"noise-seed = {self.noise_seed}: use -1 (a secret seed per node from the OS) or a seed >= 0 "
                "(a reproducible simulation)"
            )
        if self.secure_rng and self.noise_seed >= 0:
            raise ConfigError(
                f"secure-rng = true keys every generator from the OS CSPRNG: remove noise-seed (got {self.noise_seed})"
            )
        self._check_mechanisms()

    def _check_levels(self) -> None:
        """The word and document levels' parameters; a word rewrite without a sentence mechanism on top; a
        budget needs every released channel protected."""
        at_least(self, 0, "word-quality-docs", "word-support-words")
        if self.word_mechanism != "none" and self.sentence_mechanism != "none":
            raise ConfigError(
                f"word-mechanism = {self.word_mechanism!r} releases the embedding of the rewritten text "
                f'without further noise: set sentence-mechanism = "none" (got {self.sentence_mechanism!r}; '
                "stacking a word- and a sentence-level mechanism is not supported)"
            )
        at_least(self, 2, "num-candidates", "candidate-min-sentences")
        at_least(self, 1, "recoder-epochs")
        at_least(self, 2, "recoder-clusters")
        if not 0 <= self.num_projections <= 10_000:
            raise ConfigError(f"num-projections must lie in [0, 10000] (0 = tune), got {self.num_projections}")
        if self.max_epsilon > 0:
            for channel in ("sentence", "label"):
                if channel == "sentence" and (self.word_mechanism != "none" or self.document_mechanism != "none"):
                    continue  # the embedding is covered by the word-level guarantee
                if getattr(self, f"{channel}_mechanism") == "none":
                    raise ConfigError(
                        f"max-epsilon needs every released channel protected, but {channel}-mechanism is 'none' "
                        "(a release in the clear has no finite epsilon)"
                    )

    def _check_mechanisms(self) -> None:
        """Every channel's mechanism: a known name of the channel's level with a valid epsilon (their
        constructors check)."""
        import mechanisms  # local import: fl may import mechanisms, never the reverse

        keys = self.flat()
        for channel in ("sentence", "label", "word", "document"):
            name = keys[f"{channel}-mechanism"]
            if channel == "document" and name != "none":
                # Document mechanisms are built from public data (candidates, box) at run time: check
                # the name, the level, epsilon and the options' syntax here.
                try:
                    cls = mechanisms.mechanism_class(name)
                    mechanisms.check_epsilon(self.document_epsilon, "document-epsilon")
                except ValueError as err:
                    raise ConfigError(f"document-mechanism {name!r}: {err}") from None
                mechanism_options(self.document_options, "document-options")
                if cls.level != "document":
                    raise ConfigError(f"document-mechanism {name!r} is a {cls.level}-level mechanism")
                continue
            try:
                if name != "none":  # the key itself in the message: "sentence-epsilon must be > 0 ..."
                    mechanisms.check_epsilon(keys[f"{channel}-epsilon"], f"{channel}-epsilon")
                mech = make_mechanism(keys, channel, input_dim=None if self.map_in == "identity" else self.map_dim)
            except ValueError as err:
                raise ConfigError(f"{channel}-mechanism {name!r}: {err}") from None
            if mech.level != channel:
                raise ConfigError(f"{channel}-mechanism {name!r} is a {mech.level}-level mechanism")


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
    central_tuning_part: str = key(
        "lora",
        'central-train = "encoder": "lora" adapters or the "top" tuning-layers layers',
        choices=("top", "lora"),
    )

    def check(self) -> None:
        """Epochs >= 1, central-delta in [0, 1), and the noise, clipping, cohort and step sizes > 0 and finite."""
        super().check()
        at_least(self, 1, "local-epochs")
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

    strategy: str = key("", '"" = sanitas ReleaseTraining, or "package.module:Class"')
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
        round timeout, and ``strategy`` of the form ``package.module:Class``."""
        super().check()
        at_least(self, 1, "num-server-rounds", "server-epochs", "batch-size", "hidden-dim", "cohorts")
        if self.cohort_map_dim < 0:
            raise ConfigError(f"cohort-map-dim must be >= 0 (0 = map-dim), got {self.cohort_map_dim}")
        if not 0.0 < self.fraction_train <= 1.0:
            raise ConfigError(f"fraction-train must lie in (0, 1], got {self.fraction_train}")
        if self.learning_rate <= 0:
            raise ConfigError(f"learning-rate must be > 0, got {self.learning_rate}")
        if not (self.node_timeout > 0 and math.isfinite(self.node_timeout)):
            raise ConfigError(f"node-timeout must be > 0 seconds and finite, got {self.node_timeout}")
        if not DEVICE_FORM.fullmatch(self.device):
            raise ConfigError(f'device = {self.device!r}: use "auto", "cpu", "mps", "cuda" or "cuda:N"')
        if self.strategy and not STRATEGY_FORM.fullmatch(self.strategy):
            raise ConfigError(f"strategy must look like 'package.module:Class' (or \"\"), got {self.strategy!r}")


@dataclass(frozen=True)
class SimulationConfig(Section):
    """How ``sanitas run`` simulates the federation: the backend, Ray resources and fault injection."""

    backend: str = key(
        "auto",
        '"local" = in this process; "ray" = Flower\'s Ray backend; "auto" = ray when ray-address is set',
        choices=("auto", "local", "ray"),
    )
    node_cpus: float = key(1.0, "CPUs Ray reserves for each simulated node (fractions allowed)")
    node_gpus: float = key(-1.0, "GPUs per simulated node; -1 = auto: 0.25 when the run uses CUDA, else 0")
    ray_address: str = key("", '"" = start a local Ray instance; "auto" or "host:port" = attach to a running cluster')
    fault_rate: float = key(0.0, "fault injection: fraction of the sampled nodes that fail each round (seeded by seed)")
    fault_kind: str = key(
        "raise",
        'how an injected fault fails: "raise", "timeout" (sleeps past node-timeout), "drop-reply"',
        choices=("raise", "timeout", "drop-reply"),
    )

    def check(self) -> None:
        """The Ray resources of a simulated node and the cluster address (Ray counts resources in 0.0001
        units), the fault rate in [0, 1), and no cluster for the in-process backend."""
        super().check()
        cpus, gpus = self.node_cpus, self.node_gpus
        if not 0.0 <= self.fault_rate < 1.0:
            raise ConfigError(
                f"fault-rate (fraction of sampled nodes failing each round) must lie in [0, 1), got {self.fault_rate}"
            )
        if not (cpus >= 0.0001 and math.isfinite(cpus)):
            raise ConfigError(
                f"node-cpus (CPUs Ray reserves per simulated node) must be >= 0.0001 and finite, got {cpus}"
            )
        if gpus != -1.0 and not (gpus == 0.0 or (gpus >= 0.0001 and math.isfinite(gpus))):
            raise ConfigError(
                "node-gpus must be -1 (auto: 0.25 when the run uses CUDA, else 0), 0, or a GPU share >= 0.0001, "
                f"got {gpus}"
            )
        address = self.ray_address
        host, colon, port = address.rpartition(":")
        if address not in ("", "auto") and not (
            colon
            and host
            and "/" not in address
            and not any(c.isspace() for c in address)
            and port.isdigit()
            and 0 < int(port) < 65536
        ):
            raise ConfigError(
                'ray-address must be "" (start a local Ray instance), "auto" (the cluster $RAY_ADDRESS names, else '
                'the last one `ray start` started on this machine) or the head\'s "host:port" (e.g. '
                f'"10.0.0.5:6379"), got {address!r}'
            )
        if self.backend == "local" and address:
            raise ConfigError(
                f"backend = 'local' runs in this process and cannot attach to the Ray cluster ray-address = "
                f'{address!r} names: set backend = "ray" (or "auto")'
            )


@dataclass(frozen=True)
class OutputConfig(Section):
    """Where a run's results folder goes and what its plot shows."""

    out_dir: str = key("results", "a new folder <out-dir>/<run-name> per run")
    run_name: str = key("", '"" = <dataset>-<mechanism>-<timestamp>')
    reference_accuracy: float = key(0.0, "a measured non-private accuracy drawn on the run's plot (0 = none)")

    def check(self) -> None:
        """The reference accuracy drawn on the plot is a rate in [0, 1] (0 = none)."""
        super().check()
        if not 0.0 <= self.reference_accuracy <= 1.0:
            raise ConfigError(f"reference-accuracy must lie in [0, 1] (0 = none), got {self.reference_accuracy}")


#: Section name -> its dataclass, in the order of the documentation and of ``DEFAULTS``.
SECTION_CLASSES: dict[str, type[Section]] = {
    "data": DataConfig,
    "users": UsersConfig,
    "encoder": EncoderConfig,
    "release": ReleaseConfig,
    "central": CentralConfig,
    "server": ServerConfig,
    "simulation": SimulationConfig,
    "output": OutputConfig,
}


def _declared() -> list[tuple[str, str, Any, str, tuple[str, ...] | None]]:
    """(section, key, default, doc, choices) of every key, in declaration order."""
    out = []
    for section, cls in SECTION_CLASSES.items():
        for f in fields(cls):
            if f.default is MISSING or not f.metadata.get("doc"):
                raise TypeError(f"{cls.__name__}.{f.name}: declare it with key(default, doc)")
            out.append((section, kebab(f.name), f.default, f.metadata["doc"], f.metadata["choices"]))
    return out


DECLARED = _declared()
#: Every key and its default (the flat form: ``sanitas run`` TOML files and Flower's run config).
DEFAULTS: dict[str, Any] = {name: default for _, name, default, _, _ in DECLARED}
#: Section name -> its keys; every key is in exactly one section.
SECTIONS: dict[str, tuple[str, ...]] = {
    section: tuple(name for s, name, _, _, _ in DECLARED if s == section) for section in SECTION_CLASSES
}
#: The keys that take one of a fixed set of values.
CHOICES: dict[str, tuple[str, ...]] = {name: choices for _, name, _, _, choices in DECLARED if choices}
#: One line of documentation per key.
DOCS: dict[str, str] = {name: doc for _, name, _, doc, _ in DECLARED}
