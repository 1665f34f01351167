"""What a restructuring must leave unchanged beyond the runs (``rounds_equality.py``): the outputs of the
end-to-end audit, the mechanism audit, the worst-user composition and the config refusals.

Usage::

    SANITAS_DATA_DIR=../shared/data python benchmarks/outputs_equality.py --code /tmp/before --out before.json
    SANITAS_DATA_DIR=../shared/data python benchmarks/outputs_equality.py --out after.json
    python benchmarks/outputs_equality.py --compare before.json after.json

Sections (each measured in a fresh process whose code is ``--code``'s checkout, else this one):

* ``audit_run``: ``simulations.analyses.audit_run.audit_run`` on 11 seeded cases, every level and every power
  check (the configs of ``simulations.analyses.audit_levels``), as ``FlowAudit`` dicts;
* ``audit_mechanism``: ``mechanisms.audit.audit_mechanism`` on 4 seeded cases (sentence, label, RR with a prior);
* ``compose_worst``: ``fl.accounting.analysis.composition.compose_worst`` on 60 random populations;
* ``config``: the one line ``fl.config.resolve`` refuses each of about 2,100 configs with (every key alone
  with bad values of its type, cross-section combinations, and pairs of bad keys), or ``OK``.

``--compare`` prints, per section, how many items are identical and which differ (for ``config``: the keys
of the configs whose message changed); it exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SECTIONS = ("audit_run", "audit_mechanism", "compose_worst", "config")


def _audit_run() -> list[Any]:
    try:
        from simulations.analyses.audit_levels import DOCUMENT, LABEL, WORD
        from simulations.analyses.audit_run import audit_run
    except ImportError:  # a checkout from before simulations/ had rooms
        from simulations.audit_levels import DOCUMENT, LABEL, WORD  # type: ignore[no-redef]
        from simulations.audit_run import audit_run  # type: ignore[no-redef]

    word = {**WORD, "word-epsilon": 0.25}
    cases = [
        (LABEL, "sentence", "", 2000),
        (LABEL, "label", "", 2000),
        (LABEL, "sentence", "epsilon-3x", 2000),
        (LABEL, "sentence", "redraw-uncharged", 1000),
        (LABEL, "sentence", "leaky-map", 300),
        ({**LABEL, "label-mechanism": "none"}, "sentence", "", 1000),
        ({**LABEL, "label-mechanism": "none", "fresh-noise-per-round": True}, "sentence", "", 1000),
        (word, "word", "", 300),
        (word, "word", "unsanitized", 300),
        (DOCUMENT, "document", "", 300),
        ({**DOCUMENT, "document-mechanism": "truncation"}, "document", "epsilon-3x", 300),
    ]
    return [audit_run(c, level=lv, tamper=t, trials=n, seed=1).to_dict() for c, lv, t, n in cases]


def _audit_mechanism() -> list[Any]:
    import mechanisms
    from mechanisms import RRWithPrior
    from mechanisms.audit import audit_mechanism

    out = []
    for name in ("purkayastha", "laplace", "rr"):
        out.append(audit_mechanism(mechanisms.create(name, epsilon=1.0), 20000, seed=3, dim=8, num_classes=3).to_dict())
    out.append(audit_mechanism(RRWithPrior(1.0), 5000, num_classes=5, prior=[9, 7, 2, 1, 1], seed=2).to_dict())
    return out


def _compose_worst() -> list[Any]:
    import numpy as np

    from fl.accounting.analysis.composition import compose_worst

    rng = np.random.default_rng(0)
    out: list[Any] = []
    for trial in range(60):
        k = int(rng.integers(1, 4))
        kinds: list[tuple] = []
        for _ in range(k):
            eps = float(rng.choice([0.05, 0.3, 1.0, 3.14, 6.0, np.inf])) if trial % 7 else float(rng.choice([0.1, 0.5]))
            delta = float(rng.choice([0.0, 0.0, 1e-7, 1e-5]))
            kinds.append((eps, delta) if trial % 3 else (eps, delta, None))
        users = int(rng.integers(0, 6))
        counts = (
            rng.integers(0, [3, 40, 200][trial % 3], size=(users, k)) if users else np.zeros((0, k), dtype=np.int64)
        )
        if trial % 5 == 0 and users:
            counts[:, 1:] = 0
        try:
            out.append(compose_worst(kinds, counts, 1e-6))
        except Exception as err:  # a refusal is an output too
            out.append(repr(err))
    return out


_NUMBERS = [-1, 0, 1, 2, 0.5, 1.5, -0.5, float("nan"), float("inf"), 10**6, 70000]
_STRINGS = [
    "", "none", "bogus", "public", "random", "leaky", "central", "node", "user", "encoder", "x.y:Z", "a b", "auto",
    "1.2.3.4:99999", "host:6379", "synthetic", "/nonexistent/dir", "mine.csv", "rr_prior", "rr", "cmp",
    "deepcandidate", "truncation", "class_rr", "ham", "ham,spam", "ham,ham", "a=b", "a", "lora", "top",
    "out_dim = 4", "out_dim = ", "privemb", "laplace", "identity", "supervised",
]  # fmt: skip
_COMBOS: list[dict[str, Any]] = [
    {"mode": "central", "map-in": "leaky"}, {"mode": "central", "map-in": "public"},
    {"mode": "central", "central-unit": "node", "map-in": "public"}, {"mode": "central", "strategy": "a.b:C"},
    {"word-mechanism": "cmp"}, {"word-mechanism": "cmp", "sentence-mechanism": "none", "mode": "central"},
    {"document-mechanism": "truncation"},
    {"document-mechanism": "truncation", "sentence-mechanism": "none", "map-in": "identity"},
    {"document-mechanism": "truncation", "sentence-mechanism": "none", "map-in": "identity", "public-fraction": 0.2},
    {"document-mechanism": "truncation", "sentence-mechanism": "none", "map-in": "identity", "public-fraction": 0.2,
     "mode": "central"},
    {"map-in": "public"}, {"map-in": "supervised", "public-fraction": 0.1},
    {"label-mechanism": "rr_prior", "label-prior": "public"}, {"encoder-tuning": "public"}, {"tuning-noise": True},
    {"tuning-noise": True, "encoder-tuning": "public", "public-fraction": 0.1},
    {"tuning-noise": True, "encoder-tuning": "public", "public-fraction": 0.1, "sentence-mechanism": "class_rr"},
    {"encoder-tuning": "public", "public-fraction": 0.1, "dataset": "synthetic"}, {"central-train": "encoder"},
    {"central-train": "encoder", "mode": "central", "doc-embedding": "sentence-mean"}, {"max-epsilon": 5.0},
    {"max-epsilon": 5.0, "label-mechanism": "rr"},
    {"max-epsilon": 5.0, "label-mechanism": "rr", "sentence-mechanism": "none"},
    {"secure-rng": True, "noise-seed": 3}, {"dataset": "synthetic", "public-dataset": "sst2"},
    {"public-dataset": "sst2", "public-fraction": 0.1}, {"public-size": 5}, {"group-column": "g"},
    {"label-names": "a,b"}, {"map-dim": 500}, {"encoder": "./nope"}, {"backend": "local", "ray-address": "auto"},
    {"map-in": "identity", "map-dim": 1}, {"map-dim": 1}, {"sentence-mechanism": "rr"},
    {"label-mechanism": "purkayastha"}, {"word-mechanism": "purkayastha", "sentence-mechanism": "none"},
    {"document-mechanism": "cmp", "sentence-mechanism": "none", "map-in": "identity", "public-fraction": 0.2},
    {"sentence-options": "out_dim = 4"}, {"sentence-options": "bogus = 4"},
    {"word-mechanism": "cmp", "sentence-mechanism": "none", "word-options": "clip = -1"},
]  # fmt: skip
#: One bad key per section, paired: which section's line a config with two problems shows first.
_SINGLES: list[dict[str, Any]] = [
    {"num-server-rounds": 0}, {"users-per-node": 0}, {"test-fraction": 1.5}, {"mode": "bogus"}, {"fault-rate": 2.0},
    {"reference-accuracy": 2.0}, {"map-dim": 1}, {"tuning-holdout": 2.0}, {"central-clip": 0}, {"node-timeout": 0},
    {"secure-rng": True, "noise-seed": 3}, {"public-size": 5}, {"dirichlet-alpha": 0}, {"partitioner": "x"},
]  # fmt: skip


def config_cases() -> list[dict[str, Any]]:
    """Every key alone with each bad value of its type, then the combinations and the pairs."""
    from fl.config import DEFAULTS

    cases: list[dict[str, Any]] = []
    for key, default in DEFAULTS.items():
        if isinstance(default, bool):
            values: list[Any] = [True, False, "true"]
        elif isinstance(default, int | float):
            values = [
                v
                for v in _NUMBERS
                if not (isinstance(default, int) and isinstance(v, float) and not (math.isfinite(v) and v.is_integer()))
            ]
        else:
            values = _STRINGS
        cases += [{key: v} for v in values]
    return cases + _COMBOS + [{**a, **b} for a, b in itertools.combinations(_SINGLES, 2)]


def _config() -> list[Any]:
    from fl.config import resolve

    out = []
    for case in config_cases():
        try:
            resolve(case)
            message = "OK"
        except Exception as err:
            message = f"{type(err).__name__}: {err}"
        out.append([repr(case), message])
    return out


def measure(section: str) -> Any:
    return {"audit_run": _audit_run, "audit_mechanism": _audit_mechanism, "compose_worst": _compose_worst,
            "config": _config}[section]()  # fmt: skip


def compare(a: Path, b: Path) -> int:
    """One line per section: identical, or how many items differ (config: the configs whose line changed)."""
    left, right = json.loads(a.read_text())["sections"], json.loads(b.read_text())["sections"]
    status = 0
    for section in SECTIONS:
        x, y = left.get(section), right.get(section)
        if x is None or y is None:
            print(f"{section}: missing in {'the first' if x is None else 'the second'} file")
            status = 1
            continue
        differing = [i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q]
        if not differing and len(x) == len(y):
            print(f"{section}: identical ({len(x)} items)")
            continue
        status = 1
        print(f"{section}: {len(differing)} of {len(x)} items differ (and {abs(len(x) - len(y))} only in one file)")
        if section == "config":
            for i in differing:
                print(f"  {x[i][0]}\n    before: {x[i][1][:110]}\n    after:  {y[i][1][:110]}")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="JSON file for the outputs")
    parser.add_argument("--code", type=Path, help="measure the code of this checkout instead of this one")
    parser.add_argument("--only", nargs="*", choices=SECTIONS, help="these sections only")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two output files")
    parser.add_argument("--section", choices=SECTIONS, help=argparse.SUPPRESS)  # the child process's one section
    args = parser.parse_args(argv)
    if args.section:
        print(json.dumps(measure(args.section), default=str, sort_keys=True))
        return 0
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        parser.error("--out is required unless --compare is given")
    code = (args.code or Path(__file__).resolve().parents[1]).resolve()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    sections: dict[str, Any] = {}
    for section in args.only or SECTIONS:
        print(f"measuring {section}", flush=True)
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--section", section],
            env=env, cwd=code, capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"{section} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        sections[section] = json.loads(done.stdout.strip().splitlines()[-1])
    revision = subprocess.run(["git", "rev-parse", "HEAD"], cwd=code, capture_output=True, text=True).stdout.strip()
    args.out.write_text(json.dumps({"revision": revision, "sections": sections}, indent=1, sort_keys=True))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
