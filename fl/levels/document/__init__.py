"""The document level (SentDP, Meehan et al. 2022): the public recoder and candidate pool
(``recoder``), the server's public setup and the k breakdown (``setup``), and the channel."""
