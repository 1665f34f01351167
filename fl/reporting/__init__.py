"""Reporting: a run's results folder (config, rounds, summary, plots), its progress bars and the
named phases its wall time goes to."""
