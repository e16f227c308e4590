"""The comparison of two configs at a million queries, on one machine: the rows on disk, read back a batch at a
time (as a run's parts are), the per-query values in memory.

``python -m tests.benchmarks.compare_million --queries 1000000`` writes the two configs' rows in parts of
50,000 queries (each part its own seed: :func:`tests.benchmarks.synthetic.per_query_table`), summarises them
as a run does (a batch at a time), then times ``compare`` with the rollout gates: reading the per-query values
back from the parts, then the tests and intervals. It prints the seconds of each step and the process's peak
memory. The parts go to a temporary directory (about 1.4 GB at a million queries), removed at the end.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import load_gates
from rag_eval.compare.runs import IDENTITY, ComparedRun
from rag_eval.metrics.measures import SUMMARY_COLUMNS, summarize
from rag_eval.rundir.rows import LATENCY_COLUMNS
from tests.benchmarks import synthetic
from tests.benchmarks.compare_scale import CUTOFFS

PART = 50_000


def write_parts(queries: int, configs: int, into: Path) -> list[Path]:
    """Each config's rows in parts of :data:`PART` queries, each config's latencies 5% above the previous one's."""
    paths = []
    for start in range(0, queries, PART):
        n = min(PART, queries - start)
        for i in range(configs):
            table = synthetic.per_query_table(n, seed=7 + 1000 * i + start // PART, config=f"c{i}", offset=start)
            for column in LATENCY_COLUMNS:
                j = table.schema.get_field_index(column)
                table = table.set_column(j, column, pa.compute.multiply(table.column(column), 1.05**i))
            path = into / f"part-{start // PART:05d}-{i}.parquet"
            pq.write_table(table, path, compression="lz4")
            paths.append(path)
    return paths


def stored_run(paths: Sequence[Path], configs: int) -> ComparedRun:
    def rows(columns: Sequence[str]) -> Iterator[pa.Table]:
        for path in paths:
            names = set(pq.read_schema(path).names)
            yield pq.read_table(path, columns=[c for c in columns if c in names])

    cfgs = [{"name": f"c{i}", "baseline": i == 0, "cap": 2, "cap_aware": 2, "return_n": 20} for i in range(configs)]
    summary_configs, _ = summarize(rows(SUMMARY_COLUMNS), configs=cfgs, cutoffs=CUTOFFS)
    summary = {"experiment": "million", "baseline": "c0", "cutoffs": list(CUTOFFS), "configs": summary_configs}
    manifest = {"experiment": {"name": "million", "cutoffs": list(CUTOFFS), "baseline": "c0"},
                "dataset": {"name": "synthetic", "checksum": "x"}, "configs": cfgs}  # fmt: skip
    identity = pa.concat_tables(rows(IDENTITY)).to_pandas()
    return ComparedRun(dir=None, table=identity, summary=summary, manifest=manifest, rows=rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=1_000_000)
    parser.add_argument("--configs", type=int, default=2)
    args = parser.parse_args(argv)
    into = Path(tempfile.mkdtemp(prefix="rag-eval-million-"))
    try:
        t0 = time.perf_counter()
        paths = write_parts(args.queries, args.configs, into)
        size = sum(p.stat().st_size for p in paths) / 2**30
        t1 = time.perf_counter()
        run = stored_run(paths, args.configs)
        t2 = time.perf_counter()
        print(f"{args.queries:,} queries x {args.configs} configs: rows written in {t1 - t0:.0f} s ({size:.2f} GB), "
              f"summarised in {t2 - t1:.0f} s", flush=True)  # fmt: skip
        document = compare(run, None, load_gates("rollout")).document
        t3 = time.perf_counter()
        tested = sum(1 for c in document["comparisons"] for m in c["metrics"] if m["p_value"] is not None)
        print(f"compare: {t3 - t2:.0f} s ({tested} p-values, {document['resamples']:,} resamples each)", flush=True)
    finally:
        shutil.rmtree(into, ignore_errors=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    print(f"peak memory of this process: {peak:.1f} GiB", flush=True)


if __name__ == "__main__":
    main()
