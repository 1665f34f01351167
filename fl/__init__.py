"""Sanitas core, one concept per package. May import ``mechanisms``; never the Flower apps.

- ``config``: the run-config keys, their defaults, parsing and validation.
- ``wire``: the message schema both ends read and write.
- ``data``: datasets, users' and nodes' files, the partition over nodes, a node's cohort.
- ``encoding``: the sentence encoder, its embedding cache, its public fine-tuning.
- ``maps``: the input map M1, the downstream pipeline, the public start.
- ``levels``: which level a run releases at (decided in ``fl.levels`` alone) and one sub-package
  per level (sentence, label, word, document) with its channel.
- ``accounting``: the accountants (ledger, charges, central and user-level) and their analysis.
- ``training``: central-DP training over users (clipped updates, the encoder).
- ``attacks``: what an adversary still learns from a run.
- ``reporting``: results folders, progress and timing.
- ``faults``: which nodes fail in a round (fault injection).
"""
