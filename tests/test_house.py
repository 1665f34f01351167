"""The house rules a newcomer relies on (issue: a comparison driver one can read): no library module over 600
lines, no driver function over 80 lines. Import circles are refused by import-linter's acyclic_siblings contract
(pyproject.toml, run by CI's lint-imports)."""

from __future__ import annotations

import ast

from tests.conftest import REPO

PACKAGES = ("mechanisms", "fl", "clients", "strategies", "simulations")


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(REPO)): n
        for package in PACKAGES
        for path in (REPO / package).rglob("*.py")
        if (n := len(path.read_text().splitlines())) > 600
    }
    assert not long, long


def test_no_driver_function_is_over_80_lines() -> None:
    long = {}
    for path in (REPO / "simulations" / "drivers").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > 80:
                    long[f"{path.name}:{node.name}"] = lines
    assert not long, long
