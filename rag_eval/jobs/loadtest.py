"""``rag-eval load``: prepare -> ingest -> measure the lookups under load -> publish ``load.json``; or, against a
served endpoint: measure its answers under load -> publish ``load.json``."""

from __future__ import annotations

from pathlib import Path

from rag_eval.experiment import Experiment
from rag_eval.experiment.load_table import LoadSettings
from rag_eval.experiment.model import ServiceSpec
from rag_eval.loadtest.driver import LoadResult, measure_load, refuse_lite
from rag_eval.loadtest.served import measure_endpoint_load
from rag_eval.replay.prepare import Progress, ingest_collection, prepare
from rag_eval.reports.artifacts import load_files
from rag_eval.reports.html import render_html
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.publish import write_set
from rag_eval.rundir.reader import run_started


def load(
    exp: Experiment,
    out: str | Path,
    *,
    settings: LoadSettings,
    progress: Progress | None = None,
    force_out: bool = False,
    endpoint: ServiceSpec | None = None,
) -> LoadResult:
    """Measure, then write ``load.json`` (and the per-lookup table, ``load.md``) into ``out``. When ``out``
    is a finished run directory, the measurement belongs to that run: its HTML report is rendered again
    with the curve, and ``rag-eval compare`` applies the load gates. A directory of other files is refused
    unless ``force_out``. ``endpoint``: a served ``lookup_knowledge`` to measure instead of the configs' own
    lookups (:func:`rag_eval.experiment.load_target.load_endpoint`); whatever Milvus is behind it."""
    prog = progress or Progress(quiet=True)
    if endpoint is None:
        refuse_lite(exp.target)
    store = RunStore(out)
    store.check_out(force=force_out)
    with store.locked():
        run = run_started(store.dir)
        if endpoint is not None:
            result = measure_endpoint_load(exp, endpoint, settings, run=run, progress=prog)
        else:
            prep = prepare(exp)
            collection = ingest_collection(exp, prep, prog)
            result = measure_load(exp, prep, collection, settings, run=run, progress=prog)
        write_set(store.dir, load_files(result), what="the load measurement", together=True)
        if run is not None:
            render_html(store.dir)
    return result
