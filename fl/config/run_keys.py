"""The simulation and output sections' keys: how a run is executed and where it writes.

Declared as :mod:`fl.config.keys` describes: one field per key (default, doc, choices) and the
section's own checks in ``check``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fl.config.errors import ConfigError
from fl.config.section import Section, key
from mechanisms.suggest import did_you_mean

#: The experiment trackers a run can be logged to (simulations.tracking).
TRACKER_NAMES = ("mlflow", "tensorboard", "wandb")


@dataclass(frozen=True)
class SimulationConfig(Section):
    """How ``sanitas run`` simulates the federation: the backend, Ray resources and fault injection."""

    backend: str = key(
        "auto",
        '"local" = in this process; "ray" = Flower\'s Ray backend; "auto" = ray when ray-address is set',
        choices=("auto", "local", "ray"),
    )
    local_wire: str = key(
        "handoff",
        'how messages cross on the local backend: "handoff" = new records over the same array bytes, nothing '
        'serialised (no process boundary); "bytes" = Flower\'s wire bytes, deflated and inflated',
        choices=("handoff", "bytes"),
    )
    node_cpus: float = key(1.0, "CPUs Ray reserves for each simulated node (fractions allowed)")
    node_gpus: float = key(-1.0, "GPUs per simulated node; -1 = auto: 0.25 when the run uses CUDA, else 0")
    ray_address: str = key("", '"" = start a local Ray instance; "auto" or "host:port" = attach to a running cluster')
    fault_rate: float = key(0.0, "fault injection: fraction of the sampled nodes that fail each round (seeded by seed)")
    fault_kind: str = key(
        "raise",
        'how an injected fault fails: "raise", "timeout" (sleeps past node-timeout), "drop-reply"',
        choices=("raise", "timeout", "drop-reply"),
    )

    def check(self) -> None:
        """The Ray resources of a simulated node and the cluster address (Ray counts resources in 0.0001
        units), the fault rate in [0, 1), and no cluster for the in-process backend."""
        super().check()
        cpus, gpus = self.node_cpus, self.node_gpus
        if not 0.0 <= self.fault_rate < 1.0:
            raise ConfigError(
                f"fault-rate (fraction of sampled nodes failing each round) must lie in [0, 1), got {self.fault_rate}"
            )
        if not (cpus >= 0.0001 and math.isfinite(cpus)):
            raise ConfigError(
                f"node-cpus (CPUs Ray reserves per simulated node) must be >= 0.0001 and finite, got {cpus}"
            )
        if gpus != -1.0 and not (gpus == 0.0 or (gpus >= 0.0001 and math.isfinite(gpus))):
            raise ConfigError(
                "node-gpus must be -1 (auto: 0.25 when the run uses CUDA, else 0), 0, or a GPU share >= 0.0001, "
                f"got {gpus}"
            )
        address = self.ray_address
        host, colon, port = address.rpartition(":")
        if address not in ("", "auto") and not (
            colon
            and host
            and "/" not in address
            and not any(c.isspace() for c in address)
            and port.isdigit()
            and 0 < int(port) < 65536
        ):
            raise ConfigError(
                'ray-address must be "" (start a local Ray instance), "auto" (the cluster $RAY_ADDRESS names, else '
                'the last one `ray start` started on this machine) or the head\'s "host:port" (e.g. '
                f'"10.0.0.5:6379"), got {address!r}'
            )
        if self.backend == "local" and address:
            raise ConfigError(
                f"backend = 'local' runs in this process and cannot attach to the Ray cluster ray-address = "
                f'{address!r} names: set backend = "ray" (or "auto")'
            )


@dataclass(frozen=True)
class OutputConfig(Section):
    """Where a run's results folder goes and what its plot shows."""

    out_dir: str = key("results", "a new folder <out-dir>/<run-name> per run")
    run_name: str = key("", '"" = <dataset>-<mechanism>-<timestamp>')
    reference_accuracy: float = key(0.0, "a measured non-private accuracy drawn on the run's plot (0 = none)")
    track: str = key(
        "",
        'trackers the finished run is logged to, comma-separated: "mlflow", "tensorboard", "wandb" (docs: tracking)',
    )
    tracking_uri: str = key("", 'MLflow tracking URI; "" = $MLFLOW_TRACKING_URI, else <out-dir>/mlflow.db')

    def check(self) -> None:
        """The reference accuracy drawn on the plot is a rate in [0, 1] (0 = none); ``track`` names known
        trackers."""
        super().check()
        for name in (n.strip() for n in self.track.split(",") if n.strip()):
            if name not in TRACKER_NAMES:
                raise ConfigError(
                    f"track = {self.track!r}: unknown tracker {name!r}{did_you_mean(name, TRACKER_NAMES)} "
                    f"(known: {', '.join(TRACKER_NAMES)})"
                )
        if not 0.0 <= self.reference_accuracy <= 1.0:
            raise ConfigError(f"reference-accuracy must lie in [0, 1] (0 = none), got {self.reference_accuracy}")
