"""The ``sanitas`` entry point exits with main()'s code and flushes what it printed, without Python's
interpreter teardown."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def _entry(*argv: str) -> subprocess.CompletedProcess:
    code = f"import sys; sys.argv = ['sanitas', *{list(argv)!r}]; from simulations.cli import entry; entry()"
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_entry_point_keeps_exit_codes_and_output() -> None:
    helped = _entry("--help")
    assert helped.returncode == 0 and "usage: sanitas" in helped.stdout
    bad = _entry("sweep")
    assert bad.returncode == 2 and "the following arguments are required" in bad.stderr
    missing = _entry("run", "no-such-file.toml")
    assert missing.returncode == 2 and missing.stderr.count("sanitas: error:") == 1


def test_the_help_imports_no_heavy_library() -> None:
    """``sanitas --help`` and the parser of every subcommand import neither torch, numpy, Flower nor the
    datasets library (``sanitas --help`` took 2.9 s importing them; benchmarks/bench_startup.py times it)."""
    import subprocess
    import sys

    code = (
        "import sys, simulations.cli as c; c.parser(); "
        "print(sorted(m for m in ('torch', 'numpy', 'flwr', 'datasets', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout
