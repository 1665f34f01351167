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
* ``longest_functions`` (the 10 longest, in lines) and ``modules_over_600_lines``;
* ``config_string_reads``: reads of the run config by a key (``cfg["map-in"]``, ``cfg["seed"]``,
  ``cfg.get("map-in")``, ``cfg[f"{channel}-epsilon"]``, ``cfg[k] for k in KEYS``; not writes, not Flower's
  ``node_config``) in ``fl/`` (outside ``fl/config``), ``clients/`` and ``strategies/``;
* ``functions_taking_run_config``: functions in ``fl/`` (outside ``fl/config``) with a parameter annotated
  ``RunConfig`` or named ``cfg``;
* ``mechanism_name_tests``: outside ``mechanisms/``, comparisons of a ``.name`` with a string or a
  ``*_MECHANISMS`` tuple, and module-level ``*_MECHANISMS`` tuples;
* ``module_import_circles``: modules of the library that import each other through any chain (grimp,
  function-level imports included), each circle once, named by its two ends.
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


CONFIG_READ_PACKAGES = ("fl/", "clients/", "strategies/")


#: The run-config keys spelled without a hyphen (every other key has one).
ONE_WORD_KEYS = frozenset({"dataset", "partitioner", "seed", "encoder", "mode", "strategy", "device", "backend"})


def _kebab_key(node: ast.AST, receiver: ast.AST) -> bool:
    """A key as run-config keys are spelled: a string or f-string with a hyphen in its literal part, one of the
    one-word keys, or a variable (``cfg[k] for k in KEYS``, ``cfg[self.mechanism_key]``: keys chosen at run
    time) where the receiver is spelled exactly ``cfg`` or ``config`` (a JSON file's ``pooling_config[key]``
    is not the run config)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and (
            ("-" in node.value and " " not in node.value) or node.value in ONE_WORD_KEYS
        )
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.Constant) and "-" in str(v.value) for v in node.values)
    name = (
        receiver.id if isinstance(receiver, ast.Name) else receiver.attr if isinstance(receiver, ast.Attribute) else ""
    )
    return isinstance(node, ast.Name | ast.Attribute) and name in ("cfg", "config")


def _config_reads(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)  # a write (a message's config record) reads nothing
            and _kebab_key(node.slice, node.value)
            and _is_config(node.value)
        ):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and _is_config(node.func.value)
            and node.args
            and _kebab_key(node.args[0], node.func.value)
        ):
            lines.append(node.lineno)
    return lines


def _takes_run_config(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
    return any(
        a.arg == "cfg" or (a.annotation is not None and "RunConfig" in ast.unparse(a.annotation)) for a in params
    )


def _is_config(node: ast.AST) -> bool:
    """The receiver of a read is the run config: a name or attribute spelled ``cfg``/``config`` (``self.cfg``),
    except Flower's node config (``node_config``: a SuperNode's own kebab-case settings, not the run's)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return ("cfg" in name or "config" in name) and "node_config" not in name


def _name_tests(tree: ast.Module) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(isinstance(x, ast.Attribute) and x.attr == "name" for x in sides)
            other = any(
                (isinstance(x, ast.Constant) and isinstance(x.value, str))
                or (isinstance(x, ast.Name) and x.id.endswith("_MECHANISMS"))
                for x in sides
            )
            if named and other:
                lines.append(node.lineno)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id.endswith("_MECHANISMS") and isinstance(node.value, ast.Tuple)
            for t in node.targets
        ):
            lines.append(node.lineno)
    return sorted(lines)


def _module_circles(repo: Path) -> list[list[str]]:
    """Import circles between modules of the library packages: the strongly connected components (of
    more than one module) of the graph of direct imports, function-level imports included (grimp)."""
    code = (
        "import grimp, json, sys; sys.path.insert(0, sys.argv[1]);"
        f"g = grimp.build_graph(*{list(PACKAGES)!r});"
        "print(json.dumps({m: sorted(b for b in g.find_modules_directly_imported_by(m) if b in g.modules)"
        " for m in g.modules}))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(repo)], cwd=repo, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"grimp failed: {done.stderr[-2000:]}")
    edges: dict[str, list[str]] = json.loads(done.stdout)
    # Kosaraju: finishing order on the graph, then components on the reversed graph.
    order: list[str] = []
    seen: set[str] = set()
    for root in sorted(edges):
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(edges[root]))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                order.append(node)
                stack.pop()
            elif child not in seen:
                seen.add(child)
                stack.append((child, iter(edges.get(child, []))))
    reverse: dict[str, list[str]] = {m: [] for m in edges}
    for m, targets in edges.items():
        for t in targets:
            reverse.setdefault(t, []).append(m)
    done_: set[str] = set()
    circles = []
    for root in reversed(order):
        if root in done_:
            continue
        component, todo = [], [root]
        done_.add(root)
        while todo:
            node = todo.pop()
            component.append(node)
            for n in reverse.get(node, []):
                if n not in done_:
                    done_.add(n)
                    todo.append(n)
        if len(component) > 1:
            circles.append(sorted(component))
    return sorted(circles)


def measure(repo: Path) -> dict[str, Any]:
    branches, isinstances, levels, functions, long_modules = {}, {}, [], [], {}
    reads: dict[str, list[int]] = {}
    takers: list[str] = []
    name_tests: dict[str, list[int]] = {}
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
        if rel.startswith(CONFIG_READ_PACKAGES) and not rel.startswith("fl/config/") and (r := _config_reads(tree)):
            reads[rel] = r
        if rel.startswith("fl/") and not rel.startswith("fl/config/"):
            takers += [
                f"{rel}:{f.name}"
                for f in ast.walk(tree)
                if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and _takes_run_config(f)
            ]
        if not rel.startswith("mechanisms/") and (t := _name_tests(tree)):
            name_tests[rel] = t
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
        "config_string_reads": sum(len(v) for v in reads.values()),
        "config_string_reads_by_module": reads,
        "functions_taking_run_config": len(takers),
        "functions_taking_run_config_list": takers,
        "mechanism_name_tests": sum(len(v) for v in name_tests.values()),
        "mechanism_name_tests_by_module": name_tests,
        "module_import_circles": _module_circles(repo),
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
