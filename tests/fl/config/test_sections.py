"""Each section checks its own keys (``Section.check`` in fl.config.keys); rules across sections live in
fl.config.rules. A section's check sees only its own keys, so a rule that reads two sections must be
refused by ``check_across_sections`` and passed by the sections alone."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from fl.config import SECTION_CLASSES, SECTIONS, ConfigError, resolve
from fl.config.rules import check_across_sections

# (section, key, bad value, start of the one line the user sees)
OWN: list[tuple[str, str, Any, str]] = [
    ("data", "test-fraction", 1.5, "test-fraction must lie in (0, 1), got 1.5"),
    ("data", "public-size", -1, "public-size must be >= 0 (0 = all), got -1"),
    ("data", "public-split", "rows", "public-split must be one of ('source', 'row'), got 'rows'; did you mean 'row'?"),
    ("users", "users-per-node", 0, "users-per-node must be >= 1, got 0"),
    ("users", "dirichlet-alpha", 0.0, "dirichlet-alpha must be > 0, got 0.0"),
    ("encoder", "tuning-holdout", 1.0, "tuning-holdout must lie in [0, 1), got 1.0"),
    ("release", "map-dim", 1, "map-dim must be >= 2, got 1"),
    ("release", "sentence-epsilon", -1.0, "sentence-mechanism 'purkayastha': sentence-epsilon must be > 0"),
    ("release", "label-mechanism", "purkayastha", "label-mechanism 'purkayastha' is a sentence-level mechanism"),
    ("central", "central-clip", 0.0, "central-clip must be > 0 and finite, got 0.0"),
    ("server", "strategy", "not a class", "strategy = 'not a class': write a Flower class name"),
    ("simulation", "ray-address", "host:99999", 'ray-address must be ""'),
    ("output", "reference-accuracy", 2.0, "reference-accuracy must lie in [0, 1] (0 = none), got 2.0"),
]


@pytest.mark.parametrize(("section", "key", "value", "message"), OWN, ids=[row[1] for row in OWN])
def test_a_section_refuses_its_own_bad_key(section: str, key: str, value: Any, message: str) -> None:
    assert key in SECTIONS[section]
    good = getattr(resolve(), section)
    good.check()  # the defaults pass
    bad = replace(good, **{key.replace("-", "_"): value})
    with pytest.raises(ConfigError) as err:
        bad.check()
    assert str(err.value).startswith(message)
    with pytest.raises(ConfigError) as through_resolve:
        resolve({key: value})
    assert str(through_resolve.value) == str(err.value)  # the same line through the whole config


# Rules that read two sections: every section passes alone, the rule refuses the whole config.
ACROSS: list[tuple[dict[str, Any], str]] = [
    ({"map-in": "public"}, "map-in = 'public' builds M1 from the public split"),
    ({"mode": "central", "map-in": "leaky", "allow-unaccounted-leakage": True}, "mode = 'central' with central-unit"),
    ({"word-mechanism": "cmp", "sentence-mechanism": "none", "mode": "central"}, "word-mechanism is a local-DP"),
    ({"central-train": "encoder"}, "central-train = 'encoder' trains the encoder"),
    ({"encoder-tuning": "public"}, "encoder-tuning = 'public' tunes the encoder on the public split"),
    ({"map-dim": 500}, "map-dim must be <= the embedding dimension d = 384"),
]


@pytest.mark.parametrize(("keys", "message"), ACROSS, ids=[next(iter(k)) for k, _ in ACROSS])
def test_a_rule_across_sections_is_refused_by_the_rules_only(keys: dict[str, Any], message: str) -> None:
    from fl.config import RunConfig
    from fl.config.keys import DEFAULTS

    cfg = RunConfig.from_flat({**DEFAULTS, **keys})
    for name in SECTION_CLASSES:
        getattr(cfg, name).check()  # no section alone sees the problem
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        check_across_sections(cfg)
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        resolve(keys)
