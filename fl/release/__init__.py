"""What a node releases, as a library: its own state (:mod:`fl.release.state`: the noise secret and draw
counters, the cache of drawn releases), its ledger of what each user has released (:mod:`fl.release.ledger`,
which refuses a second release of a user and a release past ``max-epsilon``, whatever the server asks) and
the release drawn from them (:mod:`fl.release.draw`).

The local-DP ClientApp (``clients.ldp_client``) calls :func:`fl.release.draw.release` with the state it
keeps in Flower's ``context.state``; the privacy audits and the attacks (``simulations.analyses``) call the
same function with a fresh :class:`~fl.release.state.NodeState` of their own, so what they measure is the
node's release itself, not a copy of it.
"""

from fl.release.draw import NodeRelease, charges_by_extras, held_releases, release
from fl.release.ledger import NodeLedger
from fl.release.state import NodeState, derived_seed

__all__ = [
    "NodeLedger",
    "NodeRelease",
    "NodeState",
    "charges_by_extras",
    "derived_seed",
    "held_releases",
    "release",
]
