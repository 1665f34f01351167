"""``python -m simulations.cli``: the ``sanitas`` command."""

from simulations.cli import entry

entry()
