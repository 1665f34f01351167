"""The local backend (in this process, ``simulations.runtime.local_runtime``) and Flower's Ray backend run the
same computation: for a fixed seed their ``rounds.jsonl`` are identical, timings aside, in each mode.

These are also the suite's end-to-end Ray runs (one per mode); the other end-to-end tests use the
default local backend.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.runs import MODES as SHARED_MODES
from tests.support.runs import timeless
from tests.support.simulation import BASE, run_cli

MODES = {mode: {k: json.dumps(v) for k, v in extra.items()} for mode, extra in SHARED_MODES.items()}  # TOML values


@pytest.mark.parametrize("mode", sorted(MODES))
def test_local_and_ray_backends_write_identical_rounds(
    mode: str, tmp_path: Path, data_dir: Path, cache_dir: Path
) -> None:
    folders = {}
    for backend in ("local", "ray"):
        work = tmp_path / backend
        work.mkdir()
        proc = run_cli(work, data_dir, cache_dir, {**MODES[mode], "backend": f'"{backend}"'})
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"({backend} backend)" in proc.stdout
        folders[backend] = work / "out" / "r"
    local, ray = timeless(folders["local"]), timeless(folders["ray"])
    assert len(local) == int(BASE["num-server-rounds"]) and local == ray
    assert all(r["accuracy"] is not None for r in local)
    summaries = {b: json.loads((f / "summary.json").read_text()) for b, f in folders.items()}
    assert summaries["local"]["final"] == summaries["ray"]["final"]
    assert "wire" in summaries["local"]["timings"] and "wire" not in summaries["ray"]["timings"]
    assert summaries["local"]["timings"]["wire"]["bytes_sent"] > 0


def test_the_local_backend_refuses_a_ray_cluster_address() -> None:
    from fl import config

    with pytest.raises(config.ConfigError, match="backend = 'local'.*set backend = \"ray\""):
        config.resolve({"backend": "local", "ray-address": "auto"})
    assert config.simulation_backend(config.resolve({"ray-address": "auto"})) == "ray"
    assert config.simulation_backend(config.resolve({})) == "local"
