"""A simulated node's own saved state, so that a resumed run continues each node where it was.

After every request it answers, a node saves its ``context.state`` (noise secret and
draw counters, cached releases, spent budgets, the document level's public material)
to ``<run>/nodes/node-<partition>/r<round>-<stage>.pkl``. In a resumed run every
request carries ``resumed-from = R`` (``strategies.checkpoint``); a node whose state
is empty (a new simulation) then loads its newest snapshot of a round <= R: its state
at the end of round R, when the server's checkpoint was taken. Requests of round
R + 1 that it answered before the crash are thus forgotten on both ends.

The folder stands for each device's own storage: it holds the node's secret, so it
lives only while the run is incomplete (``fl.reporting.results.RunWriter.finish`` removes it).
Only the newest snapshot of a round <= R and those of later rounds are ever needed,
so older ones are pruned.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Mapping
from pathlib import Path

from flwr.app import ConfigRecord, Context, Message

from fl import wire
from fl.config import OutputConfig, RunConfig
from fl.reporting.results import write_atomic

RESUMED_FROM = "resumed-from"  # strategies.checkpoint.RESUMED_FROM (clients may not import strategies)
RESTORED_KEY = "sanitas.restored"
#: Each snapshot is on disk (fsync) before the node replies. A runtime that runs many nodes in one
#: process (``simulations.runtime.local_runtime``) turns this off and flushes a round's snapshots with one
#: ``os.sync()`` before the replies reach the server, which then saves its own checkpoint: the same
#: order on disk (nodes' state, then the server's), without a disk flush per node.
SYNC_EACH_SNAPSHOT = True
STAGES = ("train", "evaluate")
#: The digest of each node folder's newest snapshot written by this process.
_last_saved: dict[Path, bytes] = {}


def node_dir(output: OutputConfig, partition_id: int) -> Path | None:
    """Where this node keeps its snapshots; None when the run has no fixed folder name."""
    if not output.run_name:
        return None
    return Path(output.out_dir).expanduser().resolve() / output.run_name / "nodes" / f"node-{partition_id}"


def _round_of(msg: Message) -> int:
    request: Mapping[str, object] = wire.config_record(msg.content, wire.CONFIG) if wire.CONFIG in msg.content else {}
    return wire.read_int(request, "server-round", 0)


def _snapshots(folder: Path) -> list[tuple[int, int, Path]]:
    """(round, stage order, path) of the saved snapshots, oldest first."""
    out = []
    for path in folder.glob("r*-*.pkl"):
        head, stage = path.stem[1:].split("-", 1)
        if stage in STAGES:
            out.append((int(head), STAGES.index(stage), path))
    return sorted(out)


def restore(msg: Message, context: Context, cfg: RunConfig, partition_id: int) -> None:
    """In a resumed run, load this node's state as of the end of round ``resumed-from`` (once)."""
    request: Mapping[str, object] = wire.config_record(msg.content, wire.CONFIG) if wire.CONFIG in msg.content else {}
    resumed_from = wire.read_int(request, RESUMED_FROM, 0)
    if resumed_from <= 0 or RESTORED_KEY in context.state:
        return
    folder = node_dir(cfg.output, partition_id)
    saved = [s for s in _snapshots(folder) if s[0] <= resumed_from] if folder and folder.is_dir() else []
    if saved:
        # The node's own file, written by save() below (not input from anyone else).
        state = pickle.loads(saved[-1][2].read_bytes())
        for key in list(state.keys()):
            context.state[key] = state[key]
    context.state[RESTORED_KEY] = ConfigRecord({"from-round": resumed_from})


def save(msg: Message, context: Context, cfg: RunConfig, partition_id: int, stage: str) -> None:
    """Snapshot ``context.state`` after answering ``msg`` and prune what a resume can no longer need."""
    folder = node_dir(cfg.output, partition_id)
    server_round = _round_of(msg)
    if folder is None or server_round <= 0:
        return
    # A model kept for the next request (wire.HELD_MODEL) is not state to resume: a resumed server
    # sends the model again.
    data = pickle.dumps({k: v for k, v in context.state.items() if k != wire.HELD_MODEL})
    digest = hashlib.sha256(data).digest()
    if _last_saved.get(folder) == digest and folder.is_dir():
        # The state is the one already on disk: the newest snapshot of a round <= R stays the node's
        # state at the end of round R, so there is nothing to write (nor to prune). A user-level central
        # node's state never changes after its first reply: 2 files a node a round saved.
        return
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"r{server_round:05d}-{stage}.pkl", data, sync=SYNC_EACH_SNAPSHOT)
    _last_saved[folder] = digest
    # A resume restarts after round R >= server_round - 1: keep the newest snapshot of a round
    # <= server_round - 1 and everything later.
    snaps = _snapshots(folder)
    older = [s for s in snaps if s[0] <= server_round - 1]
    for s in older[:-1]:
        s[2].unlink(missing_ok=True)
