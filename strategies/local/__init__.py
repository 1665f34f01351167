"""Local DP: the strategy that trains on sanitized releases (``release_training``) and the
per-user privacy account wrapped around it (``accounting``)."""
