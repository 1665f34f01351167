"""The data and users sections' keys: which documents, which public documents, how they become users.

Declared as :mod:`fl.config.keys` describes: one field per key (default, doc, choices) and the
section's own checks in ``check``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from fl.config.errors import ConfigError
from fl.config.section import Section, at_least, attribute, declared_default, key
from fl.config.values import (
    is_user_file,
    label_name_list,
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
        'document level: documents with < 2 sentences are "drop"ped (counted) or an "error"; "drop-every-level" drops '
        "them at every level (sanitas compare sets it at the document level: its central and noise-free runs see the "
        "same users)",
        choices=("drop", "error", "drop-every-level"),
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
        if self.public_dataset == "synthetic":
            raise ConfigError(
                'public-dataset = "synthetic" has no text to take public documents from: name a text dataset '
                "(sst2, agnews, ...) or your own file"
            )
        if self.dataset == "synthetic" and self.public_dataset:
            raise ConfigError(
                f'public-dataset = {self.public_dataset!r} gives public texts, but dataset = "synthetic" has no text '
                "to embed beside them: use a text dataset or remove public-dataset"
            )
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
