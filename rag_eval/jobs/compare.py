"""``rag-eval compare``: read run directories (never Milvus) -> compare -> publish the comparison.

The comparison is written while the lock of the directory it goes into is held, as a run holds it: a run
republishing into that directory meanwhile is refused, and so is the comparison while a run writes there,
so the comparison files never sit beside the rows of a run they were not computed from. ``compare.json``
names the run it compared (its start), and the reports read it only beside that run.
"""

from __future__ import annotations

from pathlib import Path

from rag_eval.compare.comparison import Comparison, compare
from rag_eval.compare.gates import load_gates, manifest_gates
from rag_eval.compare.history import against_notes
from rag_eval.compare.rundir import ComparedRun, check_run_dir
from rag_eval.harness.publish import write_set
from rag_eval.harness.store import RunStore
from rag_eval.reports.artifacts import comparison_files


def compare_runs(
    run_dir: str | Path,
    *,
    against: str | Path | None = None,
    gates: str | Path | None = None,
    out: str | Path | None = None,
    intersection: bool = False,
    force_out: bool = False,
) -> Comparison:
    """Compare ``run_dir`` within itself, or against the run directory ``against``, under ``gates`` (else
    the gates its experiment recorded), and write ``compare.json``, ``junit.xml`` and ``summary.md`` into
    ``out`` (default: ``run_dir``), holding its lock. ``out`` naming a file, or a directory of other files
    (unless ``force_out``), is refused before anything is read."""
    given = load_gates(gates) if gates is not None else None  # a bad gates file is named before the runs
    target = RunStore(out if out is not None else run_dir)
    if out is not None:
        target.check_out(force=force_out)
    check_run_dir(Path(run_dir))  # before the lock: a directory that holds no run is not written into
    with target.locked():
        run = ComparedRun.from_dir(run_dir)
        earlier = ComparedRun.from_dir(against) if against is not None else None
        gate_set = given if given is not None else manifest_gates(run.manifest)
        comparison = compare(run, earlier, gate_set, intersection=intersection, notes=against_notes(against))
        write_set(target.dir, comparison_files(comparison.document), what="the comparison")
    return comparison
