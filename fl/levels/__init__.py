"""The release levels: one sub-package per level, each holding everything that level needs.

- ``sentence``: one sanitized embedding per document (Du et al. 2023).
- ``word``: a word-by-word rewrite embedded on the client (Feyisetan et al.; Huang et al. 2024).
- ``document``: sentence-level DP of whole documents (SentDP, Meehan et al. 2022).
- ``label``: the label channel, which rides along at any level.

``base`` holds what every channel shares; ``channels`` builds a run's channels. Which level a run
releases at is decided in one place, :func:`fl.config.level_of`; no level package imports another.
"""
