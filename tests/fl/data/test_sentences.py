"""The offline sentence splitter is deterministic and handles the usual traps."""

import json
import os
import subprocess
import sys

from fl.data.sentences import split_sentences
from tests.conftest import REPO


def test_splits_on_terminal_punctuation_and_html_breaks() -> None:
    text = 'Mr. Smith came. He said "hi!" Then left?  Yes.<br /><br />New one e.g. this. J. Doe wrote it.'
    assert split_sentences(text) == [
        "Mr. Smith came.",
        'He said "hi!"',
        "Then left?",
        "Yes.",
        "New one e.g. this.",
        "J. Doe wrote it.",
    ]


def test_empty_and_single_sentences() -> None:
    assert split_sentences("   \n ") == []
    assert split_sentences("it 's a charming journey . ") == ["it 's a charming journey ."]
    assert split_sentences("no punctuation at all") == ["no punctuation at all"]


TRAPS = (
    'Dr. J. R. Smith met Mrs. Jones at noon, i.e. late. "Really?!" she asked... Then (see Fig. 2) they '
    "left.<BR/>Sept. 3 was fine!! Prof. Xu vs. Co. won (again.) The end"
)
TRAPS_SPLIT = [
    "Dr. J. R. Smith met Mrs. Jones at noon, i.e. late.",
    '"Really?!"',
    "she asked...",
    "Then (see Fig. 2) they left.",
    "Sept. 3 was fine!!",
    "Prof. Xu vs. Co. won (again.)",
    "The end",
]
CHILD = (
    "import json, sys; from fl.data.sentences import split_sentences; print(json.dumps(split_sentences(sys.argv[1])))"
)


def test_deterministic() -> None:
    """The same input gives the same, known, output in every process: a fresh interpreter under other hash
    seeds (ABBREVIATIONS is a frozenset, whose iteration order changes with PYTHONHASHSEED) agrees with
    this one and with the expected split."""
    assert split_sentences(TRAPS) == TRAPS_SPLIT
    assert split_sentences("One. Two! Three? " * 50) == ["One.", "Two!", "Three?"] * 50
    for hash_seed in ("0", "1", "4242"):
        child = subprocess.run(
            [sys.executable, "-c", CHILD, TRAPS],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        assert child.returncode == 0, child.stderr
        assert json.loads(child.stdout) == TRAPS_SPLIT, hash_seed
