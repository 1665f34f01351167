"""Fault injection: which nodes fail in a round, decided the same way on both ends.

``fault-rate`` and ``fault-kind`` make simulated nodes fail on purpose, so that a
run's behaviour under failing nodes is tested rather than hoped for:

* ``raise``: the node raises on receipt of the request (Flower returns an error
  reply); it draws no noise.
* ``timeout``: the node does its work (and draws its noise), then sleeps past
  ``node-timeout``: the server stops waiting and the late reply is never read.
* ``drop-reply``: the node does its work and replies, and the reply is lost on
  the way (the server's grid wrapper discards it).

Whether node ``key`` fails in ``(server_round, stage)`` is a pure function of
``seed``, so the node (which knows its cohort) and the server (which learns the
cohorts at discovery) agree without exchanging anything. A node is identified
by the first training and test user it holds, which both ends know.

The server never relies on knowing the schedule: it sees an error reply, a
missing reply or a reply; the schedule only lets a test check its accounting.
"""

from __future__ import annotations

import hashlib

KINDS = ("raise", "timeout", "drop-reply")
STAGES = ("train", "evaluate")


def node_key(train_users_lo: int, test_users_lo: int) -> str:
    """A node's identity for the fault schedule: where its training and test users start."""
    return f"{int(train_users_lo)}:{int(test_users_lo)}"


def fails(seed: int, server_round: int, stage: str, key: str, rate: float) -> bool:
    """True when the node ``key`` fails at ``stage`` of ``server_round`` (probability ``rate``,
    independently per node, round and stage; a function of ``seed`` only)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    if rate <= 0:
        return False
    digest = hashlib.sha256(f"sanitas-fault|{int(seed)}|{int(server_round)}|{stage}|{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2.0**64 < rate
