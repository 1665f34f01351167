"""Encoding: the sentence encoder G and its on-disk embedding cache (``encoder``), documents as
their sentence embeddings (``documents``), checked cache files, and the public fine-tuning of G that
the server publishes by hash (``public_tuning``)."""
