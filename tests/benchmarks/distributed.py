"""Wall time of the replay step: serial, and on Dask with 1 and 2 (or more) local worker processes.

    python -m tests.benchmarks.distributed --uri http://127.0.0.1:19530 --queries 4000 [--workers 1,2]
        [--repeats 3] [--latency off] [--configs 1|5] [--keep DIR]

A synthetic data set (precomputed vectors, no model) is ingested once into a collection of its own, then
the replay step alone (:func:`rag_eval.replay.step.replay`, what ``--workers`` distributes) runs
into a fresh run store per try: serial, then each worker count, in turn, ``--repeats`` rounds. A Dask
try includes starting and stopping its LocalCluster. Prints the medians, the ratios (overhead of 1 worker
against serial, speed-up of each count against 1 worker), the load average before and after, and checks
how many cells of each Dask try's rows differ from the serial try of its round (latency columns aside;
after an untimed warm-up replay). The collection is dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from rag_eval.cluster.settings import Cluster
from rag_eval.experiment import Experiment, load_experiment
from rag_eval.experiment.latency import TimingPlan
from rag_eval.ingest.collection import IngestResult
from rag_eval.replay.prepare import Prepared, Progress, ingest_collection, prepare
from rag_eval.replay.step import Execution, replay
from rag_eval.rundir.directory import RunStore
from rag_eval.rundir.rows import LATENCY_COLUMNS
from rag_eval.search.milvus import MilvusStore, is_server_uri
from tests.benchmarks.memory import CONFIGS, EVIDENCE
from tests.benchmarks.synthetic import write_dataset
from tests.unit.frames import read_parts

LATENCY = LATENCY_COLUMNS


def _rows(store: RunStore) -> pa.Table:
    table = read_parts(store)
    return table.drop_columns(list(LATENCY)).sort_by([("query_index", "ascending"), ("config", "ascending")])


def _steps(exp: Experiment, prep: Prepared, ingested: IngestResult, work: Path, workers: int) -> dict[str, float]:
    """One whole run on ``workers`` workers, each step's wall time (what the driver does after the replay)."""
    from rag_eval import jobs
    from rag_eval.compare.comparison import compare
    from rag_eval.compare.gates import experiment_gates
    from rag_eval.replay import provenance

    out: dict[str, float] = {}
    clock = provenance.Clock.start()
    store = RunStore(work / "run-steps")
    with store.locked():
        started = time.perf_counter()
        on_workers = Execution(progress=Progress(quiet=True), cluster=Cluster(workers=workers))
        replayed = replay(exp, prep, ingested, store, on_workers)
        out["replay"] = time.perf_counter() - started
        started = time.perf_counter()
        run = jobs.summarise_run(exp, prep, replayed, clock)
        out["summarise"] = time.perf_counter() - started
        started = time.perf_counter()
        comparison = compare(run, None, experiment_gates(exp.gates, source=exp.source))
        out["compare"] = time.perf_counter() - started
        started = time.perf_counter()
        jobs.publish(exp, prep, replayed, run, comparison)
        out["write"] = time.perf_counter() - started
    return {k: round(v, 2) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True, help="a Milvus server (http://host:port) or a Lite path")
    parser.add_argument("--queries", type=int, default=4000)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency", default="off", help="the timing plan (default off: the replay alone)")
    parser.add_argument("--configs", type=int, choices=(1, 5), default=5)
    parser.add_argument("--keep", help="build the data set here (kept), not in a temporary directory")
    parser.add_argument(
        "--steps", type=int, metavar="N",
        help="then one whole run on N workers, each step timed: replay, summarise, compare, write (the driver's "
        "assembly)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rag-eval-distributed-"))
    data = work / "data"
    if not (data / "queries.jsonl").is_file():
        write_dataset(data, args.queries)
    collection = f"bench_dask_{uuid.uuid4().hex[:8]}"
    (work / "exp.toml").write_text(
        f'[experiment]\nname = "distributed"\nproduction_cap = 2\n\n[dataset]\npath = "{data}"\n\n'
        f'[milvus]\nuri = "{args.uri}"\ncollection = "{collection}"\n\n[ingest]\nprofile = "production"\n\n'
        f"{CONFIGS if args.configs == 5 else EVIDENCE}"
    )
    exp = load_experiment(work / "exp.toml")
    exp = replace(exp, timing=TimingPlan.parse(args.latency), cache_dir=work / "cache")
    quiet = Progress(quiet=True)
    counts = [int(n) for n in args.workers.split(",")]
    modes: list[tuple[str, Cluster | None]] = [("serial", None)] + [(f"dask-{n}", Cluster(workers=n)) for n in counts]
    seconds: dict[str, list[float]] = {name: [] for name, _ in modes}
    load_before = os.getloadavg()
    prep = prepare(exp)
    ingested = ingest_collection(exp, prep, quiet)
    reference = None
    differing: dict[str, list[int]] = {name: [] for name, cluster in modes if cluster is not None}
    try:
        # untimed: on a 2.3 server the first replay right after an ingest can differ from every later one
        # (measured: 34 of 5,000 rows of the 1,000-query set), serial or not; the tries compare with later runs
        warm = RunStore(work / "run-warm-up")
        with warm.locked():
            replay(exp, prep, ingested, warm, Execution(progress=quiet))
            warm.finish()
        for round_ in range(args.repeats):
            for name, cluster in modes:
                store = RunStore(work / f"run-{name}-{round_}")
                with store.locked():
                    started = time.perf_counter()
                    replay(exp, prep, ingested, store, Execution(progress=quiet, cluster=cluster))
                    seconds[name].append(time.perf_counter() - started)
                    rows = _rows(store)
                    if cluster is None:
                        reference = rows
                    else:
                        assert reference is not None
                        differ = sum(a != b for c in rows.column_names
                                     for a, b in zip(rows[c].to_pylist(), reference[c].to_pylist(), strict=True))
                        differing[name].append(differ)  # fmt: skip
                    store.finish()
                print(f"round {round_ + 1} {name}: {seconds[name][-1]:.2f} s", file=sys.stderr, flush=True)
        steps = _steps(exp, prep, ingested, work, args.steps) if args.steps else None
    finally:
        if is_server_uri(args.uri):
            with MilvusStore(ingested.target) as ms:
                ms.drop()
    median = {name: statistics.median(values) for name, values in seconds.items()}
    one = median.get("dask-1")
    result = {
        "queries": args.queries,
        "configs": args.configs,
        "latency": args.latency,
        "backend": "server" if is_server_uri(args.uri) else "lite",
        "repeats": args.repeats,
        "cpus": os.cpu_count(),
        "load_average_before": [round(v, 2) for v in load_before],
        "load_average_after": [round(v, 2) for v in os.getloadavg()],
        "seconds": {name: [round(v, 2) for v in values] for name, values in seconds.items()},
        "median_seconds": {name: round(v, 2) for name, v in median.items()},
        "dask_1_overhead_vs_serial": None if one is None else round(one / median["serial"] - 1, 3),
        "speedup_vs_dask_1": {
            name: round(one / v, 2) for name, v in median.items() if one is not None and name.startswith("dask-")
        },
        "cells_differing_from_the_rounds_serial_rows": differing,
        "whole_run_steps_seconds": steps,
        "queries_per_second": {name: round(args.queries / v, 1) for name, v in median.items()},
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
