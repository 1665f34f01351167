"""What installing Sanitas on a node costs: seconds and megabytes of a fresh environment.

Three ways a SuperNode (or SuperLink) gets the app's dependencies, each into a new, empty folder:

- ``pip``: the README's node install, ``pip install torch==<cpu build>`` then ``pip install <repo>``
  (the base dependencies: no Ray, no test tools) into a new virtual environment.
- ``uv-sync``: exactly what Flower's runtime dependency installation runs in the installed app
  (``uv sync --no-install-project --no-install-package flwr --inexact`` with
  ``UV_PROJECT_ENVIRONMENT``), on the FAB ``flwr build`` makes of the repository. torch comes from
  the ``pytorch-cpu`` index of ``[tool.uv.sources]``; on a machine that cannot reach it,
  ``--cpu-wheel FILE`` stands in for that index (a PEP 503 folder made here around the CPU wheel).
- ``uv-sync-before``: the same ``uv sync`` on the dependencies before this change
  (``--before-rev``, a commit whose ``pyproject.toml`` is read with ``git show``: torch unpinned,
  ``flwr[simulation]``), as Flower ran it for the issue's
  first deployment: the seconds, the folder's size and what it installed (``--dry-run-before``:
  only what it would install, nothing downloaded).

Each result records the seconds, the folder's size (``du``), the number of packages, and whether
any CUDA (``nvidia-*``) package or Ray was installed. Run on an idle machine; the package caches of
pip and uv are left as they are (say which in the output: ``--cold`` empties uv's).

    python benchmarks/bench_node_env.py --out docs/results/deployment/node_env.json \
        --cpu-wheel /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl --before-rev ffd1a0e
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def folder_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return round(int(out.split()[0]) / 1024, 1)


def timed(argv: list[str], **kwargs: Any) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    seconds = round(time.perf_counter() - start, 1)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds, proc


def packages_of(python: Path) -> list[str]:
    out = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True)
    return sorted(line for line in out.stdout.splitlines() if "==" in line)


def summarise(names: list[str]) -> dict[str, Any]:
    lower = [n.lower() for n in names]
    torch = next((n for n in names if n.lower().startswith("torch==")), None)
    return {
        "packages": len(names),
        "torch": torch,
        "cuda_packages": sorted(n for n in names if n.lower().startswith("nvidia")),
        "ray": any(n.startswith("ray==") for n in lower),
    }


def pip_install(work: Path, torch_spec: str) -> dict[str, Any]:
    env_dir = work / "pip-env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    t_torch, _ = timed([str(python), "-m", "pip", "install", "--quiet", torch_spec])
    t_app, _ = timed([str(python), "-m", "pip", "install", "--quiet", str(REPO)])
    names = packages_of(python)
    return {
        "command": f"pip install {torch_spec} && pip install <repo>",
        "seconds": round(t_torch + t_app, 1),
        "seconds_torch": t_torch,
        "megabytes": folder_mb(env_dir),
        **summarise(names),
    }


def fab_folder(work: Path) -> Path:
    """The app as a SuperNode installs it: the FAB of the repository, unpacked."""
    subprocess.run(["flwr", "build", "--app", str(REPO)], cwd=work, check=True, capture_output=True)
    fab = next(work.glob("*.fab"))
    app = work / "app"
    with zipfile.ZipFile(fab) as z:
        z.extractall(app)
    return app


def cpu_index_folder(work: Path, wheel: Path) -> str:
    """A PEP 503 index holding only ``wheel`` (a CPU build of torch), as a ``file://`` URL."""
    folder = work / "cpu-index"
    (folder / "torch").mkdir(parents=True)
    uri = wheel.resolve().as_uri()
    (folder / "index.html").write_text('<a href="torch/">torch</a>\n')
    (folder / "torch" / "index.html").write_text(f'<a href="{uri}">{wheel.name}</a>\n')
    return folder.as_uri()


def uv_sync(work: Path, app: Path, cpu_index: str, dry_run: bool = False) -> tuple[float, str, Path]:
    env_dir = work / ("uv-env-dry" if dry_run else "uv-env")
    argv = [sys.executable, "-m", "uv", "sync", "--python", sys.executable, "--no-install-project"]
    argv += ["--no-install-package", "flwr", "--inexact"]
    if dry_run:
        argv.append("--dry-run")
    if cpu_index:
        argv += ["--index", f"pytorch-cpu={cpu_index}"]  # a named index given here wins over pyproject's
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(env_dir)}
    seconds, proc = timed(argv, cwd=app, env=env)
    return seconds, proc.stdout + proc.stderr, env_dir


def installed_by_uv(log: str) -> list[str]:
    """``name==version`` of each package uv reports as installed (``+ name==version``)."""
    return sorted(m.group(1) for m in re.finditer(r"^\s*\+ (\S+==\S+)", log, flags=re.MULTILINE))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--torch", default="torch==2.13.0", help="the CPU torch pip installs first")
    parser.add_argument("--cpu-wheel", type=Path, help="stands in for the pytorch-cpu index (offline machines)")
    parser.add_argument("--before-rev", default="", help="the commit whose dependencies are 'before'")
    parser.add_argument("--ways", nargs="+", default=["pip", "uv-sync", "uv-sync-before"])
    parser.add_argument("--cold", action="store_true", help="empty uv's cache first")
    parser.add_argument("--dry-run-before", action="store_true", help="resolve the 'before' install only")
    args = parser.parse_args()
    results: dict[str, Any] = {"python": sys.version.split()[0], "cold_uv_cache": args.cold}
    if args.cold:
        subprocess.run([sys.executable, "-m", "uv", "cache", "clean"], check=False, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="node-env-") as tmp:
        work = Path(tmp)
        if "pip" in args.ways:
            results["pip"] = pip_install(work, args.torch)
            print("pip", results["pip"], flush=True)
        if "uv-sync" in args.ways:
            app = fab_folder(work)
            cpu_index = cpu_index_folder(work, args.cpu_wheel) if args.cpu_wheel else ""
            seconds, log, env_dir = uv_sync(work, app, cpu_index)
            names = installed_by_uv(log)
            results["uv-sync"] = {
                "command": "uv sync --no-install-project --no-install-package flwr --inexact (Flower's)",
                "cpu_index": str(args.cpu_wheel or "https://download.pytorch.org/whl/cpu"),
                "seconds": seconds,
                "megabytes": folder_mb(env_dir),
                **summarise(names),
            }
            print("uv-sync", results["uv-sync"], flush=True)
        if "uv-sync-before" in args.ways and args.before_rev:
            before = work / "before"
            before.mkdir()
            show = ["git", "show", f"{args.before_rev}:pyproject.toml"]
            old = subprocess.run(show, cwd=REPO, capture_output=True, text=True, check=True)
            (before / "pyproject.toml").write_text(old.stdout)
            seconds, log, env_dir = uv_sync(work, before, "", dry_run=args.dry_run_before)
            names = installed_by_uv(log)
            results["uv-sync-before"] = {
                "command": "uv sync of the dependencies before (torch unpinned, flwr[simulation])"
                + (" --dry-run" if args.dry_run_before else ""),
                "seconds": seconds,
                "megabytes": None if args.dry_run_before else folder_mb(env_dir),
                **summarise(names),
            }
            print("uv-sync-before", results["uv-sync-before"], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    earlier = json.loads(args.out.read_text()) if args.out.exists() else {}  # the other ways' last results
    args.out.write_text(json.dumps({**earlier, **results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
