"""Data: the dataset registry and loader (``datasets``: registry names, local files or the hub, the
public split), users' own files and a SuperNode's file (``user_files``), the synthetic dataset for
scale work (``synthetic``), the partition of users over nodes (``partition``), and the sentence
splitter (``sentences``)."""
