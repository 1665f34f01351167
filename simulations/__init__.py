"""The ``sanitas`` CLI, run configs and sweeps."""
