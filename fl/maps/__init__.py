"""Maps: the input map M1 (``input_map``), the downstream model M2 + classifier (``pipeline``),
and the start of both from public data (``public_start``).

``input_map`` imports ``pipeline``, never the reverse (an import-linter contract)."""
