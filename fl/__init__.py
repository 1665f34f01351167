"""Sanitas core: config, datasets and partitioning, encoder and cache, pipeline,
accounting, results. May import ``mechanisms``; never Flower apps."""
