"""The jobs behind the CLI, each a short sequence of steps that live in the layers below.

::

    run      prepare -> ingest -> replay -> summarise -> compare -> publish   (run.py)
    compare  read the run directories -> compare -> publish the comparison   (compare.py)
    nightly  run against the accepted baseline -> accept a first night -> history   (nightly_run.py)
    load     prepare -> ingest -> measure under load -> publish load.json   (loadtest.py)
             (a served endpoint, --service: measure it under load -> publish load.json)
    ingest   prepare -> ingest;  embed: the data set's precomputed vectors   (embed.py)

``rag_eval.cli`` parses the flags, calls a job and maps its outcome to an exit code; the reports'
console module prints what the job returns.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_eval.jobs.compare import Judging, compare_runs, comparison_paths
    from rag_eval.jobs.embed import embed_dataset, ingest
    from rag_eval.jobs.loadtest import load
    from rag_eval.jobs.nightly_run import NightFolders, NightResult, nightly
    from rag_eval.jobs.run import RunResult, publish, run_experiment, summarise_run
    from rag_eval.replay.documents import config_rows
    from rag_eval.replay.step import Execution

# imported when first used: a comparison does not import the replay, Milvus or the report's figures
_WHERE = {
    "config_rows": "rag_eval.replay.documents", "compare_runs": "rag_eval.jobs.compare",
    "comparison_paths": "rag_eval.jobs.compare", "embed_dataset": "rag_eval.jobs.embed",
    "ingest": "rag_eval.jobs.embed",
    "NightResult": "rag_eval.jobs.nightly_run", "nightly": "rag_eval.jobs.nightly_run",
    "RunResult": "rag_eval.jobs.run", "Execution": "rag_eval.replay.step", "Judging": "rag_eval.jobs.compare",
    "NightFolders": "rag_eval.jobs.nightly_run",
    "publish": "rag_eval.jobs.run", "run_experiment": "rag_eval.jobs.run", "summarise_run": "rag_eval.jobs.run",
    "load": "rag_eval.jobs.loadtest",
}  # fmt: skip

__all__ = [
    "Execution", "Judging", "NightFolders", "NightResult", "RunResult", "compare_runs", "comparison_paths",
    "config_rows", "embed_dataset", "ingest", "load", "nightly", "publish", "run_experiment", "summarise_run",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
