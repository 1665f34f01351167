"""A user's mechanism named in the run config (``sentence-mechanism = "my_noise.py:MyNoise"``, or
``"package.module:Class"``) audited against its declared guarantee before a run does any work.

:func:`audit_user_mechanisms` runs the quick form of the audit the built-in mechanisms pass
(:func:`mechanisms.audit.quick.audit_declared`: at most :data:`~mechanisms.audit.quick.QUICK_SECONDS` of
sampling for all of a config's user mechanisms, seeded, refusing an honest mechanism with probability at
most :data:`~mechanisms.audit.quick.QUICK_ALPHA`) on each user mechanism the config names, built as the
run's nodes build it (``fl.config.make_mechanism``: its options, and the run's input dimension). The
built-ins are not audited again (the test suite does). ``simulations.runtime.api`` calls it among the checks
that come before the data; ``sanitas audit-mechanism`` runs the full audit of one mechanism.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fl import config as config_mod
from mechanisms import user_code

log = logging.getLogger(__name__)

#: The channels a user's mechanism may serve in a run (the document level builds only its own two).
CHANNELS = ("sentence", "label", "word")

#: A run whose epsilon is larger is audited at this epsilon too: a large epsilon's declared loss lies beyond
#: what the quick audit's samples can measure (about 9.6 at 2e5 releases per input, docs/SPEC.md §15.6), while a
#: sampler that misses its calibration (noise for 3x epsilon) shows at any epsilon.
AUDIT_EPSILON = 1.0

#: One verdict per mechanism as built (spec, epsilon, options, dimension) and process: the points of a sweep
#: that share a mechanism are audited once.
_VERDICTS: dict[tuple[Any, ...], Any] = {}


def user_channels(cfg: Mapping[str, Any]) -> list[str]:
    """The channels whose ``<channel>-mechanism`` names a user's class rather than a built-in."""
    return [c for c in CHANNELS if user_code.is_spec(str(cfg[f"{c}-mechanism"]))]


def sentence_dim(cfg: Mapping[str, Any]) -> int | None:
    """The dimension the run's sentence mechanism sanitizes, when known without loading the encoder: M1's
    ``map-dim``, or with ``map-in = "identity"`` the packaged encoder's (or ``synthetic-dim``)."""
    from fl.config.rules import ENCODER_DIMS

    if cfg["map-in"] != "identity":
        return int(cfg["map-dim"])
    if cfg["dataset"] == "synthetic":
        return int(cfg["synthetic-dim"])
    return ENCODER_DIMS.get(str(cfg["encoder"]))


def _at_audit_epsilon(cfg: Mapping[str, Any], channel: str, dim: int | None) -> list[Any]:
    """The mechanism built at :data:`AUDIT_EPSILON` with the run's options (none when it refuses that epsilon)."""
    try:
        return [config_mod.make_mechanism({**cfg, f"{channel}-epsilon": AUDIT_EPSILON}, channel, input_dim=dim)]
    except ValueError:  # a mechanism whose epsilon has a floor: the run's epsilon alone is audited
        return []


def audit_user_mechanisms(cfg: Mapping[str, Any]) -> None:
    """Audit each user mechanism ``cfg`` names; raise :class:`fl.config.ConfigError` in one line (the
    estimate, the declared epsilon, the fix) when one fails. A pass is logged in one line (INFO), and so is
    a mechanism the audit cannot test (WARNING: what it would need), never passed in silence."""
    channels = user_channels(cfg)
    if not channels:
        return
    from mechanisms.audit.quick import QUICK_SECONDS, audit_declared
    from mechanisms.registry import shown

    for channel in channels:
        spec = str(cfg[f"{channel}-mechanism"])
        what = f"{channel}-mechanism {shown(spec)!r}"
        dim = sentence_dim(cfg) if channel == "sentence" else None
        key = (spec, cfg[f"{channel}-epsilon"], cfg[f"{channel}-options"], dim)
        verdict = _VERDICTS.get(key)
        if verdict is None:
            builds = [config_mod.make_mechanism(cfg, channel, input_dim=dim)]
            if float(cfg[f"{channel}-epsilon"]) > AUDIT_EPSILON:
                builds += _at_audit_epsilon(cfg, channel, dim)
            try:  # the smallest dimension first: the sphere mechanisms' pair (x, -x) is tightest there
                verdict = audit_declared(builds, dims=(2, dim or 2), seconds=QUICK_SECONDS / len(channels))
            except ValueError as err:
                raise config_mod.ConfigError(f"{what}: {err}") from None
            _VERDICTS[key] = verdict
        if verdict.failed:
            raise config_mod.ConfigError(verdict.line(what))
        (log.warning if verdict.status == "untested" else log.info)(verdict.line(what))
