"""``sanitas config-reference``: regenerate the run-config block of ``pyproject.toml`` and
``docs/configuration.md`` from the key declaration (:mod:`fl.config.reference`), or check them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from simulations.cli.options import existing_dir

NAME = "config-reference"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="regenerate (or --check) pyproject.toml's run-config block and docs/configuration.md",
        description="Write the [tool.flwr.app.config] block of REPO/pyproject.toml and REPO/docs/configuration.md "
        "from the key declaration in fl/config/keys.py; with --check, write nothing and exit 1 if either differs.",
    )
    p.add_argument("--repo", type=existing_dir, default=".", help="the repository root (default: here)")
    p.add_argument("--check", action="store_true", help="compare only; exit 1 when a file is out of date")


def handle(args: argparse.Namespace) -> int:
    from fl.config import reference

    repo = Path(args.repo)
    pyproject, page = repo / "pyproject.toml", repo / "docs" / "configuration.md"
    if not pyproject.is_file():
        raise FileNotFoundError(f"--repo {args.repo!r}: no pyproject.toml there")
    if args.check:
        stale = [
            p
            for p, want in (
                (pyproject, reference.with_pyproject_block(pyproject.read_text())),
                (page, reference.markdown()),
            )
            if not p.is_file() or p.read_text() != want
        ]
        for path in stale:
            print(f"{path} is out of date: run sanitas config-reference")
        return 1 if stale else 0
    for path in reference.write(repo):
        print(f"wrote {path}")
    return 0
