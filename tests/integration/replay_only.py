"""A run's replay alone: the rows and the summary of ``rag-eval run`` without its comparison and its files.

For the tests that compare the rows of two ways of searching (the former fetch, the former page reading):
the steps are the run's own (prepare, ingest, replay, summarise), only the comparison, the report and the
published files, which those rows do not depend on, are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from rag_eval.experiment import Experiment
from rag_eval.jobs.run import summarise_run
from rag_eval.replay import provenance
from rag_eval.replay.prepare import Progress, ingest_collection, prepare
from rag_eval.replay.step import Execution, replay
from rag_eval.rundir.directory import RunStore


@dataclass(frozen=True, slots=True)
class Replay:
    table: pa.Table  # every row of every batch, in batch order, as per_query.parquet holds them
    summary: dict[str, Any]

    @property
    def rows(self) -> pd.DataFrame:
        return self.table.to_pandas()


def replay_only(exp: Experiment, out: Path, how: Execution | None = None) -> Replay:
    store = RunStore(out)
    with store.locked():
        clock = provenance.Clock.start()
        prep = prepare(exp)
        progress = Progress(quiet=True)
        collection = ingest_collection(exp, prep, progress)
        replayed = replay(exp, prep, collection, store, replace(how or Execution(), progress=progress))
        run = summarise_run(exp, prep, replayed, None, clock)
        table = pa.concat_tables(list(store.iter_parts()))
    return Replay(table=table, summary=dict(run.summary))
