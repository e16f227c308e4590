"""``rag-eval compare``: read run directories (never Milvus) -> compare -> publish the comparison.

The comparison is written while the lock of the directory it goes into is held, as a run holds it: a run
republishing into that directory meanwhile is refused, and so is the comparison while a run writes there,
so the comparison files never sit beside the rows of a run they were not computed from. ``compare.json``
names the run it compared (its start), and the reports read it only beside that run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rag_eval.cluster.settings import Cluster
from rag_eval.compare.comparison import Comparison, compare
from rag_eval.compare.gates import GateSet, manifest_gates
from rag_eval.compare.history import against_notes
from rag_eval.compare.runs import ComparedRun, check_same_experiment
from rag_eval.compare.tasks import TaskMap, in_process
from rag_eval.replay.step import Execution
from rag_eval.reports.artifacts import comparison_files, comparison_names
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.publish import write_set
from rag_eval.rundir.reader import check_run_dir


@dataclass(frozen=True, slots=True, kw_only=True)
class Judging:
    """What a run is compared with and gated by: within the run (every config against the baseline) unless
    ``against`` names an earlier run directory (``against_self``: the run against itself, as a first night
    does); ``gates``, else the experiment's, else the shipped default; ``intersection``: pair only the queries
    both runs hold; ``notes`` carried by the comparison."""

    gates: GateSet | None = None
    against: str | Path | None = None
    against_self: bool = False
    intersection: bool = False
    notes: Sequence[str] = ()
    other_experiment: bool = False  # pair with a run of another experiment (refused otherwise)


def compare_runs(
    run_dir: str | Path, judged: Judging | None = None, *, out: str | Path | None = None, how: Execution | None = None
) -> Comparison:
    """Compare ``run_dir`` within itself, or against the run directory ``judged.against``, under
    ``judged.gates`` (else the gates its experiment recorded), and write ``compare.json``, ``junit.xml`` and
    ``summary.md`` into ``out`` (default: ``run_dir``), holding its lock. ``out`` naming a file, or a
    directory of other files (unless ``how.force_out``), is refused before anything is read. A comparison
    against another run that would land in ``run_dir`` is written beside the run's own verdict under its own
    names (``compare-vs-OTHER.json``, ...), never over it: :func:`comparison_paths`. ``how.cluster``: each
    comparison a task on Dask workers (the same document)."""
    judged, how = judged or Judging(), how or Execution()
    given, against, intersection = judged.gates, judged.against, judged.intersection
    target = RunStore(out if out is not None else run_dir)
    if out is not None:
        target.check_out(force=how.force_out)
    check_run_dir(Path(run_dir))  # before the lock: a directory that holds no run is not written into
    _, suffix = comparison_place(run_dir, against=against, out=out)
    with target.locked():
        run = ComparedRun.from_dir(run_dir)
        earlier = ComparedRun.from_dir(against) if against is not None else None
        gate_set = given if given is not None else manifest_gates(run.manifest)
        with comparison_tasks(how.cluster) as tasks:
            mixed = [] if earlier is None else check_same_experiment(
                run.experiment_identity(), earlier, force=judged.other_experiment)  # fmt: skip
            notes = (*mixed, *judged.notes, *against_notes(against))
            comparison = compare(run, earlier, gate_set, intersection=intersection, notes=notes, tasks=tasks)
        write_set(target.dir, comparison_files(comparison.document, suffix), what="the comparison")
    return comparison


@contextmanager
def comparison_tasks(cluster: Cluster | None) -> Iterator[TaskMap]:
    """Where a run's comparisons run: one after another here, or as tasks on the Dask ``cluster``."""
    if cluster is None:
        yield in_process
        return
    from rag_eval.cluster.tasks import tasks_on

    with tasks_on(cluster) as on_workers:
        yield on_workers


def comparison_place(
    run_dir: str | Path, *, against: str | Path | None, out: str | Path | None
) -> tuple[Path, str]:
    """(directory, file name suffix) of a comparison's files: ``out``, else the run directory; against
    another run, in the run directory, with ``-vs-OTHER`` (the other run directory's name) in the names.

    >>> comparison_place("reports/latest", against="reports/accepted/x y", out=None)
    (PosixPath('reports/latest'), '-vs-x_y')
    >>> comparison_place("r", against=None, out=None), comparison_place("r", against="o", out="elsewhere")
    ((PosixPath('r'), ''), (PosixPath('elsewhere'), ''))
    """
    directory = Path(out if out is not None else run_dir)
    if against is None or directory.resolve() != Path(run_dir).resolve():
        return directory, ""
    other = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(against).resolve().name or "other").strip("._") or "other"
    return directory, f"-vs-{other}"


def comparison_paths(run_dir: str | Path, *, against: str | Path | None, out: str | Path | None) -> list[Path]:
    """The files :func:`compare_runs` writes."""
    directory, suffix = comparison_place(run_dir, against=against, out=out)
    return [directory / name for name in comparison_names(suffix)]
