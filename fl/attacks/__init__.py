"""Attacks that measure what an adversary still learns from a run.

Pure functions on arrays and models, one module per attack family:

* ``mia``: membership inference against the trained server model (loss,
  entropy, modified entropy and confidence thresholds, Yeom et al. 2018;
  Song & Mittal 2021) with the half/half protocol of Du et al. (2023, §4.4),
  and the offline likelihood-ratio attack with shadow models (Carlini et al.
  2022, LiRA);
* ``attribute``: a sensitive attribute predicted from released embeddings by
  a classifier trained on an auxiliary public set;
* ``inversion``: the words of a text recovered from its release (Song &
  Raghunathan 2020): a learned release-to-bag-of-words map and nearest
  neighbour against a public sentence pool;
* ``state``: what a run leaves for these attacks (the final model, M1, who
  trained it).

The driver that rebuilds targets and releases from a results folder is
``simulations.analyses.attack`` (``sanitas attack``): it needs the node's release code.
"""
