"""Local DP: the strategy that trains on sanitized releases (``release_training``; its M1 and
public-only line in ``server_map``, its scores in ``evaluation``) and the per-user privacy account
wrapped around it (``accounting``)."""
