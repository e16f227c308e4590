"""The comparison (every metric) at growing numbers of queries: seconds, growth exponent, peak memory.

``python -m tests.benchmarks.compare_scale 1000 4000 16000`` builds, for each size, a run of two configs
on the same queries (:func:`synthetic_run`), and times ``compare`` with the rollout gates (the comparison
alone: no files); then prints the log-log slope between consecutive sizes and the process's peak memory.
``--configs 5`` compares four candidates with the baseline; ``--workers N`` runs each comparison as a task
on a Dask LocalCluster of N processes (started before the clock, as a running cluster would be), and
``--check`` compares that document with the one made in this process.
"""

from __future__ import annotations

import argparse
import itertools
import math
import resource
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from typing import Any

import pyarrow as pa

from rag_eval.cluster.settings import Cluster
from rag_eval.cluster.tasks import tasks_on
from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import load_gates
from rag_eval.compare.runs import IDENTITY, ComparedRun
from rag_eval.compare.tasks import TaskMap, in_process
from rag_eval.metrics.measures import summarize
from rag_eval.rundir.rows import LATENCY_COLUMNS
from tests.benchmarks import synthetic

CUTOFFS = (1, 3, 5, 10)


def synthetic_run(n: int, configs: int = 2) -> ComparedRun:
    """``n`` queries under ``configs`` configs (``c0``, the baseline, ``c1``, ...), each config's rows drawn
    with its own seed and its latencies 5% above the previous config's."""
    names = [f"c{i}" for i in range(configs)]
    tables = []
    for i, name in enumerate(names):
        table = synthetic.per_query_table(n, seed=7 + i, config=name)
        for column in LATENCY_COLUMNS:  # each a little slower, so the latency tests have work to do
            j = table.schema.get_field_index(column)
            table = table.set_column(j, column, pa.compute.multiply(table.column(column), 1.05**i))
        tables.append(table)
    table = pa.concat_tables(tables)
    cfgs = [{"name": c, "baseline": i == 0, "cap": 2, "cap_aware": 2, "return_n": 20} for i, c in enumerate(names)]
    summary_configs, _ = summarize(table, configs=cfgs, cutoffs=CUTOFFS)
    summary = {"experiment": "scale", "baseline": "c0", "cutoffs": list(CUTOFFS), "configs": summary_configs}
    manifest = {"experiment": {"name": "scale", "cutoffs": list(CUTOFFS), "baseline": "c0"},
                "dataset": {"name": "synthetic", "checksum": "x"}, "configs": cfgs}  # fmt: skip
    table = table.combine_chunks()

    def rows(columns: Sequence[str]) -> Iterator[pa.Table]:
        # as a run's parts are read again: Arrow batches of the asked-for columns (ComparedRun.in_store)
        for start in range(0, table.num_rows, 8192):
            yield table.slice(start, 8192).select([c for c in columns if c in table.column_names])

    return ComparedRun(
        dir=None, table=table.select(list(IDENTITY)).to_pandas(), summary=summary, manifest=manifest, rows=rows
    )


def seconds(run: ComparedRun, tasks: TaskMap = in_process) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    document = compare(run, None, load_gates("rollout"), tasks=tasks).document
    return time.perf_counter() - start, document


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sizes", nargs="+", type=int)
    parser.add_argument("--configs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=0, help="Dask local worker processes (0: this process)")
    parser.add_argument("--check", action="store_true", help="the workers' document equals this process's")
    args = parser.parse_args(argv)
    timings = []
    with ExitStack() as stack:
        tasks: TaskMap = in_process
        if args.workers:
            tasks = stack.enter_context(tasks_on(Cluster(workers=args.workers)))
        for n in args.sizes:
            run = synthetic_run(n, args.configs)
            t, document = seconds(run, tasks)
            timings.append(t)
            print(f"{n:>9,} queries, {args.configs} configs: {t:8.2f} s", flush=True)
            if args.check and args.workers:
                same = seconds(run)[1] == document
                print(f"          the same document in this process: {same}", flush=True)
    for (n0, t0), (n1, t1) in itertools.pairwise(zip(args.sizes, timings, strict=True)):
        print(f"growth {n0:,} -> {n1:,}: exponent {math.log(t1 / t0) / math.log(n1 / n0):.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"peak memory of this process: {peak:,.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
