"""Central-DP training over users: per-user clipped updates (``user_updates``) and the encoder
trained under user-level central DP (``encoder``)."""
