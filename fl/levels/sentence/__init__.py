"""The sentence level: one sanitized embedding per document (Du et al. 2023)."""
