"""Rewrite diagnostics: ROUGE-1 / BLEU through the maintained libraries, N_w and S_w on a sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from fl import config
from fl.levels.spec import LevelSpec
from fl.levels.word.quality import rewrite_quality, text_similarity


def test_text_similarity_bounds_and_a_known_value() -> None:
    same = text_similarity(["the cat sat on the mat"], ["the cat sat on the mat"])
    assert same == {"rouge1_f": pytest.approx(1.0), "bleu": pytest.approx(100.0)}
    assert text_similarity(["the cat sat"], ["dogs run fast"]) == {"rouge1_f": 0.0, "bleu": 0.0}
    # 4 of 6 unigrams shared in both directions: F1 = 2/3.
    assert text_similarity(["the cat sat on the mat"], ["the dog sat on a mat"])["rouge1_f"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="2 originals but 1 rewrites"):
        text_similarity(["a", "b"], ["a"])


@pytest.mark.parametrize(("epsilon", "low", "high"), [(200.0, 0.8, 1.0), (0.5, 0.0, 0.05)])
def test_rewrite_quality_tracks_epsilon(
    data_dir: Path, tmp_path: Path, epsilon: float, low: float, high: float
) -> None:
    """CMP at a huge epsilon keeps the text (N_w, ROUGE-1 near 1 up to OOV words, S_w near 1); at a small one it
    replaces it (both near 0, S_w near the number of draws): the diagnostics see the mechanism."""
    cfg = config.resolve(
        {
            "data-dir": str(data_dir),
            "cache-dir": str(tmp_path),
            "word-mechanism": "cmp",
            "sentence-mechanism": "none",
            "word-epsilon": epsilon,
            "word-options": "vocab_size = 20000",
            "word-quality-docs": 40,
            "word-support-words": 2,
        }
    )
    q = rewrite_quality(LevelSpec.from_config(cfg))
    assert q["documents"] == 40 and q["words"] > 300 and 0.0 <= q["oov_fraction"] < 0.2
    assert low <= q["N_w"] <= high and low <= q["rouge1_f"] <= high
    assert set(q["support"]["per_word"]) <= {"the", "a", ",", "and", "of", "."}
    if epsilon > 1:
        assert q["support"]["S_w_median"] <= 5 and q["bleu"] > 60
    else:
        assert q["support"]["S_w_median"] > 500 and q["bleu"] < 5


def test_word_survival_table_finds_where_words_survive(data_dir: Path, tmp_path: Path) -> None:
    """sanitas word-survival: Laplace on the clipped 50-d GloVe ball keeps no word at epsilon 1 and most
    words at 500; TrLaplace keeps none even at 500 (its per-coordinate noise support is at least [-4C, 4C],
    docs/SPEC.md §7.4), with the attained per-word delta in the table."""
    from simulations.analyses.word_survival import rows
    from simulations.cli import main

    base = {"data-dir": str(data_dir), "cache-dir": str(tmp_path), "dataset": "sst2", "sentence-mechanism": "none"}
    base["word-options"] = "vocab_size = 10000"
    table = {
        (r["word-mechanism"], r["word-epsilon"]): r
        for r in rows(base, ("word_laplace", "trlaplace"), (1.0, 500.0), docs=20)
    }
    assert table["word_laplace", 1.0]["N_w"] < 0.02 and table["word_laplace", 500.0]["N_w"] > 0.5
    assert table["trlaplace", 500.0]["N_w"] < 0.02 and 0 < table["trlaplace", 500.0]["word_delta"] < 1e-3
    assert table["trlaplace", 1.0]["word_delta"] > 0.5 and table["word_laplace", 1.0]["word_delta"] == 0.0
    toml = tmp_path / "w.toml"
    toml.write_text(
        f'data-dir = "{data_dir}"\ncache-dir = "{tmp_path}"\n'
        'sentence-mechanism = "none"\nword-options = "vocab_size = 10000"\n'
    )
    assert (
        main(
            [
                "word-survival",
                str(toml),
                "--out",
                str(tmp_path / "o"),
                "--docs",
                "3",
                "--mechanisms",
                "word_gaussian",
                "--epsilons",
                "5",
            ]
        )
        == 0
    )
    assert (tmp_path / "o" / "word_survival.md").read_text().count("| word_gaussian |") == 1
