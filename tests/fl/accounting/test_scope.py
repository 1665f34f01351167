"""What a run's guarantee covers: summary.json's ``noise`` block (secret, or a seeded simulation that is no
guarantee against whoever knows the seed) and its ``guarantee_statement``, from a real run."""

from __future__ import annotations

import json
from pathlib import Path

from fl import config
from fl.accounting.scope import (
    EVALUATION_NOT_COVERED,
    SECRET_NOISE_SOURCE,
    guarantee_statement,
    noise_block,
    summary_scope,
    unit_text,
)


def test_the_noise_block_says_whether_the_noise_is_secret() -> None:
    assert noise_block("local", -1) == {
        "secret": True,
        "source": SECRET_NOISE_SOURCE["local", False],
        "generator": "torch MT19937",
    }
    assert "Mersenne Twister" in SECRET_NOISE_SOURCE["local", False]
    secure = noise_block("local", -1, secure_rng=True)
    assert secure["generator"] == "ChaCha20" and secure["secure_rng"] is True and "ChaCha20" in secure["source"]
    assert "ChaCha20" in noise_block("central", -1, secure_rng=True)["source"]
    assert noise_block("local", 0) == {
        "secret": False,
        "noise_seed": 0,
        "generator": "torch MT19937",
        "note": "reproducible simulation: whoever knows noise-seed (the run config, which the server holds) can "
        "replay every node's noise; the printed epsilon is not a guarantee against them",
    }
    assert noise_block("local", -1, secure_rng=True)["secure_rng"] is True
    central = noise_block("central", 7)
    assert central["secret"] is False and central["noise_seed"] == 7 and "global models" in central["note"]
    assert noise_block("central", -1)["secret"] is True


def test_the_unit_is_named_by_dataset_and_user_unit() -> None:
    assert unit_text("sst2", "row").startswith("per phrase (a GLUE SST-2 training row; one review sentence can hold")
    assert unit_text("sst2", "source") == "per source sentence"
    assert unit_text("agnews", "row") == "per training row"
    assert "each protected under its own budget" in unit_text("sst2", "row", "central")


def test_clean_evaluation_is_named_off_by_default() -> None:
    assert "clean-evaluation = true, off by default" in EVALUATION_NOT_COVERED
    assert config.resolve({})["clean-evaluation"] is False


def test_the_summary_fields_follow_the_config() -> None:
    summary = {"dataset": "sst2", "ldp_guarantee_holds": True, "privacy": {"epsilon_total": 6.28, "delta_total": 0.0}}
    cfg = config.resolve({"noise-seed": 3, "clean-evaluation": True, "user-unit": "source"})
    fields = summary_scope(summary, cfg.release, user_unit=cfg.data.user_unit)
    assert fields["noise"]["secret"] is False and fields["clean_evaluation"] is True
    text = fields["guarantee_statement"]
    assert text.startswith("epsilon 6.28 per source sentence, delta 0, local DP.")
    assert "NOT secret, noise-seed = 3" in text and "on-device inference on their clean inputs" in text
    # summary["data"]["user_unit"], when the data says it, wins over the config's key
    assert "per phrase" in guarantee_statement({**summary, "data": {"user_unit": "row"}}, user_unit="source")


def _run(tmp_path: Path, name: str, **keys: object) -> dict:
    import simulations

    cfg = {
        "dataset": "synthetic",
        "num-users": 60,
        "synthetic-test-users": 20,
        "synthetic-dim": 16,
        "users-per-node": 30,
        "num-server-rounds": 1,
        "server-epochs": 1,
        **keys,
    }
    result = simulations.run(cfg, out=tmp_path, run_name=name)
    written = json.loads((result.folder / "summary.json").read_text())
    assert written["noise"] == result.summary["noise"]
    return written


def test_a_real_run_writes_its_noise_block_and_guarantee_statement(tmp_path: Path) -> None:
    """Default (noise-seed = -1): the noise is secret; a seeded run says it is a reproducible simulation."""
    secret = _run(tmp_path, "secret", **{"label-mechanism": "rr", "label-epsilon": 1.0})
    assert secret["noise"] == noise_block("local", -1)
    assert secret["clean_evaluation"] is False
    statement = secret["guarantee_statement"]
    assert statement.startswith("epsilon ") and "per training row, delta 0, local DP. Covers: the training" in statement
    assert f"Noise: secret from the server: {SECRET_NOISE_SOURCE['local', False]}." in statement
    assert statement.endswith("the evaluation confusion counts, from the test users' true labels.")
    seeded = _run(tmp_path, "seeded", **{"noise-seed": 0, "clean-evaluation": True})
    assert seeded["noise"]["secret"] is False and seeded["noise"]["noise_seed"] == 0
    assert "not a guarantee against them" in seeded["noise"]["note"]
    assert "NOT secret, noise-seed = 0" in seeded["guarantee_statement"]
    assert "labels in the clear" in seeded["guarantee_statement"]
    assert "on-device inference on their clean inputs" in seeded["guarantee_statement"]
