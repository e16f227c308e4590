"""Experiments: which data set, chunker, embedder, Milvus, ingest profile and configs.

An experiment is a TOML file; the main settings have CLI flags too (``rag-eval run --help``). One job a
module: :mod:`~rag_eval.experiment.model` the values, :mod:`~rag_eval.experiment.reader` a file table by table
(one reader a table: :mod:`~rag_eval.experiment.tables`, :mod:`~rag_eval.experiment.configs_table`, ...),
:mod:`~rag_eval.experiment.checks` the one check of an experiment's values whichever way it was made,
:mod:`~rag_eval.experiment.overrides` the command line's flags on top. Every table and key, paths and an
example: docs/harness.md, "The experiment file".
"""

from rag_eval.experiment.checks import Keys, check_experiment
from rag_eval.experiment.model import (
    DEFAULT_CACHE_DIR,
    DEFAULT_CUTOFFS,
    DEFAULT_LITE_DIR,
    DEFAULT_PROFILE,
    PROFILES,
    CollectionSpec,
    ConfigSpec,
    Experiment,
    IngestProfile,
)
from rag_eval.experiment.overrides import Overrides, default_experiment, parse_config_flag, with_overrides
from rag_eval.experiment.reader import experiment_from_table, load_experiment, read_settings

__all__ = [
    "DEFAULT_CACHE_DIR",
    "DEFAULT_CUTOFFS",
    "DEFAULT_LITE_DIR",
    "DEFAULT_PROFILE",
    "PROFILES",
    "CollectionSpec",
    "ConfigSpec",
    "Experiment",
    "IngestProfile",
    "Keys",
    "Overrides",
    "check_experiment",
    "default_experiment",
    "experiment_from_table",
    "load_experiment",
    "parse_config_flag",
    "read_settings",
    "with_overrides",
]
