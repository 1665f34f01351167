"""A user's mechanism named in the run config (``sentence-mechanism = "user_noise.py:MyPlanar"``) runs on the
nodes of the local backend and of the Ray backend, after the quick audit of its declared guarantee; one that
samples at 3x its declared epsilon is refused before any work (one line, exit 2, no results folder).

The mechanisms are written into ``tmp_path`` (tests/mechanisms/user_code_mechanisms.py); each ``sanitize``
appends ``<pid> <called from clients/>`` to a marker file, which shows that the nodes (not only the audit)
sanitized with the user's class, and on Ray in other processes than the one that launched the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import simulations
from fl import config
from tests.conftest import REPO
from tests.mechanisms.user_code_mechanisms import write_mechanisms
from tests.support.runs import timeless
from tests.support.simulation import run_in_process

# 60 synthetic training users and 20 test users on 3 nodes, one round: a run of a few seconds, no data files.
TINY: dict[str, Any] = {
    "dataset": "synthetic",
    "num-users": 60,
    "synthetic-test-users": 20,
    "synthetic-dim": 16,
    "users-per-node": 20,
    "num-server-rounds": 1,
    "server-epochs": 1,
    "noise-seed": 0,
    "sentence-epsilon": 2.0,
    "label-epsilon": 2.0,
}


def _marks(marker: Path) -> list[tuple[int, bool]]:
    """(pid, called from the ClientApp's code) of every ``sanitize`` call the marker file recorded."""
    return [(int(p), n == "1") for p, n in (line.split() for line in marker.read_text().splitlines())]


def test_a_file_mechanism_runs_on_the_local_backend(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    marker = tmp_path / "marks.txt"
    source = write_mechanisms(tmp_path, marker=marker)
    caplog.set_level("INFO", logger="simulations.runtime.user_mechanisms")
    result = simulations.run(
        {**TINY, "sentence-mechanism": f"{source}:MyPlanar", "label-mechanism": f"{source}:MyRR"},
        out=tmp_path / "out",
    )
    assert result.folder.name.startswith("synthetic-user_noise.MyPlanar-eps2-")  # a name, not a path
    assert len(result.rounds) == 1 and 0.0 <= result.summary["final"]["accuracy"] <= 1.0
    assert result.summary["privacy"]["epsilon_metric"] == 2.0 and result.summary["privacy"]["metric"] == "euclidean"
    nodes = [pid for pid, node in _marks(marker) if node]
    assert nodes and set(nodes) == {os.getpid()}, "the local backend's nodes sanitize in this process"
    audits = [r.getMessage() for r in caplog.records if "privacy audit" in r.getMessage()]
    assert len(audits) == 2 and all("passed its privacy audit" in line for line in audits), audits
    assert any(line.startswith("sentence-mechanism 'user_noise.py:MyPlanar' passed") for line in audits)


def test_a_module_mechanism_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_mechanisms(tmp_path, "user_noise_module_run.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = simulations.run({**TINY, "sentence-mechanism": "user_noise_module_run:MyPlanar"}, out=tmp_path / "out")
    assert result.folder.name.startswith("synthetic-user_noise_module_run.MyPlanar-eps2-")
    assert len(result.rounds) == 1


def test_sanitas_run_refuses_a_3x_mechanism_in_one_line_before_any_work(tmp_path: Path) -> None:
    """The config names the file relative to itself (found beside it, whatever the working directory):
    the quick audit refuses it, exit 2, one line with the estimate, no results folder."""
    write_mechanisms(tmp_path)
    cfg = tmp_path / "run.toml"
    keys = {**TINY, "sentence-mechanism": "user_noise.py:Loose"}
    cfg.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items()))
    out = tmp_path / "out"
    proc = run_in_process(["run", str(cfg), "--out", str(out)], {})
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr
    assert err[0].startswith(
        "sanitas: error: sentence-mechanism 'user_noise.py:Loose' failed its audit: declared epsilon 1*d = 2, "
        "lower bound 4."
    ), err
    assert err[0].endswith("fix the sampler or the guarantee") and len(err[0]) <= 200, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ({"sentence-mechanism": "{src}:Missing"}, "user_noise.py defines no 'Missing'"),
        ({"label-mechanism": "{src}:MyPlanar"}, "label-mechanism = 'user_noise.py:MyPlanar': MyPlanar is a sentence-"),
        ({"sentence-mechanism": "user_noise.py"}, "write 'path/to/file.py:Class' or 'package.module:Class'"),
        ({"sentence-mechanism": "{src}:MyPlanar", "sentence-options": 'normalize_output = "no"'}, "must be true or"),
        ({"sentence-mechanism": "{src}:MyPlanar", "sentence-options": "bogus = 1"}, "unexpected keyword argument"),
        (
            {"document-mechanism": "{src}:MyPlanar", "sentence-mechanism": "none", "map-in": "identity"},
            "MyPlanar is a sentence-level mechanism",
        ),
    ],
)
def test_the_config_refuses_a_bad_user_mechanism_in_one_line(
    tmp_path: Path, keys: dict[str, str], expected: str
) -> None:
    source = write_mechanisms(tmp_path)
    raw = {k: v.replace("{src}", str(source)) for k, v in keys.items()}
    with pytest.raises(config.ConfigError) as err:
        config.resolve({**TINY, **raw})
    text = str(err.value)
    assert expected in text and "\n" not in text and len(text) <= 200, text


def test_the_config_accepts_a_user_mechanism_and_its_options(tmp_path: Path) -> None:
    source = write_mechanisms(tmp_path)
    cfg = config.resolve(
        {**TINY, "sentence-mechanism": f"{source}:MyPlanar", "sentence-options": "normalize_output = false"}
    )
    mech = cfg.release.mechanism("sentence", input_dim=16)
    assert type(mech).__name__ == "MyPlanar" and mech.normalize_output is False
    assert cfg.release.mechanism_name("sentence") == "user_noise.MyPlanar"


def test_a_document_mechanism_from_a_file_is_refused_in_one_line(tmp_path: Path) -> None:
    """The document level builds deepcandidate or truncation from public documents (fl.levels.document): a
    user's document-level class is refused before any work rather than failing after the data."""
    source = tmp_path / "doc_noise.py"
    source.write_text(
        "from mechanisms.truncation import Truncation\n\nclass MyTruncation(Truncation):\n    name = 'my_truncation'\n"
    )
    keys = {"document-mechanism": f"{source}:MyTruncation", "sentence-mechanism": "none", "map-in": "identity"}
    with pytest.raises(config.ConfigError, match=r"^document-mechanism = 'doc_noise.py:MyTruncation': the document"):
        config.resolve({**keys, "public-size": 10})


def test_a_mechanism_without_a_gradient_path_is_refused_where_training_goes_through_it(tmp_path: Path) -> None:
    source = write_mechanisms(tmp_path)
    (tmp_path / "no_gradient.py").write_text(
        f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nfrom user_noise import MyPlanar\n\n"
        "class Discrete(MyPlanar):\n    name = 'discrete'\n    gradient_path = False\n"
    )
    assert source.is_file()
    with pytest.raises(config.ConfigError, match="sentence-mechanism = 'no_gradient.py:Discrete' has no gradient path"):
        config.resolve(
            {
                "sentence-mechanism": f"{tmp_path / 'no_gradient.py'}:Discrete",
                "map-in": "leaky",
                "allow-unaccounted-leakage": True,
            }
        )


@pytest.mark.slow  # two runs, one on Ray (~60 s on 2 cores)
def test_a_file_mechanism_runs_on_the_ray_backend_as_on_the_local_one(tmp_path: Path) -> None:
    """The Ray actors (other processes) rebuild the mechanism from the config's absolute file path: the rounds
    are those of the local backend, and the nodes' ``sanitize`` calls come from processes other than the
    launcher's."""
    folders = {}
    for backend in ("local", "ray"):
        work = tmp_path / backend
        work.mkdir()
        marker = work / "marks.txt"
        source = write_mechanisms(work, marker=marker)
        keys = {**TINY, "sentence-mechanism": f"{source}:MyPlanar", "backend": backend}
        cfg = work / "run.toml"
        cfg.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items()))
        command = [sys.executable, "-m", "simulations.cli", "run", str(cfg), "--out", str(work / "out")]
        proc = subprocess.run(
            [*command, "--set", 'run-name="r"'], cwd=REPO, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"({backend} backend)" in proc.stdout
        marks = _marks(marker)
        launcher = {pid for pid, node in marks if not node}  # the quick audit runs where the run starts
        nodes = {pid for pid, node in marks if node}
        assert launcher and nodes
        if backend == "ray":
            assert not nodes & launcher, "Ray's nodes sanitize in their actors"
        else:
            assert nodes == launcher
        folders[backend] = work / "out" / "r"
    assert timeless(folders["local"]) == timeless(folders["ray"])
