"""A node's own ledger of what it has released: the guarantee is a property of what leaves the device, so
the node, not the server, decides whether a user may release again.

Per population (``"train"``, ``"test"``) and per user, the ledger keeps the pure-LDP epsilon and the delta
the user's fresh releases have spent, composed as the server's ledger composes them
(``fl.accounting.PrivacyLedger``: basic composition of each release's guarantee, its ``Guarantee.as_ldp()``
epsilon and delta added, a word-level release counting its ``units``), how many rows were drawn for the
user, and the release space they were drawn in (a digest of M1 and of the document setup,
``fl.maps.input_map.map_version``). It lives in the node's state (:class:`fl.release.state.NodeState`: a
Flower ``context.state``, which persists across the rounds of a run on a node, in simulation and in
deployment, and is saved with the node's snapshots, ``clients.node_state``) and nothing in it ever leaves
the node. It is never cleared: a new map does not reset it (the release cache is reset, not the ledger).

:meth:`NodeLedger.admit` applies the rules to the fresh draws a request would cause, before any noise is
drawn (``fl.release.draw.release``):

1. **Once per user** (``fresh-noise-per-round = false``): a user who has released is never drawn for
   again: a repeated request is answered from the release cache (the same bytes, at no cost) and, when
   the cache no longer holds the user's release (a new map or document setup since), the draw is refused.
   Users who never released may release under any map (``cohorts`` > 1: later cohorts are other users).
   With ``map-in = "leaky"`` (no local-DP guarantee: the node itself sends unsanitized gradients of M1,
   which the server updates every round) a release in a *new* release space is admitted and composed;
   a second draw in the space of the user's latest draw is still refused.
2. **Budget** (``max-epsilon`` > 0): a draw that would take its user's composed epsilon (embedding and
   label, over every earlier fresh release) past ``max-epsilon`` is refused. ``max-epsilon = 0`` is the
   config's "no budget" (``fl.config.release_keys``): no draw is refused for its cost, and rule 1 still
   holds.
3. **Fresh noise per round** (``fresh-noise-per-round = true``): repeated releases are admitted and
   composed, under rule 2.

A refused draw raises nothing and leaves no trace of the user's data: it is a count, which the node's
reply reports as ``refused-releases``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fl import wire
from fl.accounting.charges import Charge

#: ``<LEDGER_KEY>.<population>``: an ``ArrayRecord`` of the users who released (sorted) and their spend;
#: ``<LEDGER_KEY>.spaces``: a ``ConfigRecord`` listing the release spaces the users' ``space`` index.
LEDGER_KEY = "sanitas.ledger"
#: Slack on the budget comparison: a sum of float costs equal to the budget is within it.
BUDGET_SLACK = 1e-12


def charge_terms(table: Sequence[Charge], index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row (epsilon, delta) of rows whose charges are ``table[index]``, as the server's ledger adds
    them: the release's pure-LDP epsilon (:attr:`Charge.cost`, ``units`` x the per-unit one) and its delta
    (``units`` x the per-unit one, at most 1)."""
    index = np.asarray(index, dtype=np.int64)
    if not len(index):
        return np.zeros(0), np.zeros(0)
    eps = np.array([c.cost for c in table], dtype=np.float64)
    delta = np.array(
        [min(1.0, c.guarantee.as_ldp()[1] * (1 if c.units is None else c.units)) for c in table], dtype=np.float64
    )
    return eps[index], delta[index]


@dataclass
class _Table:
    """One population's entries, sorted by user."""

    user: np.ndarray  # int64
    eps: np.ndarray  # float64: composed pure-LDP epsilon of the user's fresh releases (embedding + label)
    delta: np.ndarray  # float64: their summed delta
    draws: np.ndarray  # int64: rows drawn for the user
    space: np.ndarray  # int64: index of the release space of the user's latest draw

    def find(self, users: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each of ``users``' position in the table and whether it is there."""
        pos = np.searchsorted(self.user, users)
        known = pos < self.user.size
        known[known] = self.user[pos[known]] == users[known]
        return np.where(known, pos, 0), known

    def at(self, column: np.ndarray, users: np.ndarray, missing: float | int) -> np.ndarray:
        """``column``'s entry of each of ``users`` (``missing`` for a user not in the table)."""
        pos, known = self.find(users)
        if not self.user.size:
            return np.full(users.size, missing, dtype=column.dtype)
        return np.where(known, column[pos], missing)


class NodeLedger:
    """The node's per-user ledger over its state's ``records`` (a Flower ``RecordDict``, read and written)."""

    def __init__(self, records: RecordDict) -> None:
        self.records = records

    # ------------------------------------------------------------------ reading
    def _table(self, population: str) -> _Table:
        key = f"{LEDGER_KEY}.{population}"
        if key not in self.records:
            empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
            return _Table(empty_i, empty_f, empty_f.copy(), empty_i.copy(), empty_i.copy())
        rec = wire.array_record(self.records, key)
        return _Table(*(rec[k].numpy().copy() for k in ("user", "eps", "delta", "draws", "space")))

    def _spaces(self) -> list[str]:
        key = f"{LEDGER_KEY}.spaces"
        if key not in self.records:
            return []
        spaces = wire.config_record(self.records, key)["spaces"]
        return [str(s) for s in spaces] if isinstance(spaces, list) else []

    def spent(self, population: str, users: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The composed (epsilon, delta) each of ``users`` has spent in ``population`` (0 for a user who never
        released)."""
        table, users = self._table(population), np.asarray(users, dtype=np.int64)
        return table.at(table.eps, users, 0.0), table.at(table.delta, users, 0.0)

    def draws(self, population: str, users: np.ndarray) -> np.ndarray:
        """How many rows were drawn for each of ``users`` (0: never released)."""
        table, users = self._table(population), np.asarray(users, dtype=np.int64)
        return table.at(table.draws, users, 0)

    def release_space(self, population: str, users: np.ndarray) -> list[str | None]:
        """The release space (M1 and document setup digest) of each user's latest draw (``None``: none)."""
        table, users, spaces = self._table(population), np.asarray(users, dtype=np.int64), self._spaces()
        return [spaces[int(i)] if i >= 0 else None for i in table.at(table.space, users, -1)]

    # ------------------------------------------------------------------ the rules
    def admit(
        self,
        population: str,
        users: np.ndarray,
        eps: np.ndarray,
        delta: np.ndarray,
        space: str,
        *,
        once: bool,
        new_space_ok: bool = False,
        budget: float = 0.0,
    ) -> np.ndarray:
        """Which of these prospective fresh draws (one per entry of ``users``, in order, costing ``eps`` and
        ``delta``, in release space ``space``) the node makes; records the allowed ones' spend before any
        noise is drawn (a draw that then fails is still counted: conservative).

        ``once`` (cached releases): a user with an earlier draw is refused (with ``new_space_ok``, the leaky
        mode, only when ``space`` is that of its latest draw); several rows of one user in the same call are
        one release.
        ``budget`` > 0 (``max-epsilon``): a draw is refused when the user's composed epsilon, its earlier
        releases and the rows admitted before it in this call included, would exceed ``budget``; 0 = no
        budget. Guarantee: a positive ``budget`` is never exceeded by what this call admits, and under
        ``once`` (without ``new_space_ok``) no user is admitted in two calls, whatever their order or space.
        """
        users = np.asarray(users, dtype=np.int64)
        eps, delta = np.asarray(eps, dtype=np.float64), np.asarray(delta, dtype=np.float64)
        if not users.size:
            return np.ones(0, dtype=bool)
        table = self._table(population)
        spaces = self._spaces()
        space_id = spaces.index(space) if space in spaces else len(spaces)
        allowed = np.ones(users.size, dtype=bool)
        if once:
            # the ledger's own view, not the cache's: a user whose cached release was reset by a new map
            # has released all the same
            repeat = table.at(table.draws, users, 0) > 0
            if new_space_ok:
                repeat &= table.at(table.space, users, -1) == space_id
            allowed &= ~repeat
        if budget > 0:
            spent = table.at(table.eps, users, 0.0)
            extra: dict[int, float] = {}
            limit = budget * (1 + BUDGET_SLACK)
            for i in np.flatnonzero(allowed).tolist():  # in order: earlier rows of a user count first
                u = int(users[i])
                if spent[i] + extra.get(u, 0.0) + eps[i] <= limit:
                    extra[u] = extra.get(u, 0.0) + float(eps[i])
                else:
                    allowed[i] = False
        if allowed.any():
            self._record(population, table, users[allowed], eps[allowed], delta[allowed], space_id, spaces, space)
        return allowed

    def _record(
        self,
        population: str,
        table: _Table,
        users: np.ndarray,
        eps: np.ndarray,
        delta: np.ndarray,
        space_id: int,
        spaces: list[str],
        space: str,
    ) -> None:
        new = np.setdiff1d(users, table.user)
        if new.size:
            user = np.concatenate([table.user, new])
            order = np.argsort(user, kind="stable")

            def grown(a: np.ndarray, fill: float | int) -> np.ndarray:
                return np.concatenate([a, np.full(new.size, fill, dtype=a.dtype)])[order]

            table = _Table(
                user[order],
                grown(table.eps, 0.0),
                grown(table.delta, 0.0),
                grown(table.draws, 0),
                grown(table.space, -1),
            )
        pos, _ = table.find(users)
        np.add.at(table.eps, pos, eps)
        np.add.at(table.delta, pos, delta)
        np.add.at(table.draws, pos, 1)
        table.space[pos] = space_id
        if space_id == len(spaces):
            self.records[f"{LEDGER_KEY}.spaces"] = ConfigRecord({"spaces": [*spaces, space]})
        self.records[f"{LEDGER_KEY}.{population}"] = ArrayRecord(
            {
                "user": Array(table.user),
                "eps": Array(table.eps),
                "delta": Array(table.delta),
                "draws": Array(table.draws),
                "space": Array(table.space),
            }
        )
