"""``rag-eval run``: prepare -> ingest -> replay -> summarise -> compare -> publish.

Each step is a function of the layers below with explicit inputs and outputs; :func:`run_experiment`
only sequences them, holding the run directory's lock from the first step to the last published file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from rag_eval.compare.comparison import Comparison, compare
from rag_eval.compare.gates import run_gates
from rag_eval.compare.runs import ComparedRun, check_pairable, check_same_experiment, experiment_identity
from rag_eval.experiment import Experiment
from rag_eval.files import json_safe
from rag_eval.jobs.compare import Judging, comparison_tasks
from rag_eval.jobs.service import replay_service
from rag_eval.loadtest.driver import LoadResult, measure_load, refuse_lite
from rag_eval.metrics.labelfree import summarize_traffic
from rag_eval.metrics.measures import SUMMARY_COLUMNS, summarize
from rag_eval.replay import provenance
from rag_eval.replay.documents import config_rows, data_identity, run_manifest, run_summary
from rag_eval.replay.prepare import Prepared, Progress, ingest_collection, prepare
from rag_eval.replay.step import Execution, Replayed, replay
from rag_eval.reports.artifacts import REPORT_MD, html_report, run_files, trec_rankings
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.publish import RANKING_COLUMNS, RunFiles, publish_run


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """Where the run went, its summary, its comparison and the gates' exit code."""

    out: Path
    summary: dict[str, Any]
    report: Path
    resumed_batches: int
    comparison: Comparison | None = None
    exit_code: int = 0  # the gates' (0 pass or warn, 1 a fail gate fired, 2 a fail gate not evaluable)
    service: dict[str, Any] | None = None  # [service]: the deployed tool's conformance (service.json)


def run_experiment(
    exp: Experiment, out: str | Path, how: Execution | None = None, judged: Judging | None = None
) -> RunResult:
    """Replay ``exp`` into ``out`` and gate it: prepare, ingest, replay, summarise, compare, publish. The
    gates and the run compared with are checked before anything runs."""
    how, judged = how or Execution(), judged or Judging()
    prog, cluster, resume, against = how.progress or Progress(quiet=True), how.cluster, how.resume, judged.against
    clock = provenance.Clock.start()
    gate_set = run_gates(judged.gates, exp)
    earlier, mixed = _earlier_run(exp, against, other_experiment=judged.other_experiment)
    store = _run_store(out, resume=resume, force_out=how.force_out)
    with store.locked():  # held until the last file is published; a second run into `out` is refused
        prep = prepare(exp)
        if earlier is not None and not judged.intersection:
            check_pairable(data_identity(exp, prep), earlier)
        collection = ingest_collection(exp, prep, prog)
        replayed = replay(exp, prep, collection, store, replace(how, progress=prog))
        service = None if exp.service is None else replay_service(exp, prep, collection, store.dir, resume=resume,
                                                                  progress=prog)  # fmt: skip
        load = None
        if exp.load is not None:  # the [load] table: measured for this run (its start and fingerprint)
            run_id = {"started": clock.started.isoformat(), "fingerprint": exp.fingerprint()}
            load = measure_load(exp, prep, collection, exp.load, run=run_id, progress=prog)
        run = summarise_run(exp, prep, replayed, load, clock)
        with comparison_tasks(cluster) as tasks:
            base = run if judged.against_self else earlier
            comparison = compare(
                run, base, gate_set, intersection=judged.intersection, notes=(*mixed, *judged.notes), tasks=tasks
            )
        publish(exp, prep, replayed, load, run, comparison)
    return RunResult(
        out=store.dir,
        summary=dict(run.summary),
        report=store.dir / REPORT_MD,
        resumed_batches=replayed.resumed_batches,
        comparison=comparison,
        exit_code=max(comparison.exit_code, service.exit_code if service is not None else 0),
        service=service.document if service is not None else None,
    )


def _earlier_run(
    exp: Experiment, against: str | Path | None, *, other_experiment: bool
) -> tuple[ComparedRun | None, list[str]]:
    """The run ``against`` names, read before anything runs and refused when it is a run of another experiment
    unless ``other_experiment`` (then the notes that say so); a load measurement refused on Lite."""
    if exp.load is not None:
        refuse_lite(exp.target)  # before anything is written
    if against is None:
        return None, []
    earlier = ComparedRun.from_dir(against)
    return earlier, check_same_experiment(experiment_identity(exp.name, config_rows(exp)), earlier,
                                          force=other_experiment)  # fmt: skip


def _run_store(out: str | Path, *, resume: bool, force_out: bool) -> RunStore:
    """The run directory, refused before anything runs when it is a file, a directory of other files (unless
    ``force_out``) or there is nothing to resume."""
    store = RunStore(out)
    store.check_out(force=force_out)
    if resume:
        store.check_resumable()
    return store


def summarise_run(
    exp: Experiment, prep: Prepared, replayed: Replayed, load: LoadResult | None, clock: provenance.Clock
) -> ComparedRun:
    """Metrics per config and the manifest, from the parts one batch at a time: the run as a comparison
    reads it (which reads the parts again, for the per-query values it pairs on)."""
    configs = config_rows(exp)
    measured, _ = summarize(replayed.store.iter_parts(SUMMARY_COLUMNS), configs=configs, cutoffs=exp.cutoffs)
    if prep.traffic is not None:  # a query log's queries, measured apart (rag_eval.metrics.labelfree)
        traffic = summarize_traffic(replayed.store.iter_parts, configs=configs, cutoffs=exp.cutoffs)
        measured = {name: {**summary, "traffic": traffic[name]} for name, summary in measured.items()}
    pa.default_memory_pool().release_unused()  # the parts' decoded buffers: the process keeps them otherwise
    manifest = run_manifest(exp, prep, replayed, configs=configs, clock=clock)
    summary = run_summary(exp, prep, replayed, manifest=manifest, measured=measured)
    load_doc = load.document if load is not None else None
    return ComparedRun.in_store(replayed.store, summary=summary, manifest=json_safe(manifest), load_doc=load_doc)


def publish(
    exp: Experiment,
    prep: Prepared,
    replayed: Replayed,
    load: LoadResult | None,
    run: ComparedRun,
    comparison: Comparison,
) -> None:
    """Every artifact of the run, staged, then published as a set (the completion marker last). A failure
    while staging leaves the previous run's files as they were."""
    store = replayed.store
    resolution = prep.existing.document() if prep.existing is not None else None
    files = RunFiles(
        names=[c.name for c in exp.configs],
        provenance=run.summary["provenance"],
        rankings=trec_rankings(store.iter_parts(RANKING_COLUMNS)),
        artifacts=run_files(run.summary, run.manifest, comparison.document, load, resolution=resolution),
        render=html_report(store.dir),
    )
    publish_run(store, prep, files)
