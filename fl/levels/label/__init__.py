"""The label level: the label channel (randomized response, with or without a prior)."""
