"""``sanitas sweep``: one ``sanitas run`` per point of a grid of config values, once per seed.

::

    sanitas sweep CONFIG.toml --grid KEY=V1,V2,... [--grid KEY2=...] [--also --grid ...]
                  [--seeds 1,2,3] [--set key=value ...] --out DIR [--name NAME] [--timeout SECONDS]

Grid syntax
-----------
``--grid KEY=V1,V2,...`` splits at the first ``=``; the value list is split on
commas that are *outside* quotes (``"..."``, ``'...'``) and brackets
(``[...]``, ``{...}``), and each item parses as TOML exactly like a ``--set``
value (:func:`fl.config.parse_value`): ``2`` is an integer, ``2.5`` a float,
``true`` a boolean, ``"purkayastha"`` a string. An item that is not valid TOML
is taken as a bare string (``random`` = ``"random"``), but quote strings that
contain commas or could read as TOML (``"true"``, ``"10"``)::

    --grid 'sentence-mechanism="purkayastha","planar_laplace"' --grid sentence-epsilon=2,6,10
    --grid "sentence-options='out_dim = 64, variant = \"paper\"','variant = \"exact\"'"

Runs are the Cartesian product of the ``--grid`` keys, in the order given (the
last key varies fastest). ``--also`` closes the current product and starts a
new one; the sweep runs the union of the products, in order (e.g. a private
grid ``--also`` non-private references that need no epsilon axis). A key may
not appear twice in one product, nor in both ``--set`` and ``--grid``.

Seeds
-----
``--seeds 1,2,3`` (distinct non-negative integers) runs every grid point once
per seed, the seeds of a point one after another; each run has ``seed`` *and*
``noise-seed`` set to its seed (paired, not crossed, as in ``sanitas compare``:
the data subsample and split, the users' partition, the model's initialisation
and the mechanisms' noise all change with it). The run name ends in
``__seed=<seed>``. ``seed`` or ``noise-seed`` in ``--grid`` or ``--set``
together with ``--seeds`` is an error (the config file's values are simply
overridden). Without ``--seeds`` every point runs once, at the config's own
``seed`` and ``noise-seed``.

The runs share the encoder's embedding cache (``cache-dir``): it is keyed by
(encoder, text), not by seed or epsilon, so a text is encoded once for the
whole sweep. A seed that draws other documents (``train-size``/``test-size``
subsamples, ``public-fraction`` and ``test-fraction`` splits are seeded)
encodes those new documents once, on its first run.

Output
------
Each run is ``sanitas run CONFIG --set ... --out <out>/<name>``, its config resolved once here and
executed by the runner (:mod:`simulations.drivers.runner`) in a warm worker
process that serves one point after another (:mod:`simulations.runtime.warm`: imports, datasets and
caches load once; a failing point fails that run only, a point that kills its worker is retried
once in a fresh one; ``--jobs N`` runs N points at once) and writes
``<out>/<name>/<run-name>/``; the run name is ``key=value`` pairs joined by
``__`` (``sentence-mechanism=purkayastha__sentence-epsilon=2__seed=1``). The
process's output goes to ``<out>/<name>/logs/<run-name>.log`` and its outcome
to ``logs/<run-name>.status.json``. A run whose folder already holds
``summary.json`` is skipped (resume, seed by seed); a failed or interrupted run
is run again (a half-written folder is first moved to ``<out>/<name>/incomplete/``).

Tables, rebuilt from the folders after every run, in ``<out>/<name>/``:

* ``sweep.csv`` / ``sweep.jsonl``: one row per run (grid values, ``seed`` and
  ``noise-seed`` when seeded, ``point``: the run's grid point, metrics);
* ``sweep_summary.csv`` / ``sweep_summary.jsonl``: one row per grid point
  (:func:`summarize`): ``n`` finished runs of ``planned``, ``seeds``,
  ``<metric>_mean`` and ``<metric>_sd`` (sample sd, ddof = 1; empty when n < 2,
  and then ``one_seed`` is true) of accuracy, macro-F1, clean accuracy, best
  accuracy and wall time; the epsilon columns once (they do not depend on the
  seed; ``epsilons_differ`` flags a point whose seeds disagree, and the column
  then holds the largest value, the guarantee every seed's run meets);
* ``accuracy_vs_epsilon.png``: mean +- sd per point, n in the legend (and at the
  points when it varies along a line), a one-seed point as a hollow marker.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fl import config as config_mod
from simulations.drivers.grid import SEED_KEYS, Run, expand, grid_keys, parse_grid, parse_seeds
from simulations.drivers.runner import execute, resolve_runs
from simulations.drivers.sweep_tables import print_findings
from simulations.runtime.overrides import load_with_overrides, override_key
from simulations.tracking.tracker import for_command


def check_runs(config: str, runs: Sequence[Run], sets: Sequence[str], sweep_dir: Path) -> dict[str, Any]:
    """Every run's config, resolved once in this process (:func:`simulations.drivers.runner.resolve_runs`), so a
    bad grid value stops the sweep before any run; returns them by run name.

    Raises ``ConfigError`` naming the run and the problem, on a key in both ``--set`` and ``--grid``,
    or on ``seed``/``noise-seed`` in ``--set`` of a seeded sweep.
    """
    set_keys = {override_key(item) for item in sets}
    if any(r.seed is not None for r in runs):
        seeded = sorted(set_keys & set(SEED_KEYS))
        if seeded:
            raise config_mod.ConfigError(
                f"--seeds sets {' and '.join(SEED_KEYS)} of every run; remove {seeded} from --set"
            )
    clash = sorted(set_keys & set(grid_keys(runs)))
    if clash:
        raise config_mod.ConfigError(f"keys both in --set and --grid: {clash}")
    return resolve_runs(config, runs, sets, sweep_dir)


def sweep(
    config: str,
    blocks: Sequence[Sequence[str]],
    sets: Sequence[str],
    out: str,
    name: str | None = None,
    timeout: float | None = None,
    progress: bool = True,
    seeds: str | Sequence[Any] | None = None,
    attacks: Sequence[str] = (),
    jobs: int = 1,
    track: Sequence[str] = (),
    tracking_uri: str | None = None,
    tracked: bool = True,
) -> int:
    """The ``sanitas sweep`` command: parse, resolve every run's config once, run them
    (:func:`simulations.drivers.runner.execute`), report (and, with ``attacks``, attack every finished run:
    ``simulations.analyses.attack``).

    ``blocks`` are the ``--grid`` specs of each product (split at ``--also``); ``seeds`` (``"1,2,3"``
    or a list; ``None``: one run per point at the config's seeds) runs each point once per seed.
    ``track``/``tracking_uri`` (with the config's ``track`` key): the runs logged afterwards as one parent
    with a nested run each (:mod:`simulations.tracking`); ``tracked = False`` leaves that to the caller
    (``sanitas reproduce``). Returns 0 when every run has a summary, 1 otherwise.
    """
    blocks = [b for b in blocks if b]
    if not blocks:
        raise config_mod.ConfigError("sweep needs at least one --grid KEY=V1,V2,...")
    seed_list = parse_seeds(seeds) if seeds is not None else None
    runs = expand([[parse_grid(spec) for spec in block] for block in blocks], seed_list)
    sweep_dir = Path(out).expanduser().resolve() / (name or Path(config).stem)
    resolved = check_runs(config, runs, sets, sweep_dir)
    tracking = for_command(track, tracking_uri, load_with_overrides(config, sets), out) if tracked else None
    per_seed = f" ({len(runs) // len(seed_list)} points x {len(seed_list)} seeds)" if seed_list else ""
    print(f"sanitas: sweep of {len(runs)} runs{per_seed} into {sweep_dir}", flush=True)
    rows = execute(config, runs, sets, sweep_dir, resolved, jobs, timeout, progress)
    failed = [r["run_name"] for r in rows if r["status"] != "ok"]
    print_findings(runs, sweep_dir)
    print(
        f"sanitas: {len(rows) - len(failed)}/{len(rows)} runs done; tables {sweep_dir / 'sweep.csv'} "
        f"(per run) and {sweep_dir / 'sweep_summary.csv'} (per point, mean +- sd over seeds)",
        flush=True,
    )
    if failed:
        print(f"sanitas: not done: {', '.join(failed)}", file=sys.stderr, flush=True)
    if attacks:
        from simulations.analyses.attack import attack_folder

        attack_folder(sweep_dir, attacks)
        print(f"sanitas: attacks in {sweep_dir / 'attacks.csv'}", flush=True)
    if tracking is not None:
        from simulations.tracking import track_runs

        group = {"config": config, "grid": " ".join(s for b in blocks for s in b), "sets": " ".join(sets)}
        group["seeds"] = ",".join(str(s) for s in seed_list or [])
        tags = {"sanitas.command": "sweep"}
        track_runs(tracking, [sweep_dir / r.name for r in runs], sweep_dir.name, sweep_dir, group, tags)
    return 1 if failed else 0
