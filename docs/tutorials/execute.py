"""Execute the tutorial notebooks, top to bottom, as a check.

::

    SANITAS_DATA_DIR=../shared/data python docs/tutorials/execute.py [NOTEBOOK ...] [--timeout S] [--executed DIR]

Runs every ``*.ipynb`` in this folder (or the notebooks named) with nbclient, each in a fresh
``python3`` kernel of *this* interpreter (``sys.executable``; a ``python3`` kernelspec installed
elsewhere is not used), with the notebook's folder as working directory, as Jupyter does. Every
cell has ``--timeout`` seconds (default 900).

The committed notebooks carry no outputs: a notebook that has some fails the check (clear them,
e.g. ``jupyter nbconvert --clear-output --inplace``), and the executed notebook is never written
back. ``--executed DIR`` writes the executed copies there instead (DIR must lie outside
``docs/``; ``results/`` is git-ignored).

Prints one line per notebook with its wall time; exits 1 on the first failure with one line naming
the notebook and the cell (its number among all cells, from 1) and the error.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent


class ThisInterpreterClient(NotebookClient):
    """A client whose ``python3`` kernel is ipykernel on ``sys.executable``: with no kernelspec
    folders to search, jupyter_client falls back to ipykernel's own spec for the running Python."""

    def create_kernel_manager(self) -> KernelManager:
        self.km = self.kernel_manager_class(
            kernel_name="python3",
            kernel_spec_manager=KernelSpecManager(kernel_dirs=[]),
            config=self.config,
        )
        return self.km


def has_outputs(nb: nbformat.NotebookNode) -> bool:
    """Whether any code cell of ``nb`` holds outputs or an execution count."""
    return any(c.cell_type == "code" and (c.get("outputs") or c.get("execution_count")) for c in nb.cells)


def short(error: BaseException) -> str:
    """One line for an error: a cell's exception name and value, or the error itself."""
    if isinstance(error, CellExecutionError) and error.ename:
        text = f"{error.ename}: {error.evalue}"
    else:
        text = f"{type(error).__name__}: {error}"
    return " ".join(text.split())[:500]


def execute(path: Path, timeout: int, executed: Path | None) -> None:
    """Run notebook ``path``; raises ``RuntimeError`` with one line naming it and the failing cell."""
    name = path.relative_to(DOCS.parent) if path.is_relative_to(DOCS.parent) else path
    nb = nbformat.read(path, as_version=4)
    if has_outputs(nb):
        raise RuntimeError(f"{name}: the committed notebook has outputs; clear them before committing")
    current = {"index": None}

    def on_cell_start(cell: nbformat.NotebookNode, cell_index: int) -> None:
        current["index"] = cell_index

    client = ThisInterpreterClient(
        nb,
        timeout=timeout,
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_start=on_cell_start,
    )
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError, RuntimeError) as err:
        where = f"cell {current['index'] + 1}" if current["index"] is not None else "kernel start"
        raise RuntimeError(f"{name}: {where}: {short(err)}") from err
    finally:
        if executed is not None:
            executed.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, executed / path.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Execute the tutorial notebooks (nothing is written back).")
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: every *.ipynb here)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    parser.add_argument("--executed", type=Path, help="write the executed copies to this folder (not under docs/)")
    args = parser.parse_args(argv)
    executed = args.executed.resolve() if args.executed else None
    if executed is not None and executed.is_relative_to(DOCS):
        parser.error(f"--executed {args.executed}: executed notebooks must not go under {DOCS}")
    notebooks = [p.resolve() for p in args.notebooks] or sorted(HERE.glob("*.ipynb"))
    if not notebooks:
        print(f"no notebooks in {HERE}", file=sys.stderr)
        return 1
    started = time.perf_counter()
    for path in notebooks:
        began = time.perf_counter()
        try:
            execute(path, args.timeout, executed)
        except RuntimeError as err:
            print(f"FAILED {err}", file=sys.stderr)
            return 1
        print(f"ok {path.name}: {time.perf_counter() - began:.1f} s", flush=True)
    print(f"{len(notebooks)} notebook(s) executed in {time.perf_counter() - started:.1f} s wall time", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
