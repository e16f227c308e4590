"""``rag-eval compare``: read run directories (never Milvus) -> compare -> publish the comparison."""

from __future__ import annotations

from pathlib import Path

from rag_eval.compare.comparison import Comparison, compare
from rag_eval.compare.gates import load_gates, manifest_gates
from rag_eval.compare.history import against_notes
from rag_eval.compare.rundir import ComparedRun
from rag_eval.harness.publish import write_set
from rag_eval.reports.artifacts import comparison_files


def compare_runs(
    run_dir: str | Path,
    *,
    against: str | Path | None = None,
    gates: str | Path | None = None,
    out: str | Path | None = None,
    intersection: bool = False,
) -> Comparison:
    """Compare ``run_dir`` within itself, or against the run directory ``against``, under ``gates`` (else
    the gates its experiment recorded), and write ``compare.json``, ``junit.xml`` and ``summary.md`` into
    ``out`` (default: ``run_dir``)."""
    given = load_gates(gates) if gates is not None else None  # a bad gates file is named before the runs
    run = ComparedRun.from_dir(run_dir)
    earlier = ComparedRun.from_dir(against) if against is not None else None
    gate_set = given if given is not None else manifest_gates(run.manifest)
    comparison = compare(run, earlier, gate_set, intersection=intersection, notes=against_notes(against))
    write_set(Path(out if out is not None else run_dir), comparison_files(comparison.document), what="the comparison")
    return comparison
