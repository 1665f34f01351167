"""Data: the dataset registry and loaders (hub, local files, users' files, node files), the
synthetic dataset, the partition of users over nodes, the sentence splitter, and a node's cohort."""
