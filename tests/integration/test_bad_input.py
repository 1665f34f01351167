"""Bad input, table-driven: every row is refused before anything runs or is written.

One table of bad inputs fed through the ``sanitas`` CLI (a TOML run config, ``--set``
arguments, data files), the Python API (``simulations.run``, ``simulations.runtime.api.resolve_config``)
and the mechanisms' public release API (``mechanisms.create(...).sanitize(...)``). A CLI row
must exit with code 2 and print exactly one line on stderr, ``sanitas: error: ...``, naming the
key or file and the problem, with no traceback and no results folder left behind; an API row
raises the stated exception with a one-line message naming them.

CLI rows run :func:`simulations.cli.main` in this process (fd-level capture of stdout and
stderr, warnings recorded as they would be printed), except the rows marked ``process``,
which run ``python -m simulations.cli`` as a user would: one per phase of the checks (arguments,
TOML, config validation, data files), including the data-file rows whose libraries log or warn
on their own. Flower's ``run_simulation`` is replaced by a function that fails the test: every
row must be refused before Ray or the encoder starts.
"""

from __future__ import annotations

import gzip
import math
import os
import subprocess
import sys
import tomllib
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fl.config import ConfigError
from tests.conftest import REPO
from tests.support.cli import refuse_writes_in


@dataclass(frozen=True)
class Bad:
    """One bad input: how it is fed and what the one-line answer must contain.

    ``{dir}`` in ``toml``, ``args``, ``expect`` and file names stands for the row's own folder.
    """

    expect: tuple[str, ...]  # fragments of the message: the key or file, and the problem
    toml: str | None = ""  # CLI: the run-config file (None: no file is written)
    args: tuple[str, ...] = ()  # CLI: arguments after `run CONFIG --out OUT`
    files: Mapping[str, str | bytes] = field(default_factory=dict)  # written under {dir} first
    api: Callable[[Path], object] | None = None  # Python API call (instead of the CLI), given {dir}
    raises: type[Exception] = ValueError  # API rows: the exception's exact type
    process: bool = False  # CLI rows: a real `python -m simulations.cli` subprocess


def _lines(rows: list[tuple[str, object]]) -> str:
    return "".join(f"{text},{label}\n" for text, label in rows)


def _csv(extra: str = "", header: str = "text,label", n: int = 20) -> str:
    """A small two-class CSV (``document number i``, label i % 2) and ``extra`` rows after it."""
    return f"{header}\n" + _lines([(f"document number {i}", i % 2) for i in range(n)]) + extra


def _jsonl(extra: str = "", n: int = 20) -> str:
    """A small two-class JSON Lines file and ``extra`` lines after it."""
    return "".join(f'{{"text": "document number {i}", "label": {i % 2}}}\n' for i in range(n)) + extra


def _gz(text: str) -> bytes:
    return gzip.compress(text.encode(), mtime=0)


def _user_file(name: str, content: str | bytes, extra_toml: str = "") -> dict[str, object]:
    """A row whose dataset is the data file ``{dir}/name``."""
    return {"toml": f'dataset = "{{dir}}/{name}"\n{extra_toml}', "files": {name: content}}


def _short_docs() -> str:
    """Documents of two sentences, every fifth of one sentence (for the document level)."""
    rows = [
        (f"Document {i} is short." if i % 5 == 0 else f"Document {i} starts here. It ends here.", i % 2)
        for i in range(60)
    ]
    return "text,label\n" + _lines(rows)


def _api_run(config: Mapping[str, object], **overrides: object) -> Callable[[Path], object]:
    """``simulations.run(config with {dir} filled in, out={dir}/out, **overrides)``."""

    def call(folder: Path) -> object:
        import simulations

        filled = {k: v.replace("{dir}", str(folder)) if isinstance(v, str) else v for k, v in config.items()}
        return simulations.run(filled, out=folder / "out", **overrides)

    return call


def _resolve(config: Mapping[str, object]) -> Callable[[Path], object]:
    def call(folder: Path) -> object:
        from simulations.runtime.api import resolve_config

        return resolve_config(config)

    return call


def _sanitize(name: str, x: Callable[[], object], **params: object) -> Callable[[Path], object]:
    """``mechanisms.create(name, **params).sanitize(x())`` (the release API of a sentence or document mechanism)."""

    def call(folder: Path) -> object:
        import mechanisms

        return mechanisms.create(name, **params).sanitize(x())

    return call


def _rows_with(value: float, shape: tuple[int, int] = (4, 8)) -> Callable[[], object]:
    def make() -> object:
        import torch

        x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
        x[1, 3] = value
        return x

    return make


def _truncation(docs: Callable[[], list]) -> Callable[[Path], object]:
    def call(folder: Path) -> object:
        import torch

        import mechanisms

        return mechanisms.Truncation(1.0, torch.zeros(4), torch.ones(4)).sanitize(docs())

    return call


def _docs(*shapes: tuple[int, int]) -> Callable[[], list]:
    def make() -> list:
        import torch

        gen = torch.Generator().manual_seed(0)
        return [torch.rand(*shape, generator=gen) for shape in shapes]

    return make


def _labels_out_of_range(folder: Path) -> object:
    import torch

    import mechanisms

    return mechanisms.create("rr", epsilon=1.0).sanitize(torch.tensor([0, 1, 3]), num_classes=2)


def _create(name: str, **params: object) -> Callable[[Path], object]:
    def call(folder: Path) -> object:
        import mechanisms

        return mechanisms.create(name, **params)

    return call


def _mechanism_class(name: str) -> Callable[[Path], object]:
    def call(folder: Path) -> object:
        import mechanisms

        return mechanisms.mechanism_class(name)

    return call


TWO_LABELS = '{"0": "negative", "1": "positive"}'
#: The class-means recipe over two cohorts (its out-dir is the row's --out).
COHORTS_PATH = REPO / "simulations" / "experiments" / "sst2_public_cohorts.toml"
COHORTS_TOML = COHORTS_PATH.read_text()
COHORTS = {**tomllib.loads(COHORTS_TOML), "cohort-map-dim": 400}
DOC_LEVEL = (
    'document-mechanism = "deepcandidate"\nshort-documents = "error"\nsentence-mechanism = "none"\n'
    'map-in = "identity"\npublic-fraction = 0.2\n'
)
ROWS = [
    # ---------------------------------------------------------------- public data and the central delta
    pytest.param(
        Bad(("public-dataset", "unknown dataset 'nosuch'"), 'public-dataset = "nosuch"\n'), id="public-dataset-unknown"
    ),
    pytest.param(
        Bad(("public-labels", "'neg'", "not of the form"), 'public-dataset = "imdb"\npublic-labels = "neg"\n'),
        id="public-labels-malformed",
    ),
    pytest.param(
        Bad(
            ("public-dataset", "public-fraction", "both name public documents"),
            'public-dataset = "imdb"\npublic-fraction = 0.2\n',
        ),
        id="public-twice",
    ),
    pytest.param(Bad(("central-delta", "got -0.1"), "central-delta = -0.1\n"), id="central-delta-negative"),
    # ---------------------------------------------------------------- the public-only line and the class-means recipe
    pytest.param(
        Bad(
            ("map-dim = 64", "30 public documents span at most 31 dimensions"),
            'public-size = 20\nmap-in = "projection"\nmap-dim = 64\n',
        ),
        id="projection-wider-than-the-public-data",
    ),
    pytest.param(
        Bad(
            ("server-model", "class-means", "unbiased", "sentence-mechanism = 'purkayastha'"),
            'public-size = 200\nmap-in = "projection"\nserver-model = "class-means"\n',
        ),
        id="class-means-needs-unbiased-releases",
    ),
    pytest.param(
        Bad(("central-start", "'pub'", "did you mean 'public'"), 'central-start = "pub"\n'), id="central-start-typo"
    ),
    pytest.param(
        Bad(
            ("sentence-mechanism 'none' takes no sentence-options",),
            'sentence-mechanism = "none"\nsentence-options = "unbiased = true"\n',
        ),
        id="none-with-options",
    ),
    # ---------------------------------------------------------------- config keys (TOML, --set)
    pytest.param(
        Bad(("sentence-epsilon", "must be > 0 and finite", "got 0.0"), "sentence-epsilon = 0\n"), id="epsilon-zero"
    ),
    pytest.param(
        Bad(
            ("label-epsilon", "must be > 0 and finite", "got -2.0"),
            "",
            ('--set=label-mechanism="rr"', "--set", "label-epsilon=-2"),
        ),
        id="epsilon-negative",
    ),
    pytest.param(
        Bad(("sentence-epsilon", "must be > 0 and finite", "got nan"), "sentence-epsilon = nan\n", process=True),
        id="epsilon-nan",
    ),
    pytest.param(
        Bad(("sentence-epsilon", "must be > 0 and finite", "got inf"), "sentence-epsilon = inf\n"), id="epsilon-inf"
    ),
    pytest.param(
        Bad(("sentence-epsilon", "must be a number", "'ten'"), "", ("--set", "sentence-epsilon=ten")),
        id="epsilon-string",
    ),
    pytest.param(
        Bad(
            ("sentence-mechanism: unknown mechanism 'gauss'", "did you mean 'gaussian'"),
            'sentence-mechanism = "gauss"\n',
        ),
        id="sentence-mechanism-unknown",
    ),
    pytest.param(
        Bad(("unknown dataset 'sst3'", "use 20newsgroups", "sst2"), 'dataset = "sst3"\n'), id="dataset-unknown"
    ),
    pytest.param(Bad(("partitioner", "must be one of", "'zipf'"), 'partitioner = "zipf"\n'), id="partitioner-unknown"),
    pytest.param(
        Bad(("strategy", "package.module:Class", "'MyStrategy'"), 'strategy = "MyStrategy"\n'), id="strategy-malformed"
    ),
    pytest.param(
        Bad(("strategy", "nosuch_module"), **_user_file("data.csv", _csv(), 'strategy = "nosuch_module:MyStrategy"\n')),
        id="strategy-module-missing",
    ),
    pytest.param(Bad(("unknown config key 'colour'",), 'colour = "red"\n'), id="config-key-unknown"),
    pytest.param(
        Bad(("unknown config key 'sentence-epsilom'",), "", ("--set", "sentence-epsilom=5")),
        id="config-key-unknown-set",
    ),
    pytest.param(
        Bad(
            ("argument --set: 'sentence-epsilon': expects KEY=VALUE", "'sentence-epsilon'"),
            "",
            ("--set", "sentence-epsilon"),
            process=True,
        ),
        id="set-without-equals",
    ),
    pytest.param(
        Bad(("{dir}/run.toml", "is not valid TOML", "line 1"), "sentence-epsilon = = 3\n", process=True), id="toml-bad"
    ),
    pytest.param(
        Bad(("{dir}/run.toml", "must be flat", "['release']"), "[release]\nsentence-epsilon = 3\n"), id="toml-table"
    ),
    pytest.param(
        Bad(
            ("config file '{dir}/run.toml': key 'dataset' is given twice (lines 1 and 3): keep one",),
            'dataset = "sst2"\nsentence-epsilon = 3\n"dataset" = "imdb"\n',
            process=True,
        ),
        id="toml-key-twice",
    ),
    pytest.param(  # a byte-order mark (Windows editors) is read past: the line is about the value, not the file
        Bad(
            ("sentence-epsilon", "must be > 0 and finite", "got 0.0"),
            None,
            files={"run.toml": b"\xef\xbb\xbf" + b"sentence-epsilon = 0\n"},
        ),
        id="toml-byte-order-mark",
    ),
    pytest.param(
        Bad(
            ("config file '{dir}/run.toml' is not UTF-8 text", "byte 0xe9 at line 2", "save it as UTF-8"),
            None,
            files={"run.toml": b'sentence-epsilon = 3\nrun-name = "caf\xe9"\n'},
        ),
        id="toml-not-utf8",
    ),
    pytest.param(Bad(("config file", "{dir}/run.toml", "not found"), None), id="config-file-missing"),
    pytest.param(Bad(("map-dim", "must be >= 2", "got 0"), "map-dim = 0\n"), id="map-dim-zero"),
    pytest.param(
        Bad(("map-dim", "<= the embedding dimension d = 384", "got 1000"), "map-dim = 1000\n"), id="map-dim-above-d"
    ),
    pytest.param(
        Bad(
            ("cohort-map-dim = 512", "d = 384 of encoder 'all-MiniLM-L6-v2'", "set cohort-map-dim <= 384"),
            COHORTS_TOML,
            ("--set", "cohort-map-dim=512"),
            process=True,
        ),
        id="cohort-map-dim-above-d",
    ),
    pytest.param(
        Bad(
            ("cohort-map-dim = 300", "public documents span at most", "lower cohort-map-dim"),
            COHORTS_TOML,
            ("--set", "cohort-map-dim=300"),
        ),
        id="cohort-map-dim-above-the-public-span",
    ),
    pytest.param(
        Bad(("cohort-map-dim must be 0 (= map-dim) or >= 2", "got 1"), COHORTS_TOML, ("--set", "cohort-map-dim=1")),
        id="cohort-map-dim-one",
    ),
    pytest.param(
        Bad(
            ("map-dim", "<= synthetic-dim", "map-dim = 16 > 8"),
            'dataset = "synthetic"\nnum-users = 10\nsynthetic-dim = 8\nmap-dim = 16\n',
        ),
        id="map-dim-above-synthetic-d",
    ),
    pytest.param(Bad(("num-server-rounds", "must be >= 1", "got 0"), "num-server-rounds = 0\n"), id="rounds-zero"),
    pytest.param(Bad(("num-users", "must be >= 0", "got -5"), "num-users = -5\n"), id="users-negative"),
    pytest.param(
        Bad(("synthetic", "needs num-users > 0", "got 0"), 'dataset = "synthetic"\nnum-users = 0\n'),
        id="synthetic-users-zero",
    ),
    pytest.param(Bad(("users-per-node", "must be >= 1", "got 0"), "users-per-node = 0\n"), id="node-size-zero"),
    pytest.param(Bad(("fraction-train", "(0, 1]", "got 0.0"), "fraction-train = 0.0\n"), id="fraction-train-zero"),
    pytest.param(
        Bad(("fraction-train", "(0, 1]", "got 1.5"), "", ("--set", "fraction-train=1.5")), id="fraction-train-above-one"
    ),
    pytest.param(Bad(("test-fraction", "(0, 1)", "got 1.0"), "test-fraction = 1.0\n"), id="test-fraction-one"),
    pytest.param(
        Bad(("public-fraction", "[0, 1)", "got -0.1"), "public-fraction = -0.1\n"), id="public-fraction-negative"
    ),
    pytest.param(Bad(("fault-rate", "[0, 1)", "got 1.0"), "fault-rate = 1.0\n"), id="fault-rate-one"),
    pytest.param(Bad(("max-epsilon", "must be >= 0", "got -1.0"), "max-epsilon = -1.0\n"), id="budget-negative"),
    pytest.param(
        Bad(("encoder '{dir}/no-encoder'", "no such folder"), 'encoder = "{dir}/no-encoder"\n', process=True),
        id="encoder-path-missing",
    ),
    pytest.param(
        Bad(("data-dir '{dir}/no-data'", "does not exist"), 'data-dir = "{dir}/no-data"\n'), id="data-dir-missing"
    ),
    pytest.param(
        Bad(("sentence-options = 'out_dim = '", "is not TOML values"), "sentence-options = 'out_dim = '\n"),
        id="options-not-toml",
    ),
    pytest.param(
        Bad(
            ("sentence-options: unbiased = 'no'", "must be true or false"),
            'sentence-mechanism = "privunit"\nsentence-options = \'unbiased = "no"\'\n',
        ),
        id="boolean-option-as-text",
    ),
    pytest.param(Bad(("noise-seed = -7", "use -1"), "noise-seed = -7\n"), id="noise-seed-below-minus-one"),
    pytest.param(Bad(("device = 'tpu'", '"cuda:N"'), 'device = "tpu"\n'), id="device-unknown"),
    pytest.param(
        Bad(
            ('server-model = "class-means" needs unbiased releases', "(got sentence-mechanism = 'privunit')"),
            'server-model = "class-means"\npublic-size = 200\nmap-in = "projection"\nmap-dim = 8\n'
            'sentence-mechanism = "privunit"\n',
        ),
        id="class-means-biased-releases",
    ),
    pytest.param(
        Bad(('central-start = "public"', "public-size"), 'mode = "central"\ncentral-start = "public"\n'),
        id="central-public-start-without-public-data",
    ),
    pytest.param(
        Bad(
            ("secure-rng = true with central-unit = 'node'", "numpy", "central-unit = 'user'"),
            'mode = "central"\ncentral-unit = "node"\nsecure-rng = true\n',
        ),
        id="secure-rng-node-level",
    ),
    pytest.param(
        Bad(('public-dataset = "synthetic"', "no text"), 'public-dataset = "synthetic"\npublic-sentences = true\n'),
        id="public-dataset-synthetic",
    ),
    pytest.param(
        Bad(("map-in = 'projection'", "public-size > 0"), 'public-size = 0\nmap-in = "projection"\n'),
        id="public-size-zero-names-public-size",
    ),
    pytest.param(
        Bad(
            ("public-size = 1", "each of the 2 classes", "public-size >= 2"),
            **_user_file("data.csv", _csv(), 'public-size = 1\npublic-split = "row"\n'),
        ),
        id="public-size-below-the-classes",
    ),
    pytest.param(
        Bad(
            ("public-size = 3", "no document of class '2'"),
            toml='dataset = "{dir}/data.csv"\ntest-file = "{dir}/test.csv"\npublic-size = 3\n',
            files={"data.csv": _csv(), "test.csv": "text,label\na,0\nb,1\nc,2\n"},
        ),
        id="public-split-class-without-training-text",
    ),
    # ------------------------------------------------------------------------------ data files
    pytest.param(Bad(("data file '{dir}/none.csv'", "not found"), 'dataset = "{dir}/none.csv"\n'), id="csv-missing"),
    pytest.param(Bad(("data file '{dir}/data.csv'", "is empty"), **_user_file("data.csv", "")), id="csv-empty"),
    pytest.param(
        Bad(("data file '{dir}/data.csv'", "has no data rows"), **_user_file("data.csv", "text,label\n")),
        id="csv-header-only",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/data.csv'", "every document has label '1'", "at least 2 classes"),
            **_user_file("data.csv", "text,label\n" + _lines([(f"document {i}", 1) for i in range(20)])),
        ),
        id="csv-one-class",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/data.csv'", "label-column 'label'", "NaN", "row 20"),
            **_user_file("data.csv", _csv("a document,\n")),
        ),
        id="csv-nan-label",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/data.csv'", "could not be read as CSV", "Expected 2 fields in line 22"),
            process=True,
            **_user_file("data.csv", _csv("a,b,c,d,e\n")),
        ),
        id="csv-corrupt",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/data.csv'", "is not UTF-8", "0xe9"),
            **_user_file("data.csv", _csv().encode() + b"caf\xe9 cr\xe8me,1\n"),
        ),
        id="csv-not-utf8",
    ),
    pytest.param(
        Bad(
            ("1 empty document(s) in data file '{dir}/data.csv'", "row 20", "empty-documents"),
            **_user_file("data.csv", _csv('"",1\n')),
        ),
        id="csv-empty-document",
    ),
    pytest.param(
        Bad(
            ("2 empty document(s) in data file '{dir}/data.csv'", "whitespace-only", "empty-documents"),
            **_user_file("data.csv", _csv('"   ",1\n"\t",0\n')),
        ),
        id="csv-whitespace-document",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/data.csv'", "label -1 at row 20 is out of range"),
            **_user_file("data.csv", _csv("a document,-1\n")),
        ),
        id="csv-label-negative",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/data.csv'", "text-column", "['text'] not found", "['body', 'label']"),
            **_user_file("data.csv", _csv(header="body,label")),
        ),
        id="csv-text-column-missing",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/test.jsonl'", "not found", "test-file"),
            **_user_file("data.jsonl", _jsonl(), 'test-file = "{dir}/test.jsonl"\n'),
        ),
        id="jsonl-test-file-missing",
    ),
    pytest.param(Bad(("data file '{dir}/data.jsonl'", "is empty"), **_user_file("data.jsonl", "")), id="jsonl-empty"),
    pytest.param(
        Bad(
            ("data file '{dir}/data.jsonl'", "line 21 is not valid JSON"),
            **_user_file("data.jsonl", _jsonl("{not json\n")),
        ),
        id="jsonl-corrupt",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/data.jsonl'", "line 21 is not a JSON object"),
            **_user_file("data.jsonl", _jsonl("[1, 2]\n")),
        ),
        id="jsonl-not-an-object",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/data.jsonl'", "every document has label 'spam'"),
            **_user_file("data.jsonl", "".join(f'{{"text": "mail {i}", "label": "spam"}}\n' for i in range(20))),
        ),
        id="jsonl-one-class",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/data.jsonl'", "label-column 'label'", "NaN", "row 20"),
            **_user_file("data.jsonl", _jsonl('{"text": "a document", "label": NaN}\n')),
        ),
        id="jsonl-nan-label",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/data.jsonl'", "label-column 'label'", "null", "row 20"),
            **_user_file("data.jsonl", _jsonl('{"text": "a document", "label": null}\n')),
        ),
        id="jsonl-null-label",
    ),
    pytest.param(
        Bad(
            ("data file '{dir}/data.jsonl'", "is not UTF-8", "0xe9"),
            process=True,
            **_user_file("data.jsonl", _jsonl().encode() + b'{"text": "caf\xe9", "label": 1}\n'),
        ),
        id="jsonl-not-utf8",
    ),
    pytest.param(
        Bad(
            ("short-documents", "fewer than 2 sentences", "sentence-level DP"),
            **_user_file("docs.csv", _short_docs(), DOC_LEVEL),
        ),
        id="one-sentence-documents",
    ),
    pytest.param(
        Bad(
            (
                "data file '{dir}/data/sst2/dev.jsonl.gz'",
                "label 7 at row 1 is out of range",
                "labels.json names 2 classes",
            ),
            'dataset = "sst2"\ndata-dir = "{dir}/data"\n',
            files={
                "data/sst2/train.jsonl.gz": _gz(_jsonl()),
                "data/sst2/dev.jsonl.gz": _gz(_jsonl('{"text": "a document", "label": 7}\n', n=1)),
                "data/sst2/labels.json": TWO_LABELS,
            },
        ),
        id="labels-out-of-range",
    ),
    # ------------------------------------------------------------------------------ Python API
    pytest.param(
        Bad(
            ("data file '{dir}/none.csv'", "not found"),
            api=_api_run({"dataset": "{dir}/none.csv"}),
            raises=FileNotFoundError,
        ),
        id="api-run-csv-missing",
    ),
    pytest.param(
        Bad(
            ("unknown config key 'colour'", "keyword argument 'colour'"),
            api=_api_run({}, colour="red"),
            raises=ConfigError,
        ),
        id="api-run-keyword-unknown",
    ),
    pytest.param(
        Bad(
            ("1 empty document(s) in data file '{dir}/data.jsonl'", "empty-documents"),
            api=_api_run({"dataset": "{dir}/data.jsonl"}),
            files={"data.jsonl": _jsonl('{"text": " ", "label": 0}\n')},
        ),
        id="api-run-empty-document",
    ),
    pytest.param(
        Bad(
            ("sentence-epsilon", "must be a number", "'ten'"),
            api=_resolve({"sentence-epsilon": "ten"}),
            raises=ConfigError,
        ),
        id="api-resolve-epsilon-string",
    ),
    pytest.param(
        Bad(
            ("label-epsilon", "must be > 0 and finite", "got nan"),
            api=_resolve({"label-mechanism": "rr", "label-epsilon": math.nan}),
            raises=ConfigError,
        ),
        id="api-resolve-epsilon-nan",
    ),
    pytest.param(
        Bad(("map-dim", "must be >= 2"), api=_resolve({"map-dim": 0}), raises=ConfigError),
        id="api-resolve-map-dim-zero",
    ),
    pytest.param(  # refused with the config alone: before any data is read
        Bad(
            ("cohort-map-dim = 400", "d = 384", "cohort-map-dim <= 384"),
            api=_resolve(COHORTS),
            raises=ConfigError,
        ),
        id="api-resolve-cohort-map-dim-above-d",
    ),
    # --------------------------------------------------------------- mechanisms' release API
    pytest.param(
        Bad(
            ("x contains NaN or infinite values", "1 row(s)"),
            api=_sanitize("purkayastha", _rows_with(math.nan), epsilon=10.0),
        ),
        id="mechanism-nan-embedding",
    ),
    pytest.param(
        Bad(
            ("x contains NaN or infinite values",), api=_sanitize("planar_laplace", _rows_with(math.inf), epsilon=10.0)
        ),
        id="mechanism-inf-embedding",
    ),
    pytest.param(
        Bad(
            ("input dimension 8 does not match the projection's 16",),
            api=_sanitize("privemb", _rows_with(0.5), epsilon=10.0, input_dim=16),
        ),
        id="mechanism-dimension-mismatch",
    ),
    pytest.param(
        Bad(("document 0", "dimension 3, expected 4"), api=_truncation(_docs((3, 3)))),
        id="mechanism-document-dimension-mismatch",
    ),
    pytest.param(
        Bad(("document 1 has 1 sentence(s)", "at least 2"), api=_truncation(_docs((3, 4), (1, 4)))),
        id="mechanism-one-sentence-document",
    ),
    pytest.param(
        Bad(("labels must lie in [0, 2)", "[0, 3]"), api=_labels_out_of_range), id="mechanism-labels-out-of-range"
    ),
    pytest.param(
        Bad(("epsilon must be > 0 and finite", "got 0"), api=_create("purkayastha", epsilon=0)),
        id="mechanism-epsilon-zero",
    ),
    pytest.param(
        Bad(("epsilon must be a number", "'high'"), api=_create("rr", epsilon="high")), id="mechanism-epsilon-string"
    ),
    pytest.param(
        Bad(("unknown mechanism 'gauss'", "known mechanisms"), api=_mechanism_class("gauss")), id="mechanism-unknown"
    ),
]

#: Warning categories Python does not print by default (outside __main__).
SILENT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def _no_simulation(*args: object, **kwargs: object) -> None:
    raise AssertionError("reached Flower's run_simulation: the input was not refused before Ray started")


def _cli_in_process(argv: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``simulations.cli.main(argv)``: its exit code and what reached stderr (fd 2, and the warnings
    Python would print). The loggers it configures are restored after the test (tests/conftest.py)."""
    from simulations import cli

    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            code = cli.main(argv)
        except SystemExit as stop:  # argparse
            code = stop.code if isinstance(stop.code, int) else 1
    err = capfd.readouterr().err
    shown = [w for w in caught if not issubclass(w.category, SILENT)]
    return code, err + "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in shown)


def _cli_process(argv: list[str], data_dir: Path, cache_dir: Path) -> tuple[int, str]:
    env = {**os.environ, "SANITAS_DATA_DIR": str(data_dir), "SANITAS_CACHE_DIR": str(cache_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "simulations.cli", *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("bad", ROWS)
def test_bad_input_is_refused_with_one_line(
    bad: Bad,
    tmp_path: Path,
    data_dir: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    def fill(text: str) -> str:
        return text.replace("{dir}", str(tmp_path))

    for name, content in bad.files.items():
        path = tmp_path / fill(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    expect = [fill(fragment) for fragment in bad.expect]
    out = tmp_path / "out"
    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    monkeypatch.setenv("SANITAS_CACHE_DIR", str(cache_dir))
    monkeypatch.setattr("flwr.simulation.run_simulation", _no_simulation)

    if bad.api is not None:
        with pytest.raises(bad.raises) as info:
            bad.api(tmp_path)
        assert type(info.value) is bad.raises, f"{type(info.value).__name__}: {info.value}"
        message = str(info.value)
        assert "\n" not in message.strip(), message
        missing = [fragment for fragment in expect if fragment not in message]
        assert not missing, f"{missing} not in {message!r}"
    else:
        config = tmp_path / "run.toml"
        if bad.toml is not None:
            config.write_text(fill(bad.toml))
        argv = ["run", str(config), "--out", str(out), *map(fill, bad.args)]
        code, err = _cli_process(argv, data_dir, cache_dir) if bad.process else _cli_in_process(argv, capfd)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2, err
        assert "Traceback" not in err, err
        assert len(lines) == 1 and lines[0].startswith("sanitas: error: "), err
        assert len(lines[0]) <= 200 + len(str(tmp_path)) * lines[0].count(str(tmp_path)), lines[0]
        missing = [fragment for fragment in expect if fragment not in lines[0]]
        assert not missing, f"{missing} not in {lines[0]!r}"
    assert not out.exists() or not any(out.iterdir()), f"a results folder was left in {out}"


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a machine with CUDA runs device = cuda")
def test_cuda_on_a_machine_without_it_is_refused_before_any_folder(tmp_path: Path) -> None:
    """device = "cuda" where torch sees no CUDA: one line naming the key and the fix, exit 2, nothing written."""
    config = tmp_path / "c.toml"
    config.write_text(f'device = "cuda"\nout-dir = "{tmp_path / "out"}"\n')
    done = subprocess.run(
        [sys.executable, "-m", "simulations.cli", "run", str(config)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and 'device = "cuda" but this machine has no CUDA' in lines[0] and len(lines[0]) <= 200
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("below", ["", "new/sub"])
def test_an_out_folder_that_cannot_be_written_is_refused_while_parsing(
    below: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """``--out`` into a folder no file can be written into (or under it): refused as the arguments are
    parsed, naming the option and the folder, before the handler (it used to end in a PermissionError
    traceback after the data had loaded)."""
    from simulations.cli import run

    locked = tmp_path / "locked"
    locked.mkdir()
    refuse_writes_in(monkeypatch, locked)
    monkeypatch.setattr(run, "handle", lambda args: pytest.fail("the unwritable --out reached the handler"))
    out = locked / below if below else locked
    code, err = _cli_in_process(["run", str(COHORTS_PATH), "--out", str(out)], capfd)
    create = f"cannot create {str(out)!r}: " if below else ""
    assert code == 2, err
    assert err.strip() == (
        f"sanitas: error: run: argument --out: {create}cannot write into {str(locked)!r} (Permission denied): "
        "choose a writable folder"
    )
    assert list(locked.iterdir()) == []


@pytest.fixture
def immutable_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder root cannot write into either (``chattr +i``; chmod does not stop root), unlocked after the
    test; skipped where chattr is refused (it needs CAP_LINUX_IMMUTABLE)."""
    folder = tmp_path / "immutable"
    folder.mkdir()
    done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i refused here: {done.stderr.strip()}")
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_an_immutable_out_folder_is_refused_by_the_command(
    immutable_dir: Path, data_dir: Path, cache_dir: Path
) -> None:
    """As a user runs it (as root here, where only an immutable folder or a read-only mount refuses)."""
    code, err = _cli_process(["run", str(COHORTS_PATH), "--out", str(immutable_dir)], data_dir, cache_dir)
    assert code == 2, err
    assert err.strip() == (
        f"sanitas: error: run: argument --out: cannot write into {str(immutable_dir)!r} (Operation not permitted): "
        "choose a writable folder"
    )
    assert list(immutable_dir.iterdir()) == []


@pytest.mark.parametrize(
    ("sets", "expect"),
    [
        (["cohort-map-dim=512"], "cohort-map-dim = 512 is above the dimension d = 384"),
        (['strategy="nosuch_module:MyStrategy"'], "cannot import module 'nosuch_module'"),
        (['run-name="taken"'], "{out}/taken already exists and is not empty"),
        (['out-dir="{locked}"'], "out-dir = '{locked}': cannot write into '{locked}' (Permission denied)"),
    ],
    ids=["cohort-map-dim-above-d", "strategy-module-missing", "run-name-taken", "out-dir-unwritable"],
)
def test_what_needs_only_the_config_is_refused_before_the_data(
    sets: list[str],
    expect: str,
    tmp_path: Path,
    data_dir: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Cheap checks first: a value refused by the config, the strategy module, the results folder
    (named and taken, or not writable) never waits for the data (loading SST-2 and its public split
    is seconds on 2 cores), so the refusal comes within the time the config takes."""
    from fl.data import datasets

    out, locked = tmp_path / "out", tmp_path / "locked"
    (out / "taken").mkdir(parents=True)
    (out / "taken" / "rounds.jsonl").write_text("")
    locked.mkdir()
    refuse_writes_in(monkeypatch, locked)
    for name in ("check_source", "load"):
        monkeypatch.setattr(datasets, name, lambda *a, **k: pytest.fail("the data was read before the refusal"))
    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    monkeypatch.setenv("SANITAS_CACHE_DIR", str(cache_dir))

    def fill(text: str) -> str:
        return text.replace("{out}", str(out)).replace("{locked}", str(locked))

    argv = ["run", str(COHORTS_PATH), *[a for s in sets for a in ("--set", fill(s))]]
    if not any(s.startswith("out-dir") for s in sets):
        argv += ["--out", str(out)]
    code, err = _cli_in_process(argv, capfd)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("sanitas: error: ") and fill(expect) in lines[0], err
    assert sorted(p.name for p in out.iterdir()) == ["taken"] and list(locked.iterdir()) == []
