"""The wire's record keys: the names of the records of Sanitas' messages, and where each point's sit.

A Flower ``Message`` carries a ``RecordDict``; these are its keys in Sanitas' requests and replies (what
each record holds is noted beside it), the privacy channels of a release as the wire names them, and the
prefixes under which one message carries several points' records (:func:`point_prefix`,
:func:`point_contents`).
"""

from __future__ import annotations

from flwr.app import RecordDict

# RecordDict keys -------------------------------------------------------------------------------
COHORT = "cohort"  # query reply: MetricRecord (CohortInfo)
CONFIG = "config"  # requests: ConfigRecord (server-round, user-ids)
MAP_IN = "map-in"  # requests: ArrayRecord {"matrix"}: M1 when the server provides it
ENCODER = "encoder"  # requests: ConfigRecord {"digest"}: the published encoder to use (encoder-tuning = "public")
USERS = "users"  # query requests to node-local nodes: ConfigRecord {"train-offset", "num-train-users"}
MODEL = "arrays"  # requests: ArrayRecord, the server model's state dict
TRAIN_ON_RELEASES = (
    "train-on-releases"  # local train requests (CONFIG): 1 = train on the node's releases, reply the model
)
MODEL_REF = "model-ref"  # user-level train requests (CONFIG): the object id of a model the node already holds
HELD_MODEL = "sanitas.held-model"  # a node's context.state: the model of its last evaluate request
# Points sharing a federation (strategies.points, clients.points): one message carries several points'
# requests (or replies), each point's records under "p<point>/"; POINTS lists the points it carries.
POINTS = "sanitas.points"
POINT_PREFIX = "p"
POINT_ERROR = "sanitas.point-error"  # a reply's ConfigRecord {"code", "reason"}: that point's request failed
DOCUMENT_SETUP = "document-setup"  # requests: ArrayRecord, the document level's public material (once per node)
RELEASE = "release"  # replies: ArrayRecord of released rows (see Release)
CHARGES = "charges"  # replies: ConfigRecord, the release's distinct charges per channel (JSON)
METRICS = "metrics"  # replies: MetricRecord (counts, confusion matrices)
UPDATE_SUM = "update-sum"  # user-level central replies: ArrayRecord, the sum of the sampled users' clipped updates
MAP_GRAD = "map-in-grad"  # leaky mode only: ArrayRecord {"grad", "count"}, an unsanitized gradient
# Evaluate requests: the model fitted on the public data alone (fl.maps.public_model), held against the run.
PUBLIC_MODEL = "public-model"  # ArrayRecord {"matrix"}: the public logistic regression, [d + 1, K] (clean inputs)
PUBLIC_RELEASE_MODEL = "public-release-model"  # ArrayRecord: the server model fitted on public releases alone

#: Privacy channels of a release, as named on the wire and in the ledger.
CHANNELS = ("embedding", "label")


def point_prefix(point: int) -> str:
    """Where point ``point``'s records sit in a message carrying several points' (``p<point>/``)."""
    return f"{POINT_PREFIX}{point}/"


def point_contents(content: RecordDict) -> dict[int, RecordDict]:
    """Each point's records of a reply carrying several points' (``strategies.points``): ``p<i>/<record>``
    becomes point ``i``'s ``<record>``. A record under no point prefix raises ``ValueError``."""
    out: dict[int, RecordDict] = {}
    for key, record in content.items():
        head, sep, rest = key.partition("/")
        if not (sep and head.startswith(POINT_PREFIX) and head[len(POINT_PREFIX) :].isdigit()):
            raise ValueError(f"record {key!r} belongs to no point")
        out.setdefault(int(head[len(POINT_PREFIX) :]), RecordDict())[rest] = record
    return out
