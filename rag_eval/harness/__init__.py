"""Running an experiment: its definition, the run's steps (prepare, ingest, replay on one process or Dask
workers), the per-query rows, the run store (resume, publishing as a set), provenance and the load
measurement."""
