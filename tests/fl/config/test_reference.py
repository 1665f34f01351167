"""The key declaration is the one source: pyproject's run-config block and docs/configuration.md are
what :mod:`fl.config.reference` generates from it, and every key is declared completely."""

from __future__ import annotations

import dataclasses
import tomllib
import typing

import pytest

from fl import config
from fl.config import keys, reference
from tests.conftest import REPO


def test_the_committed_files_are_what_the_declaration_generates() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    assert pyproject == reference.with_pyproject_block(pyproject), "run: sanitas config-reference"
    assert (REPO / "docs" / "configuration.md").read_text() == reference.markdown(), "run: sanitas config-reference"


def test_the_check_catches_a_stale_file(tmp_path: pytest.TempPathFactory) -> None:
    """Power check: a default changed in pyproject.toml, or a row missing from the page, is caught."""
    from simulations import cli

    repo = tmp_path
    (repo / "docs").mkdir()
    stale = (REPO / "pyproject.toml").read_text().replace('dataset = "sst2"', 'dataset = "imdb"')
    (repo / "pyproject.toml").write_text(stale)
    (repo / "docs" / "configuration.md").write_text(reference.markdown())
    assert cli.main(["config-reference", "--repo", str(repo), "--check"]) == 1
    assert cli.main(["config-reference", "--repo", str(repo)]) == 0
    assert cli.main(["config-reference", "--repo", str(repo), "--check"]) == 0
    assert tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"] == config.DEFAULTS
    (repo / "docs" / "configuration.md").write_text(reference.markdown().replace("| `seed` |", "| `sed` |"))
    assert cli.main(["config-reference", "--repo", str(repo), "--check"]) == 1


def test_every_key_is_declared_with_a_type_a_doc_and_valid_choices() -> None:
    for section, cls in keys.SECTION_CLASSES.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            name = keys.kebab(f.name)
            assert config.SECTIONS[section].count(name) == 1
            assert type(f.default).__name__ == hints[f.name].__name__, name  # the annotation is the default's type
            assert f.metadata["doc"].strip(), name
            choices = f.metadata["choices"]
            if choices is not None:
                assert f.default in choices, name
    assert len(config.DEFAULTS) == sum(len(k) for k in config.SECTIONS.values())


@pytest.mark.parametrize("key", sorted(config.CHOICES))
def test_a_value_outside_the_declared_choices_is_refused(key: str) -> None:
    with pytest.raises(config.ConfigError, match=key):
        config.resolve({key: "not-a-choice"})


def test_a_resolved_config_has_typed_sections() -> None:
    cfg = config.resolve({"sentence-epsilon": 3})
    assert isinstance(cfg.release, config.ReleaseConfig) and cfg.release.sentence_epsilon == 3.0
    assert isinstance(cfg.release.sentence_epsilon, float) and cfg["sentence-epsilon"] == 3.0
    assert list(cfg) == list(config.DEFAULTS)
