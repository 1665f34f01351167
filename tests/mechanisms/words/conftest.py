"""Small synthetic word spaces for the statistical tests (fast, no GloVe load)."""

from __future__ import annotations

import pytest

from mechanisms.words import WordSpace
from tests.support.word_spaces import make_space


@pytest.fixture(scope="session")
def space16() -> WordSpace:
    return make_space(2000, 16)


@pytest.fixture(scope="session")
def space50() -> WordSpace:
    return make_space(3000, 50, seed=1)
