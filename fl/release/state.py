"""A node's own state: its noise secret and draw counters, its ledger of what each user has released
(:mod:`fl.release.ledger`), and the releases it has drawn (kept so that a release is re-sent rather than
drawn again).

The state lives in a Flower ``RecordDict``: in the ClientApp it is the node's ``context.state``, which
persists across the messages of a run and, through ``clients.node_state``, across a resumed run. Nothing
in it ever leaves the node.
"""

from __future__ import annotations

import hashlib
import secrets

import torch
from flwr.app import ConfigRecord, RecordDict

from fl import wire
from fl.release.ledger import NodeLedger
from mechanisms.keystream import SecureGenerator

#: The node's noise secret and draw counter (a ``ConfigRecord``: ``secret``, ``draws``).
NOISE_KEY = "sanitas.noise"


def derived_seed(secret: int, partition_id: int, purpose: str, draw: int) -> int:
    """A 63-bit seed from the node's secret and what it is for (never from data)."""
    material = f"{secret}|{partition_id}|{purpose}|{draw}".encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "little") >> 1


class NodeState:
    """The state a node's releases read and write, over a Flower ``RecordDict`` (``records``; a new, empty
    one by default: a node that has drawn nothing yet)."""

    def __init__(self, records: RecordDict | None = None) -> None:
        self.records = RecordDict() if records is None else records

    def noise(self, noise_seed: int) -> ConfigRecord:
        """This node's noise state: its secret and draw counter, created on first use.

        With ``noise_seed = -1`` (``noise-seed``'s default) the secret comes from the OS CSPRNG
        (``secrets``) and never leaves the node: no message carries it. A fixed ``noise_seed >= 0`` makes
        a simulation reproducible, and whoever knows it (the run config, which the server holds) can replay
        every draw of every node and remove the noise: the run's epsilon is then no guarantee against them
        (``summary.json``'s ``noise`` block and the console say so, :func:`fl.accounting.scope.noise_block`).
        """
        if NOISE_KEY in self.records:
            return wire.config_record(self.records, NOISE_KEY)
        secret = noise_seed if noise_seed >= 0 else secrets.randbits(62)
        noise = ConfigRecord({"secret": int(secret), "draws": 0})
        self.records[NOISE_KEY] = noise
        return noise

    def secret(self, noise_seed: int) -> int:
        """The node's noise secret (:meth:`noise`)."""
        return wire.read_int(self.noise(noise_seed), "secret")

    def sampling_key(self, noise_seed: int) -> bytes:
        """This node's 256-bit key for ``secure-rng``'s cryptographic user sampling, from the OS CSPRNG on
        first use (kept in the node's state beside the secret; never sent)."""
        noise = self.noise(noise_seed)
        if "key" not in noise:
            noise["key"] = secrets.token_hex(32)
            self.records[NOISE_KEY] = noise
        return bytes.fromhex(str(noise["key"]))

    def next_generator(self, noise_seed: int, purpose: str, partition_id: int, secure: bool = False) -> torch.Generator:
        """A fresh generator for the next draw of this node (the draw counter advances): torch's,
        seeded from the node's secret, the draw counter, the partition and the purpose; with ``secure``
        (``secure-rng``) a :class:`~mechanisms.keystream.SecureGenerator` under a fresh 256-bit key
        from the OS CSPRNG, which nothing stores."""
        noise = self.noise(noise_seed)
        draw = wire.read_int(noise, "draws")
        noise["draws"] = draw + 1
        self.records[NOISE_KEY] = noise
        if secure:
            return SecureGenerator()
        return torch.Generator().manual_seed(derived_seed(wire.read_int(noise, "secret"), partition_id, purpose, draw))

    def next_rewrite_draw(self, purpose: str, fresh: bool) -> int:
        """The word-level rewrite draw in force for ``purpose``: draw 0, or with ``fresh`` (fresh noise per
        round) a new draw per call. Advances the counter."""
        key = f"sanitas.word.{purpose}"
        done = wire.read_int(wire.config_record(self.records, key), "draws") if key in self.records else 0
        draw = done if fresh else 0
        self.records[key] = ConfigRecord({"draws": draw + 1 if fresh else 1})
        return draw

    @property
    def ledger(self) -> NodeLedger:
        """The node's own ledger of its users' releases, over the same records (:mod:`fl.release.ledger`):
        what each user has spent and in which release space, enforced by the node whatever the server asks."""
        return NodeLedger(self.records)
