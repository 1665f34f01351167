"""The grid wrappers of the ServerApp (one base, ``wrapper``): round-trip timing, lost nodes filed
under their node, dropped replies (fault injection), and the published encoder."""
