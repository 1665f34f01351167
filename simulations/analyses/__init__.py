"""Analyses: attacks, audits, and the tables and figures of the papers and the documentation."""
