"""How the end-to-end tests run the CLI: in a subprocess (Ray) or in this process (local backend)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

BASE = {
    "dataset": '"sst2"',
    "train-size": "60",
    "test-size": "40",
    "users-per-node": "6",
    "num-server-rounds": "2",
    "fraction-train": "0.5",
    "sentence-epsilon": "10.0",
    "server-epochs": "3",
    "noise-seed": "0",
}


def run_cli(
    tmp_path: Path, data_dir: Path, cache_dir: Path, extra: dict[str, str], pythonpath: str = ""
) -> subprocess.CompletedProcess:
    """``sanitas run`` of BASE + ``extra`` as a user types it. On the local backend it runs in this
    process (``simulations.cli.main`` with its own environment and streams: the imports are paid
    once per test session); a Ray run, or one that needs ``pythonpath``, runs in a subprocess."""
    cfg = tmp_path / "run.toml"
    cfg.write_text("".join(f"{k} = {v}\n" for k, v in {**BASE, **extra}.items()))
    argv = ["run", str(cfg), "--out", str(tmp_path / "out"), "--set", 'run-name="r"']
    env = {"SANITAS_DATA_DIR": str(data_dir), "SANITAS_CACHE_DIR": str(cache_dir)}
    if pythonpath or "ray" in extra.get("backend", ""):
        full = {**os.environ, **env}
        if pythonpath:
            full["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, full.get("PYTHONPATH", "")]))
        command = [sys.executable, "-m", "simulations.cli", *argv]
        return subprocess.run(command, cwd=REPO, env=full, capture_output=True, text=True, timeout=900)
    return run_in_process(argv, env)


def run_in_process(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``simulations.cli.main(argv)`` here, with ``env`` set and stdout/stderr captured, as a
    CompletedProcess (the working directory is the repository's, as for the subprocess)."""
    import contextlib
    import io

    from simulations import cli

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env}
    cwd = os.getcwd()
    os.environ.update(env)
    os.chdir(REPO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
    finally:
        os.chdir(cwd)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess(["sanitas", *argv], code, out.getvalue(), err.getvalue())


def rounds_of(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
