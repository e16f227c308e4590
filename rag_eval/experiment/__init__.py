"""Experiments: which data set, chunker, embedder, Milvus, ingest profile and configs.

An experiment is a TOML file; the main settings have CLI flags too (``rag-eval run --help``).
Every path in the file (data set, .properties, vectors, gates, the Milvus Lite file, the embedding
cache) is relative to the file; a path on the command line is relative to the working directory, and
what neither names goes under ``reports/`` there. Example (a file in ``experiments/``)::

    [experiment]
    name = "legacy-vs-evidence"

    [dataset]
    path = "../incident-kb"
    split = "test"

    [chunker]
    spec = "sentences:size=3,overlap=0"

    [milvus]
    uri = "../reports/milvus/incident-kb.db"   # a path: embedded Milvus Lite; http(s)://: a server

    [ingest]
    profile = "production"                      # or "clean", or explicit shares below

    [[configs]]
    name = "legacy"
    properties = "configs/legacy.properties"    # a production .properties file

    [[configs]]
    name = "evidence"
    baseline = true
    rag = { retrieve-k = 20, return-n = 5, max-chunks-per-document = 2 }

    [gates]                                     # optional: the shipped default gates otherwise
    file = "nightly"                            # a gates file (relative to this file) or a shipped name,
                                                # or inline: checks = ["fail cap_compliance == 1", ...]

    [load]                                      # optional: latency under concurrent load (a server only;
    concurrency = [1, 2, 4, 8]                  # see rag_eval.experiment.load_table)

The package, one job a module:

- :mod:`~rag_eval.experiment.model`: the values (:class:`Experiment`, :class:`ConfigSpec`,
  :class:`IngestProfile`, the profiles and defaults)
- :mod:`~rag_eval.experiment.reader`: a file, table by table (readers in
  :mod:`~rag_eval.experiment.tables` and :mod:`~rag_eval.experiment.configs_table`)
- :mod:`~rag_eval.experiment.checks`: the one check of an experiment's values, whichever way it was made
- :mod:`~rag_eval.experiment.overrides`: the command line's flags on top
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
