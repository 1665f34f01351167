"""The analysis behind the accountants: composition of a user's releases, and shuffle
amplification (Feldman-McMillan-Talwar, the variation-ratio bound, the privacy-loss distribution
of the shuffled pair). Pure functions of epsilons, deltas and counts; the derivations are in
docs/SPEC.md."""
