"""The release section's keys: the mechanisms, their budgets and the noise (what leaves a node).

Declared as :mod:`fl.config.keys` describes: one field per key (default, doc, choices) and the
section's own checks in ``check``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fl.config.errors import ConfigError
from fl.config.section import Section, at_least, key
from fl.config.values import (
    level_of,
    make_mechanism,
    mechanism_options,
)
from mechanisms.suggest import did_you_mean


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
        ``"word"``, ``"document"`` or ``"label"``); a user's class as ``<file stem or module>.<Class>``
        (``my_noise.MyNoise``): it names run folders and plot titles, where a path would make folders."""
        from mechanisms import user_code

        name = str(self.flat()[f"{channel}-mechanism"])
        if not user_code.is_spec(name):
            return name
        where, _, cls = name.rpartition(":")
        return f"{Path(where).stem if user_code.is_file_spec(name) else where}.{cls}"

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
        """Every channel's mechanism: a known name of the channel's level, or a user's class of that level
        (``"file.py:Class"``, ``"package.module:Class"``: imported and checked here, once per process), with a
        valid epsilon (their constructors check)."""
        import mechanisms  # local import: fl may import mechanisms, never the reverse
        from mechanisms import user_code
        from mechanisms.registry import shown

        keys = self.flat()
        for channel in ("sentence", "label", "word", "document"):
            name = keys[f"{channel}-mechanism"]
            label = shown(name)  # a file spec by its file's name: the config made its path absolute
            if user_code.is_spec(name):
                try:
                    mechanisms.mechanism_class(name, level=channel, key=f"{channel}-mechanism")
                except ValueError as err:
                    raise ConfigError(str(err)) from None
                if channel == "document":  # fl.levels.document builds its two mechanisms from public documents
                    raise ConfigError(
                        f"document-mechanism = {label!r}: the document level builds deepcandidate or truncation "
                        "from public documents and runs no user's class; use it at the sentence or word level"
                    )
            elif name != "none" and (":" in name or name.endswith(".py")):
                raise ConfigError(
                    f"{channel}-mechanism = {name!r}: write 'path/to/file.py:Class' or 'package.module:Class' "
                    "for a mechanism of your own"
                )
            elif name != "none" and name not in mechanisms.names():
                level = [n for n in mechanisms.names() if mechanisms.mechanism_class(n).level == channel]
                raise ConfigError(
                    f"{channel}-mechanism: unknown mechanism {name!r}{did_you_mean(name, level)} ({channel} level: "
                    f"{', '.join([*level, 'none'])})"
                )
            if channel == "document" and name != "none":
                # Document mechanisms are built from public data (candidates, box) at run time: check
                # the name, the level, epsilon and the options' syntax here.
                try:
                    cls = mechanisms.mechanism_class(name)
                    mechanisms.check_epsilon(self.document_epsilon, "document-epsilon")
                except ValueError as err:
                    raise ConfigError(f"document-mechanism {label!r}: {err}") from None
                mechanism_options(self.document_options, "document-options")
                if cls.level != "document":
                    raise ConfigError(f"document-mechanism {label!r} is a {cls.level}-level mechanism")
                continue
            try:
                if name != "none":  # the key itself in the message: "sentence-epsilon must be > 0 ..."
                    mechanisms.check_epsilon(keys[f"{channel}-epsilon"], f"{channel}-epsilon")
                mech = make_mechanism(keys, channel, input_dim=None if self.map_in == "identity" else self.map_dim)
            except ValueError as err:
                raise ConfigError(f"{channel}-mechanism {label!r}: {err}") from None
            if mech.level != channel:
                raise ConfigError(f"{channel}-mechanism {label!r} is a {mech.level}-level mechanism")
