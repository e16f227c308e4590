"""Measures, read from the per-query rows only: the registry that declares each measure once, the per-query
measures computed column-wise and their aggregation into the summary per config."""
