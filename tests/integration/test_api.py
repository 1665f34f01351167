"""The Python API of one run, ``simulations.run(config, **overrides) -> RunResult``: keyword
arguments to run-config keys, errors before anything is written, and one real simulation.

The real run goes through ``simulations.run`` in a ``python -c`` subprocess (Ray and Flower
started inside the pytest process would outlive the test and share its state) and prints the
``RunResult`` fields as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import simulations
from fl.config import ConfigError
from simulations.runtime import api
from simulations.runtime.overrides import load_with_overrides, parse_override, parse_overrides, split_override
from tests.conftest import REPO

SMALL = {
    "dataset": "sst2",
    "train-size": 60,
    "test-size": 40,
    "users-per-node": 6,
    "num-server-rounds": 2,
    "fraction-train": 0.5,
    "server-epochs": 3,
}


def test_keyword_arguments_map_to_run_config_keys(tmp_path: Path) -> None:
    assert api.config_key("sentence_epsilon") == "sentence-epsilon"
    assert api.config_key("sentence-epsilon") == "sentence-epsilon"  # a kebab key via **{...} is kept
    assert api.config_key("seed") == "seed"
    overrides = api.keyword_overrides({"sentence_epsilon": 6.0, "label_mechanism": "rr", "cache_dir": tmp_path})
    assert overrides == {"sentence-epsilon": 6.0, "label-mechanism": "rr", "cache-dir": str(tmp_path)}
    cfg = api.resolve_config({**SMALL, "sentence-epsilon": 2.0}, overrides, out=tmp_path / "out")
    assert cfg["sentence-epsilon"] == 6.0 and cfg["label-mechanism"] == "rr" and cfg["train-size"] == 60
    assert cfg["out-dir"] == str(tmp_path / "out") and cfg["map-in"] == "random"  # a default
    path = tmp_path / "run.toml"
    path.write_text('dataset = "sst2"\nsentence-epsilon = 2.0\nout-dir = "elsewhere"\n')
    assert api.resolve_config(path)["out-dir"] == "elsewhere"
    assert api.resolve_config(path, {"sentence-epsilon": 3})["sentence-epsilon"] == 3.0


def test_unknown_keys_and_bad_values_are_config_errors_naming_them(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'sentence-epsilonn' \\(keyword argument 'sentence_epsilonn'\\)"):
        simulations.run(tmp_path / "missing.toml", sentence_epsilonn=6.0)  # the keyword is checked first
    with pytest.raises(ConfigError, match="config file .*missing.toml' not found"):
        simulations.run(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="unknown config key 'sentence_epsilon'"):
        simulations.run({"sentence_epsilon": 6.0})  # a mapping holds run-config keys as they are
    with pytest.raises(ConfigError, match="epsilon must be > 0"):
        simulations.run(SMALL, sentence_epsilon=-1.0, out=tmp_path / "out")
    with pytest.raises(ConfigError, match="map-in must be one of"):
        simulations.run(SMALL, map_in="sideways", out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_one_key_value_parser_with_the_option_in_its_errors() -> None:
    assert parse_override(" sentence-epsilon = 6 ") == ("sentence-epsilon", 6)
    assert parse_override('label-mechanism="rr"') == ("label-mechanism", "rr")
    assert parse_override("map-in=random") == ("map-in", "random")  # not TOML: the bare string
    assert parse_override("sentence-options='out_dim = 8'") == ("sentence-options", "out_dim = 8")  # first '='
    assert parse_overrides(["seed=1", "seed=2", "noise-seed=0"]) == {"seed": 2, "noise-seed": 0}
    assert split_override("sentence-epsilon=2,6", "--grid", "KEY=V1,V2,...") == ("sentence-epsilon", "2,6")
    with pytest.raises(ConfigError, match="^--set expects key=value, got 'seed'$"):
        parse_override("seed")
    with pytest.raises(ConfigError, match="^--central-set expects key=value, got 'users-per-node'$"):
        parse_override("users-per-node", "--central-set")


def test_load_with_overrides_reads_the_file_then_applies_the_sets(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('dataset = "sst2"\nseed = 1\n')
    assert load_with_overrides(path, ["seed=2", 'map-in="identity"']) == {
        "dataset": "sst2",
        "seed": 2,
        "map-in": "identity",
    }
    with pytest.raises(ConfigError, match="--set expects key=value"):
        load_with_overrides(path, ["seed"])


def test_run_result_reads_a_results_folder(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    folder.mkdir()
    with pytest.raises(FileNotFoundError, match="no summary.json"):
        api.RunResult.from_folder(folder)
    (folder / "rounds.jsonl").write_text('{"round": 1, "accuracy": 0.5}\n{"round": 2, "accuracy": 0.75}\n')
    (folder / "summary.json").write_text('{"final": {"accuracy": 0.75}}')
    result = api.RunResult.from_folder(folder)
    assert result == simulations.RunResult(
        folder, [{"round": 1, "accuracy": 0.5}, {"round": 2, "accuracy": 0.75}], {"final": {"accuracy": 0.75}}
    )
    with pytest.raises(AttributeError):
        result.folder = tmp_path  # type: ignore[misc]  # frozen


def test_bad_data_fails_before_writing(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """The same checks as ``sanitas run`` (tests/integration/test_simulation.py), in-process."""
    with pytest.raises(ValueError, match="unknown dataset 'sst3'"):
        simulations.run({**SMALL, "dataset": "sst3"}, data_dir=data_dir, cache_dir=cache_dir, out=tmp_path / "out")
    with pytest.raises(ValueError, match="empty document"):
        simulations.run(
            {**SMALL, "dataset": "20newsgroups"}, data_dir=data_dir, cache_dir=cache_dir, out=tmp_path / "out"
        )
    assert not (tmp_path / "out").exists()


SCRIPT = textwrap.dedent(
    """
    import dataclasses, json, sys
    import simulations

    result = simulations.run(sys.argv[1], noise_seed=0, sentence_epsilon=10.0, data_dir=sys.argv[2],
                             cache_dir=sys.argv[3], out=sys.argv[4], run_name="api")
    assert isinstance(result, simulations.RunResult)
    print("RESULT " + json.dumps({**dataclasses.asdict(result), "folder": str(result.folder)}))
    """
)


def test_one_real_run_through_the_python_api(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in SMALL.items()))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(config), str(data_dir), str(cache_dir), str(out)],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sanitas: 60 training users, 40 test users on 10 simulated nodes" in proc.stdout
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    folder = out / "api"
    assert Path(result["folder"]) == folder.resolve()
    # The fields are what the run wrote.
    assert result["summary"] == json.loads((folder / "summary.json").read_text())
    assert result["rounds"] == [json.loads(r) for r in (folder / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in result["rounds"]] == [1, 2]
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in result["rounds"])
    assert result["summary"]["users"] == {"train": 60, "test": 40, "nodes": 10, "nodes_hold_own_files": False}
    assert result["summary"]["final"]["accuracy"] == result["rounds"][-1]["accuracy"]
    config_json = json.loads((folder / "config.json").read_text())["config"]
    assert config_json["noise-seed"] == 0 and config_json["sentence-epsilon"] == 10.0
    assert config_json["train-size"] == 60 and config_json["run-name"] == "api"
