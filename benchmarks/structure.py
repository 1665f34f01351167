"""The code's structure in numbers, for any checkout (JSON): what a restructuring promised to change.

Usage: python benchmarks/structure.py [--repo CHECKOUT] [--out FILE]

Counts, over the library packages (``clients``, ``strategies``, ``fl``, ``mechanisms``, ``simulations``;
tests and benchmarks left out):

* ``mode_branches``: comparisons of a mode key (``mode``, ``central-unit`` / ``central_unit``) with a mode
  value (``"local"``, ``"central"``, ``"user"``, ``"node"``), outside the modes' own modules
  (``strategies/modes``, ``clients/modes``, the central and local strategies and node handlers) and
  ``fl.config.mode_name``;
* ``strategy_isinstance``: ``isinstance`` checks against a mode's strategy class outside those modules;
* ``simulations_top_modules``: modules directly in ``simulations/``;
* ``import_circles``: pairs of ``fl`` packages that import each other (through any chain; grimp, the
  graph import-linter uses);
* ``levels_definitions``: module-level assignments of a name ``LEVELS``;
* ``longest_functions`` (the 10 longest, in lines) and ``modules_over_600_lines``.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

PACKAGES = ("clients", "strategies", "fl", "mechanisms", "simulations")
MODE_KEYS = ("mode", "central-unit", "central_unit")
MODE_VALUES = {"local", "central", "user", "node"}
STRATEGY_CLASSES = {"LocalDPAccounting", "CentralDPAccounting", "UserLevelDPFedAvg", "ReleaseTraining"}
#: The modes' own modules: where branching on the mode, or on a mode's strategy class, belongs.
MODE_HOMES = (
    "strategies/modes/",
    "clients/modes/",
    "strategies/local/",
    "strategies/central_user.py",
    "strategies/central_node.py",
    "clients/central_client.py",
    "clients/ldp_client.py",
)


def _sources(repo: Path) -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (repo / pkg).rglob("*.py"))


def _is_mode_key(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in ("mode", "central_unit")
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in MODE_KEYS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value in MODE_KEYS
    return False


def _mode_branches(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq | ast.NotEq):
            sides = [node.left, *node.comparators]
            values = [s.value for s in sides if isinstance(s, ast.Constant)]
            if any(v in MODE_VALUES for v in values) and any(_is_mode_key(s) for s in sides):
                lines.append(node.lineno)
    return lines


def _strategy_isinstance(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)} if len(node.args) > 1 else set()
            if names & STRATEGY_CLASSES:
                lines.append(node.lineno)
    return lines


def _circles(repo: Path) -> list[list[str]]:
    """Pairs of fl packages (and top-level fl modules) that import each other, through any chain."""
    code = (
        "import grimp, itertools, json, sys; sys.path.insert(0, sys.argv[1]);"
        "g = grimp.build_graph('fl');"
        "top = sorted({m.split('.')[1] for m in g.modules if m.count('.') >= 1});"
        "pkgs = ['fl.' + t for t in top];"
        "out = [[a, b] for a, b in itertools.combinations(pkgs, 2)"
        " if g.chain_exists(a, b, as_packages=True) and g.chain_exists(b, a, as_packages=True)];"
        "print(json.dumps(out))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(repo)], cwd=repo, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"grimp failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def measure(repo: Path) -> dict[str, Any]:
    branches, isinstances, levels, functions, long_modules = {}, {}, [], [], {}
    for path in _sources(repo):
        rel = path.relative_to(repo).as_posix()
        text = path.read_text()
        tree = ast.parse(text)
        home = rel.startswith(MODE_HOMES)
        if not home:
            deciding = [  # fl.config.mode_name decides the mode: its comparison is the decision, not a branch
                range(f.lineno, f.end_lineno + 1)
                for f in ast.walk(tree)
                if isinstance(f, ast.FunctionDef) and f.name == "mode_name"
            ]
            b = [n for n in _mode_branches(tree) if not any(n in r for r in deciding)]
            if b:
                branches[rel] = b
            i = _strategy_isinstance(tree)
            if i:
                isinstances[rel] = i
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "LEVELS" for t in targets):
                    levels.append(f"{rel}:{node.lineno}")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.name}"))
        lines = text.count("\n")
        if lines > 600:
            long_modules[rel] = lines
    functions.sort(reverse=True)
    return {
        "mode_branches": sum(len(v) for v in branches.values()),
        "mode_branches_by_module": branches,
        "strategy_isinstance": sum(len(v) for v in isinstances.values()),
        "strategy_isinstance_by_module": isinstances,
        "simulations_top_modules": len([p for p in (repo / "simulations").glob("*.py") if p.name != "__init__.py"]),
        "import_circles": _circles(repo),
        "levels_definitions": levels,
        "longest_functions": [{"lines": n, "function": f} for n, f in functions[:10]],
        "modules_over_600_lines": dict(sorted(long_modules.items(), key=lambda kv: -kv[1])),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    repo = Path(args.repo).resolve()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    result = {"repo_commit": commit, **measure(repo)}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
