"""Flower ClientApps: the local-DP release client."""
