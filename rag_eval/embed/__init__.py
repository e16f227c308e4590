"""Embedders (sentence-transformers behind the ``embed`` extra), the on-disk cache, precomputed vectors."""
