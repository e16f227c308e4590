"""Embedders: the ``[embedder]`` providers (a local sentence-transformers model, an OpenAI-compatible endpoint,
precomputed query vectors, a Python callable), the on-disk cache and precomputed vector files, and the count
behind the fit check of a collection built elsewhere."""
