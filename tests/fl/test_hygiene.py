"""CI hygiene of the test code itself, checked statically (by reading the test sources):

* every random test input comes from a seeded generator, never from a global RNG (whose state
  depends on which tests ran before, so a failure could not be reproduced alone);
* no unit test reads a wall clock (timings belong in benchmarks/, e.g. benchmarks/bench_shuffle.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

TESTS = REPO / "tests"
# tests/mechanisms/*.py (outside words/) is seeded separately; add it here once it is.
SEEDED = [TESTS]  # every test module, helpers included

TORCH_DRAWS = {
    "rand",
    "randn",
    "randint",
    "randperm",
    "normal",
    "bernoulli",
    "multinomial",
    "poisson",
    "rand_like",
    "randn_like",
    "randint_like",
}
INPLACE_DRAWS = {"uniform_", "normal_", "random_", "exponential_", "bernoulli_", "cauchy_", "geometric_", "log_normal_"}
SEEDABLE = {"default_rng", "Generator", "RandomState", "SeedSequence", "Random"}  # need a seed argument
# Constructors that initialise parameters from the global torch RNG.
PARAMETERISED = {
    "Linear",
    "Bilinear",
    "Embedding",
    "EmbeddingBag",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "RNN",
    "LSTM",
    "GRU",
    "MultiheadAttention",
    "ServerModel",
}
CLOCKS = {"time", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time", "time_ns"}


def _dotted(node: ast.AST) -> str:
    """``np.random.normal`` for a name or attribute chain; calls and other expressions in it as ``()``."""
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_dotted(node.func)}()"
    return node.id if isinstance(node, ast.Name) else "()"


def _generator_given(call: ast.Call, keyword: str = "generator") -> bool:
    return any(
        k.arg == keyword and not (isinstance(k.value, ast.Constant) and k.value.value is None) for k in call.keywords
    )


def global_rng_draws(source: str) -> list[str]:
    """``line: code`` of every draw from a global RNG (torch, numpy, random, torch.distributions, scipy),
    every unseeded generator, and every parameterised torch module built without torch.manual_seed earlier
    in the same function (its initial weights come from the global RNG)."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    seeded_names: set[str] = set()  # rng = random.Random(0) / np.random.default_rng(0): rng.sample() is fine
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args:
            if _dotted(node.value.func).rsplit(".", 1)[-1] in SEEDABLE:
                seeded_names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.ImportFrom) and node.module in ("random", "numpy.random", "torch"):
            drawn = [a.name for a in node.names if a.name in TORCH_DRAWS or node.module != "torch"]
            if [a for a in drawn if a not in SEEDABLE]:
                found.append((node.lineno, ast.unparse(node)))
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        head, _, last = name.rpartition(".")
        if name in {f"torch.{f}" for f in TORCH_DRAWS} or (last in INPLACE_DRAWS and head):
            bad = not _generator_given(node)
        elif head in ("np.random", "numpy.random", "random"):
            bad = last not in SEEDABLE or not (node.args or node.keywords)
        elif last in ("sample", "rsample") and head:
            bad = head not in seeded_names  # torch.distributions draws take no generator at all
        elif last == "rvs":
            bad = not _generator_given(node, "random_state")
        elif last in PARAMETERISED:
            inside = [f for f in functions if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)]
            bad = not any(
                _dotted(c.func) == "torch.manual_seed" and c.lineno <= node.lineno
                for f in inside
                for c in ast.walk(f)
                if isinstance(c, ast.Call)
            )
        else:
            bad = False
        if bad:
            found.append((node.lineno, ast.unparse(node)))
    return [f"{line}: {code}" for line, code in sorted(found)]


def wall_clock_reads(source: str) -> list[str]:
    """``line: code`` of every call of a clock (time.time(), perf_counter(), ..., datetime.now())."""
    tree = ast.parse(source)
    clocks = {f"time.{c}" for c in CLOCKS} | {
        f"{m}.{f}" for m in ("datetime", "datetime.datetime") for f in ("now", "utcnow", "today")
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            clocks |= {a.asname or a.name for a in node.names if a.name in CLOCKS}
    return [
        f"{n.lineno}: {ast.unparse(n)}" for n in ast.walk(tree) if isinstance(n, ast.Call) and _dotted(n.func) in clocks
    ]


def _sources(roots: list[Path]) -> list[Path]:
    return sorted({p for r in roots for p in ([r] if r.is_file() else r.rglob("*.py"))})


def test_every_random_test_input_is_seeded() -> None:
    offenders = {
        str(p.relative_to(REPO)): draws for p in _sources(SEEDED) if (draws := global_rng_draws(p.read_text()))
    }
    assert offenders == {}


def test_no_unit_test_reads_a_wall_clock() -> None:
    """Integration tests may bound a subprocess with a timeout; no test asserts on elapsed time."""
    offenders = {
        str(p.relative_to(REPO)): calls for p in _sources([TESTS]) if (calls := wall_clock_reads(p.read_text()))
    }
    assert offenders == {}


@pytest.mark.parametrize(
    "code",
    [
        "x = torch.randn(3, 4)",
        "x = torch.randint(0, 2, (3,), generator=None)",
        "x = torch.empty(3).uniform_()",
        "x = np.random.normal(size=3)",
        "rng = np.random.default_rng()",
        "import random\nx = random.choice('ab')",
        "from numpy.random import rand",
        "p = torch.distributions.Dirichlet(torch.ones(6)).sample((5,))",
        "z = stats.laplace(scale=1).rvs(10)",
        "def test():\n    model = ServerModel(8, 32, 16, 2)",
        "def test():\n    layer = nn.Linear(3, 4)\n    torch.manual_seed(0)",
    ],
)
def test_the_seeding_check_has_power(code: str) -> None:
    assert global_rng_draws(code)


@pytest.mark.parametrize(
    "code",
    [
        "x = torch.randn(3, 4, generator=gen)",
        "x = np.random.default_rng(0).normal(size=3)",
        "rng = random.Random(0)\nx = rng.sample(range(9), 2)",
        "z = stats.laplace(scale=1).rvs(10, random_state=np.random.default_rng(0))",
        "d = stats.kstest(z, stats.laplace(scale=b).cdf)",
        "def test():\n    torch.manual_seed(0)\n    model = ServerModel(8, 32, 16, 2)",
    ],
)
def test_the_seeding_check_accepts_seeded_draws(code: str) -> None:
    assert global_rng_draws(code) == []


def test_the_clock_check_has_power() -> None:
    assert wall_clock_reads("import time\nt0 = time.perf_counter()") == ["2: time.perf_counter()"]
    assert wall_clock_reads("from time import monotonic as now\nt0 = now()") == ["2: now()"]
    assert wall_clock_reads("import datetime\nt0 = datetime.datetime.now()") == ["2: datetime.datetime.now()"]
    assert wall_clock_reads("import time\ntime.sleep(1)") == []
