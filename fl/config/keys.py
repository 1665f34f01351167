"""The run-config keys, declared once: name, default, section, doc and allowed values.

Each section is a frozen dataclass; each field is one key (``sentence_epsilon`` is the key
``sentence-epsilon``) declared with :func:`key`: its default, one line of documentation and, for the
keys that take a fixed set of values, ``choices``. Everything else is generated from these classes:
``DEFAULTS``, ``SECTIONS``, ``CHOICES`` and ``DOCS`` below, the ``[tool.flwr.app.config]`` block of
``pyproject.toml`` and the tables of ``docs/configuration.md`` (:mod:`fl.config.reference`; tests check
both files against it). A new key is one field here plus its check in
:func:`fl.config.run_config.validate`.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any


def key(default: Any, doc: str, choices: tuple[str, ...] | None = None) -> Any:
    """One run-config key: its default, its documentation, and its allowed values (if a fixed set)."""
    return field(default=default, metadata={"doc": doc, "choices": choices})


@dataclass(frozen=True)
class DataConfig:
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
    public_size: int = key(0, "public-dataset: seeded subsample of its documents (0 = all)")
    public_sentences: bool = key(False, "public-dataset: split its documents into sentences, each keeping its label")
    public_labels: str = key(
        "",
        'public-dataset: its class names -> the run\'s, "neg = negative, pos = positive" ("" = equal names or '
        "unambiguous prefixes)",
    )
    empty_documents: str = key("error", '"error" or "drop" (dropped documents are counted)', choices=("error", "drop"))
    short_documents: str = key(
        "drop",
        'document level: documents with < 2 sentences are "drop"ped (counted) or an "error"',
        choices=("drop", "error"),
    )
    synthetic_dim: int = key(384, 'dataset = "synthetic": embedding dimension d (no encoder)')
    synthetic_test_users: int = key(2000, 'dataset = "synthetic": test users (one document each)')


@dataclass(frozen=True)
class UsersConfig:
    """Users and nodes: how documents become users and users are partitioned over simulated nodes."""

    num_users: int = key(0, "training users (0 = one user per training document)")
    partitioner: str = key("iid", '"iid" or "dirichlet" (label skew), via flwr-datasets', choices=("iid", "dirichlet"))
    dirichlet_alpha: float = key(
        0.5,
        'partitioner = "dirichlet": concentration of the label skew (smaller = more skewed)',
    )
    users_per_node: int = key(1000, "cohort size of a simulated node (sanitas run)")
    seed: int = key(42, "data shuffling, splits, partitioning, user sampling, model init")


@dataclass(frozen=True)
class EncoderConfig:
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


@dataclass(frozen=True)
class ReleaseConfig:
    """What leaves a node in local mode: the input map M1, the level's mechanism, the label mechanism, the
    noise and the budget."""

    map_in: str = key(
        "random",
        'input map M1: "random" (public seed), "identity", "public" (trained on the public split, then '
        'frozen), "supervised" (affine: the public split\'s logistic-regression logits and a constant, '
        'fl.maps.input_map.supervised_map) or "leaky" (trained through the noise: NOT local DP)',
        choices=("random", "identity", "public", "supervised", "leaky"),
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
    secure_rng: bool = key(False, "deployment: every generator seeded from the OS CSPRNG (secrets); refuses noise-seed")
    max_epsilon: float = key(0.0, "per-user lifetime budget (pure-LDP epsilon, embedding + label); 0 = none")
    accounting_delta: float = key(1e-06, "delta of the approximate-DP figures (PLD/advanced composition, shuffling)")
    clean_evaluation: bool = key(
        True,
        "also score the model on unsanitized test embeddings (a diagnostic from raw data, like every "
        "evaluation count not covered by a DP guarantee); false = sanitized evaluation only",
    )


@dataclass(frozen=True)
class CentralConfig:
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
    central_tuning_part: str = key(
        "lora",
        'central-train = "encoder": "lora" adapters or the "top" tuning-layers layers',
        choices=("top", "lora"),
    )


@dataclass(frozen=True)
class ServerConfig:
    """The server's strategy and the training of M2 + classifier."""

    strategy: str = key("", '"" = sanitas ReleaseTraining, or "package.module:Class"')
    num_server_rounds: int = key(3, "rounds of the federation")
    fraction_train: float = key(1.0, "fraction of training users sampled each round")
    server_epochs: int = key(10, "epochs over all releases received so far, per round")
    batch_size: int = key(128, "server training batch size (releases per step)")
    learning_rate: float = key(0.001, "Adam step size of the server's M2 + classifier")
    hidden_dim: int = key(256, "hidden width of M2")
    device: str = key("auto", '"auto", "cpu", "cuda", "cuda:1", ...')
    node_timeout: float = key(3600.0, "seconds the server waits for a round's replies; later replies count as lost")


@dataclass(frozen=True)
class SimulationConfig:
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


@dataclass(frozen=True)
class OutputConfig:
    """Where a run's results folder goes and what its plot shows."""

    out_dir: str = key("results", "a new folder <out-dir>/<run-name> per run")
    run_name: str = key("", '"" = <dataset>-<mechanism>-<timestamp>')
    reference_accuracy: float = key(0.0, "a measured non-private accuracy drawn on the run's plot (0 = none)")


#: Section name -> its dataclass, in the order of the documentation and of ``DEFAULTS``.
SECTION_CLASSES: dict[str, type] = {
    "data": DataConfig,
    "users": UsersConfig,
    "encoder": EncoderConfig,
    "release": ReleaseConfig,
    "central": CentralConfig,
    "server": ServerConfig,
    "simulation": SimulationConfig,
    "output": OutputConfig,
}


def kebab(attribute: str) -> str:
    """The run-config key of a section field (``sentence_epsilon`` -> ``sentence-epsilon``)."""
    return attribute.replace("_", "-")


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
