"""Data sets: loaders (BEIR + span qrels, TREC qrels), chunkers, chunk-level labels, validation."""
