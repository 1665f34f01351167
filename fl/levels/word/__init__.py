"""The word level: the word-by-word rewrite on the client (``rewrite``), its channel, and how
much a rewrite changes the text (``quality``)."""
