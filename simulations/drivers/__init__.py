"""Experiment drivers: sweeps, comparisons, reproductions and their specs, public-data tuning, and the tables
and plots they write."""
